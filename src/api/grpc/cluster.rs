//! ClusterService: member clusters, served from the instance's Cluster cache; cordon,
//! uncordon and taints written to the instance (read-modify-write on the live object).

use serde_json::{json, Value};
use tonic::{Request, Response, Status};

use super::on_instance;
use crate::api::context::ApiContext;
use crate::api::convert;
use crate::api::request::{OnInstance, Verb};
use crate::api::{objects, paging};
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto::{self, cluster_service_server::ClusterService};

pub struct Clusters(pub ApiContext);

use crate::api::convert::UNSCHEDULABLE;
/// How long a read through the Cluster proxy may take.
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn taint_json(t: &proto::Taint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect});
    if !t.value.is_empty() {
        v["value"] = t.value.clone().into();
    }
    if !t.time_added.is_empty() {
        v["timeAdded"] = t.time_added.clone().into();
    }
    v
}

fn check_taints(taints: &[proto::Taint]) -> Result<(), ApiError> {
    for (i, t) in taints.iter().enumerate() {
        if t.key.is_empty() {
            return Err(ApiError::InvalidArgument {
                field: format!("taints[{i}].key"),
                message: "required".into(),
            });
        }
        if !EFFECTS.contains(&t.effect.as_str()) {
            return Err(ApiError::InvalidArgument {
                field: format!("taints[{i}].effect"),
                message: format!("{:?} is not one of {EFFECTS:?}", t.effect),
            });
        }
    }
    Ok(())
}

/// Rewrites a cluster's taints from the live object, guarded by its resourceVersion.
/// The read-modify-write is Kairship's own, not the caller's: a write that lost to
/// another (karmada-controller-manager updates Clusters all the time) is redone from a
/// fresh read, a few times.
async fn edit_taints(
    on: &OnInstance,
    name: &str,
    edit: impl Fn(Vec<Value>) -> Vec<Value>,
) -> Result<proto::Cluster, ApiError> {
    const ATTEMPTS: u32 = 4;
    let mut attempt = 1;
    loop {
        let live = objects::get_live(on, Kind::Cluster, None, name).await?;
        let current: Vec<Value> = live
            .data
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let patch = json!({
            "metadata": {"resourceVersion": live.metadata.resource_version},
            "spec": {"taints": edit(current)},
        });
        match objects::merge_patch(on, Kind::Cluster, None, name, &patch).await {
            Ok(updated) => return Ok(convert::cluster(&updated)),
            Err(ApiError::Aborted(_)) if attempt < ATTEMPTS => {
                tokio::time::sleep(std::time::Duration::from_millis(50 * u64::from(attempt))).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

impl Clusters {
    async fn cordon(
        &self,
        req: Request<proto::CordonClusterRequest>,
        cordon: bool,
    ) -> Result<Response<proto::Cluster>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        check_name("name", &req.name)?;
        let c = edit_taints(&on, &req.name, |mut taints| {
            taints.retain(|t| !(t["key"] == UNSCHEDULABLE && t["effect"] == "NoSchedule"));
            if cordon {
                taints.push(json!({"key": UNSCHEDULABLE, "effect": "NoSchedule"}));
            }
            taints
        })
        .await?;
        Ok(Response::new(c))
    }
}

#[tonic::async_trait]
impl ClusterService for Clusters {
    async fn join_cluster(
        &self,
        req: Request<proto::JoinClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let networks = &self.0.tree.settings().member_networks;
        let c = super::cluster_join::join(&on, req.into_inner(), networks).await?;
        Ok(Response::new(c))
    }

    async fn create_registration_token(
        &self,
        req: Request<proto::CreateRegistrationTokenRequest>,
    ) -> Result<Response<proto::RegistrationToken>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let t = super::cluster_register::create_token(&on, req.into_inner()).await?;
        Ok(Response::new(t))
    }

    async fn remove_cluster(
        &self,
        req: Request<proto::RemoveClusterRequest>,
    ) -> Result<Response<proto::RemoveClusterResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let networks = &self.0.tree.settings().member_networks;
        let r = super::cluster_remove::remove(&on, req.into_inner(), networks).await?;
        Ok(Response::new(r))
    }

    async fn list_clusters(
        &self,
        req: Request<proto::ListClustersRequest>,
    ) -> Result<Response<proto::ListClustersResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let sel = paging::selector(req.options.as_ref())?;
        let (reads, _) = on.list(Kind::Cluster, "").await?;
        let items = reads
            .store(Kind::Cluster)?
            .state()
            .iter()
            .filter(|c| paging::cached_labels_match(&sel, c))
            .map(|c| {
                Ok((
                    c.name().to_string(),
                    convert::cluster(&objects::decoded(c)?),
                ))
            })
            .collect::<Result<_, ApiError>>()?;
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
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        check_name("name", &req.name)?;
        let reads = on
            .read(Verb::Get, Kind::Cluster, None, Some(&req.name))
            .await?;
        let c = reads
            .store(Kind::Cluster)?
            .get(None, &req.name)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "cluster {:?} not found in instance {:?}",
                    req.name, req.instance
                ))
            })?;
        Ok(Response::new(convert::cluster(&objects::decoded(&c)?)))
    }

    async fn cordon_cluster(
        &self,
        req: Request<proto::CordonClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        self.cordon(req, true).await
    }

    async fn uncordon_cluster(
        &self,
        req: Request<proto::CordonClusterRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        self.cordon(req, false).await
    }

    async fn list_cluster_nodes(
        &self,
        req: Request<proto::ListClusterNodesRequest>,
    ) -> Result<Response<proto::ListClusterNodesResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        check_name("name", &req.name)?;
        // Through Karmada's cluster proxy, as the caller: the member's RBAC decides.
        let path = format!(
            "/apis/cluster.karmada.io/v1alpha1/clusters/{}/proxy/api/v1/nodes",
            req.name
        );
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let what = format!("nodes of cluster {:?}", req.name);
        let list: Value = on
            .live(&what, |client| async move { client.request(request).await })
            .await?;
        let nodes = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| proto::ClusterNode {
                name: n["metadata"]["name"].as_str().unwrap_or_default().into(),
                ready: n["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                }),
                kubelet_version: n["status"]["nodeInfo"]["kubeletVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            })
            .collect();
        Ok(Response::new(proto::ListClusterNodesResponse { nodes }))
    }

    async fn set_cluster_taints(
        &self,
        req: Request<proto::SetClusterTaintsRequest>,
    ) -> Result<Response<proto::Cluster>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        check_name("name", &req.name)?;
        check_taints(&req.taints)?;
        let taints: Vec<Value> = req.taints.iter().map(taint_json).collect();
        let c = edit_taints(&on, &req.name, |_| taints.clone()).await?;
        Ok(Response::new(c))
    }
}
