//! ClusterService: member clusters, served from the instance's Cluster cache.

use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::actors::instance::caches::Kind;
use crate::api::convert;
use crate::api::error::{check_name, ApiError};
use crate::api::paging;
use crate::api::router::Router;
use crate::auth::Role;
use crate::proto::{self, cluster_service_server::ClusterService};

pub struct Clusters(pub Router);

#[tonic::async_trait]
impl ClusterService for Clusters {
    async fn list_clusters(
        &self,
        req: Request<proto::ListClustersRequest>,
    ) -> Result<Response<proto::ListClustersResponse>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::View, &req.instance, "list clusters")?;
        let routed = self.0.route("instance", &req.instance).await?;
        let sel = paging::selector(req.options.as_ref())?;
        let store = routed
            .stores
            .get(&Kind::Cluster)
            .ok_or_else(|| ApiError::Unavailable("cluster cache missing".into()))?;
        let items = store
            .state()
            .iter()
            .filter(|c| paging::labels_match(&sel, c.metadata.labels.as_ref()))
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    convert::cluster(c),
                )
            })
            .collect();
        let page = paging::paginate(items, req.options.as_ref())?;
        Ok(Response::new(proto::ListClustersResponse {
            clusters: page.items,
            next_page_token: page.next_page_token,
        }))
    }

    async fn get_cluster(
        &self,
        req: Request<proto::GetClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::View, &req.instance, "get clusters")?;
        check_name("name", &req.name)?;
        let routed = self.0.route("instance", &req.instance).await?;
        let store = routed
            .stores
            .get(&Kind::Cluster)
            .ok_or_else(|| ApiError::Unavailable("cluster cache missing".into()))?;
        let key = ObjectRef::new_with(&req.name, Kind::Cluster.resource());
        let c = store.get(&key).ok_or_else(|| {
            ApiError::NotFound(format!(
                "cluster {:?} not found in instance {:?}",
                req.name, req.instance
            ))
        })?;
        Ok(Response::new(convert::cluster(&c)))
    }

    async fn cordon_cluster(
        &self,
        req: Request<proto::CordonClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        self.set_unschedulable(req, true).await
    }

    async fn uncordon_cluster(
        &self,
        req: Request<proto::CordonClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        self.set_unschedulable(req, false).await
    }
}

impl Clusters {
    /// Adds or removes the unschedulable taint on the instance's Cluster object; a
    /// conflicting concurrent write is retried once from the fresh object.
    async fn set_unschedulable(
        &self,
        req: Request<proto::CordonClusterRequest>,
        cordon: bool,
    ) -> Result<Response<proto::Cluster>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        let action = if cordon {
            "cordon clusters"
        } else {
            "uncordon clusters"
        };
        self.0
            .authorize(&caller, Role::Admin, &req.instance, action)?;
        check_name("name", &req.name)?;
        let routed = self.0.route("instance", &req.instance).await?;
        let client = routed.client.clone().ok_or_else(|| {
            ApiError::Unavailable(format!("instance {:?} is not connected", req.instance))
        })?;
        let api: Api<DynamicObject> = Api::all_with(client, &Kind::Cluster.resource());
        let what = format!("cluster {:?} in instance {:?}", req.name, req.instance);
        let not_found = |e: kube::Error| Status::from(ApiError::from_kube(e, &what));
        for attempt in 0..2 {
            let mut c = bounded(api.get(&req.name)).await?.map_err(not_found)?;
            let mut taints: Vec<Value> = c.data["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let had = taints
                .iter()
                .any(|t| t["key"] == convert::UNSCHEDULABLE_TAINT);
            if had == cordon {
                return Ok(Response::new(convert::cluster(&c)));
            }
            taints.retain(|t| t["key"] != convert::UNSCHEDULABLE_TAINT);
            if cordon {
                taints.push(serde_json::json!({"key": convert::UNSCHEDULABLE_TAINT, "effect": "NoSchedule",
                    "timeAdded": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}));
            }
            c.data["spec"]["taints"] = Value::Array(taints);
            match bounded(api.replace(&req.name, &PostParams::default(), &c)).await? {
                Ok(updated) => return Ok(Response::new(convert::cluster(&updated))),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt == 0 => continue,
                Err(e) => return Err(not_found(e)),
            }
        }
        Err(ApiError::Aborted(format!("cluster {:?} kept changing; try again", req.name)).into())
    }
}

/// Writes to an instance answer within this, or fail with DEADLINE_EXCEEDED.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> Result<T, Status> {
    tokio::time::timeout(std::time::Duration::from_secs(15), f)
        .await
        .map_err(|_| {
            ApiError::DeadlineExceeded("the instance did not answer within 15s".into()).into()
        })
}
