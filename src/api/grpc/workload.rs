//! WorkloadService: Deployments, StatefulSets, DaemonSets and Jobs of an instance, each
//! with the propagation policies that select it and its ResourceBinding placement.

use crate::auth::Role;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::actors::instance::caches::Kind;
use crate::api::convert;
use crate::api::router::{Routed, Router};
use crate::api::{objects, override_diff, paging};
use crate::error::{check_name, ApiError};
use crate::proto::{self, workload_service_server::WorkloadService};

pub struct Workloads(pub Router);

/// Whether a resourceSelector of a policy picks this object (name, namespace, matchLabels).
fn selects(sel: &Value, kind: Kind, o: &DynamicObject, policy_ns: Option<&str>) -> bool {
    let r = kind.resource();
    let s = |k: &str| sel.get(k).and_then(Value::as_str).unwrap_or_default();
    let ns = o.metadata.namespace.as_deref().unwrap_or_default();
    let labels = o.metadata.labels.clone().unwrap_or_default();
    s("apiVersion") == r.api_version
        && s("kind") == r.kind
        && (s("name").is_empty() || s("name") == o.metadata.name.as_deref().unwrap_or_default())
        && (s("namespace").is_empty() || s("namespace") == ns)
        && policy_ns.is_none_or(|p| p == ns)
        && sel
            .pointer("/labelSelector/matchLabels")
            .and_then(Value::as_object)
            .is_none_or(|m| {
                m.iter()
                    .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
            })
}

fn policies_for(routed: &Routed, kind: Kind, o: &DynamicObject) -> Vec<proto::PolicyRef> {
    let mut out = Vec::new();
    for pk in Kind::POLICIES {
        let Some(store) = routed.stores.get(&pk) else {
            continue;
        };
        for p in store.state() {
            let pns = pk
                .namespaced()
                .then(|| p.metadata.namespace.clone().unwrap_or_default());
            let picked = p
                .data
                .pointer("/spec/resourceSelectors")
                .and_then(Value::as_array)
                .is_some_and(|sels| sels.iter().any(|s| selects(s, kind, o, pns.as_deref())));
            if picked {
                out.push(proto::PolicyRef {
                    kind: pk.resource().kind,
                    namespace: pns.unwrap_or_default(),
                    name: p.metadata.name.clone().unwrap_or_default(),
                });
            }
        }
    }
    out
}

/// Karmada names a workload's binding `<name>-<kind in lowercase>`.
fn placement(routed: &Routed, kind: Kind, o: &DynamicObject) -> Option<proto::Placement> {
    let store = routed.stores.get(&Kind::ResourceBinding)?;
    let name = format!(
        "{}-{}",
        o.metadata.name.as_deref()?,
        kind.resource().kind.to_lowercase()
    );
    let rb = store.get(
        &ObjectRef::new_with(&name, Kind::ResourceBinding.resource())
            .within(o.metadata.namespace.as_deref()?),
    )?;
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let arr = |p: &str| {
        rb.data
            .pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    Some(proto::Placement {
        binding_name: name,
        clusters: arr("/spec/clusters")
            .iter()
            .map(|c| proto::TargetCluster {
                name: s(c, "name"),
                replicas: c
                    .get("replicas")
                    .and_then(Value::as_i64)
                    .and_then(|r| i32::try_from(r).ok())
                    .unwrap_or_default(),
            })
            .collect(),
        aggregated_status: arr("/status/aggregatedStatus")
            .iter()
            .map(|a| {
                let count = |k: &str| {
                    a.pointer(&format!("/status/{k}"))
                        .and_then(Value::as_i64)
                        .and_then(|r| i32::try_from(r).ok())
                        .unwrap_or_default()
                };
                proto::AggregatedStatus {
                    cluster_name: s(a, "clusterName"),
                    applied: a.get("applied").and_then(Value::as_bool).unwrap_or(false),
                    health: s(a, "health"),
                    replicas: count("replicas"),
                    ready_replicas: count("readyReplicas"),
                }
            })
            .collect(),
        conditions: convert::conditions(&rb.data["status"]["conditions"]),
        overrides: Vec::new(),
    })
}

/// Per-cluster override diffs, read from the binding's Works in `karmada-es-<cluster>`.
async fn overrides(
    routed: &Routed,
    o: &DynamicObject,
    placement: &proto::Placement,
) -> Result<Vec<proto::ClusterOverrides>, ApiError> {
    let Some(client) = routed.client.clone() else {
        return Ok(Vec::new());
    };
    let works = kube::discovery::ApiResource {
        group: "work.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "work.karmada.io/v1alpha1".into(),
        kind: "Work".into(),
        plural: "works".into(),
    };
    let template = serde_json::to_value(o).unwrap_or_default();
    let ns = o.metadata.namespace.clone().unwrap_or_default();
    let mut out = Vec::new();
    for target in &placement.clusters {
        let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(
            client.clone(),
            &format!("karmada-es-{}", target.name),
            &works,
        );
        let what = format!(
            "instance {:?}: the Works of cluster {}",
            routed.name, target.name
        );
        let listed = routed.call(&what, api.list(&Default::default())).await?;
        // Karmada marks each Work with the binding it came from.
        let work = listed.items.into_iter().find(|w| {
            let a = w.metadata.annotations.clone().unwrap_or_default();
            a.get("resourcebinding.karmada.io/name") == Some(&placement.binding_name)
                && a.get("resourcebinding.karmada.io/namespace") == Some(&ns)
        });
        let Some(manifest) = work
            .as_ref()
            .and_then(|w| w.data.pointer("/spec/workload/manifests/0"))
        else {
            continue;
        };
        out.push(proto::ClusterOverrides {
            cluster: target.name.clone(),
            policies: override_diff::applied_policies(manifest),
            changes: override_diff::changes(&template, manifest),
        });
    }
    Ok(out)
}

fn workload(routed: &Routed, kind: Kind, o: &DynamicObject) -> proto::Workload {
    let int = |p: &str| {
        o.data
            .pointer(p)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or_default()
    };
    let (replicas, ready) = match kind {
        Kind::Job => (int("/spec/parallelism"), int("/status/succeeded")),
        Kind::DaemonSet => (
            int("/status/desiredNumberScheduled"),
            int("/status/numberReady"),
        ),
        _ => (int("/spec/replicas"), int("/status/readyReplicas")),
    };
    proto::Workload {
        metadata: Some(convert::meta(&o.metadata)),
        kind: kind.resource().kind,
        replicas,
        ready_replicas: ready,
        policies: policies_for(routed, kind, o),
        placement: placement(routed, kind, o),
        object_json: convert::object_json(o),
    }
}

#[tonic::async_trait]
impl WorkloadService for Workloads {
    async fn list_workloads(
        &self,
        req: Request<proto::ListWorkloadsRequest>,
    ) -> Result<Response<proto::ListWorkloadsResponse>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::View, &req.instance, "list workloads")?;
        let routed = self.0.route("instance", &req.instance).await?;
        let items = objects::cached(
            &routed,
            &req.kind,
            &Kind::WORKLOADS,
            &req.namespace,
            req.options.as_ref(),
        )?;
        let page = paging::paginate(items, req.options.as_ref())?;
        let workloads = page
            .items
            .iter()
            .map(|(k, o)| workload(&routed, *k, o))
            .collect();
        Ok(Response::new(proto::ListWorkloadsResponse {
            workloads,
            next_page_token: page.next_page_token,
        }))
    }

    async fn get_workload(
        &self,
        req: Request<proto::GetWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::View, &req.instance, "get workloads")?;
        let kind = objects::kind("kind", &req.kind, &Kind::WORKLOADS)?;
        check_name("namespace", &req.namespace)?;
        check_name("name", &req.name)?;
        let routed = self.0.route("instance", &req.instance).await?;
        let store = routed
            .stores
            .get(&kind)
            .ok_or_else(|| ApiError::Unavailable("workload cache missing".into()))?;
        let o = store
            .get(&ObjectRef::new_with(&req.name, kind.resource()).within(&req.namespace))
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "{} {}/{} not found in instance {:?}",
                    req.kind, req.namespace, req.name, req.instance
                ))
            })?;
        let mut w = workload(&routed, kind, &o);
        if let Some(p) = w.placement.as_mut() {
            p.overrides = overrides(&routed, &o, p).await?;
        }
        Ok(Response::new(w))
    }

    async fn create_workload(
        &self,
        req: Request<proto::CreateWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::Edit, &req.instance, "create workloads")?;
        let (kind, obj) = objects::parse(&req.object_json, &Kind::WORKLOADS)?;
        let routed = self.0.route("instance", &req.instance).await?;
        let created = objects::create(&routed, kind, &obj).await?;
        Ok(Response::new(workload(&routed, kind, &created)))
    }

    async fn update_workload(
        &self,
        req: Request<proto::UpdateWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::Edit, &req.instance, "update workloads")?;
        let (kind, obj) = objects::parse(&req.object_json, &Kind::WORKLOADS)?;
        let routed = self.0.route("instance", &req.instance).await?;
        let updated = objects::replace(&routed, kind, &obj).await?;
        Ok(Response::new(workload(&routed, kind, &updated)))
    }

    async fn delete_workload(
        &self,
        req: Request<proto::DeleteWorkloadRequest>,
    ) -> Result<Response<proto::DeleteWorkloadResponse>, Status> {
        let caller = self.0.caller(req.metadata())?;
        let req = req.into_inner();
        self.0
            .authorize(&caller, Role::Edit, &req.instance, "delete workloads")?;
        let kind = objects::kind("kind", &req.kind, &Kind::WORKLOADS)?;
        check_name("namespace", &req.namespace)?;
        check_name("name", &req.name)?;
        let routed = self.0.route("instance", &req.instance).await?;
        objects::delete(&routed, kind, Some(&req.namespace), &req.name).await?;
        Ok(Response::new(proto::DeleteWorkloadResponse {}))
    }
}
