//! ClusterService: member clusters, served from the instance's Cluster cache.

use kube::runtime::reflector::ObjectRef;
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
}
