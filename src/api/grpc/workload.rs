//! WorkloadService: Deployments, StatefulSets, DaemonSets and Jobs of an instance, each
//! with the policies that act on it (the propagation policy Karmada let claim it, the
//! override policies) and its ResourceBinding placement.

use kairship_wire::policy_claim;
use kube::api::DynamicObject;
use serde_json::{json, Value};
use tonic::{Request, Response, Status};

use super::beside::{claim_of, pickers, placement_of, Beside, Claim, Picker};
use super::on_instance;
use crate::api::context::ApiContext;
use crate::api::convert;
use crate::api::request::{OnInstance, Reads, Verb};
use crate::api::{objects, override_diff, paging};
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto::{self, workload_service_server::WorkloadService};

pub struct Workloads(pub ApiContext);

/// The policies that act on a workload, as Karmada decided: the (Cluster)PropagationPolicy
/// whose claim Karmada recorded on it (or, while none is recorded, the one Karmada's rules
/// pick: a PropagationPolicy of its namespace before a ClusterPropagationPolicy, then
/// priority, specificity and name), and every override policy whose selectors match it.
fn policies_for(
    reads: &Reads<'_>,
    beside: &Beside,
    kind: Kind,
    o: &DynamicObject,
) -> Vec<proto::PolicyRef> {
    let ns = o.metadata.namespace.as_deref().unwrap_or_default();
    let pickers = beside.policies.get_or_init(|| pickers(reads));
    let visible = |p: &&Picker| beside.allows(p.kind, ns);
    let r = kind.resource();
    let template = json!({
        "apiVersion": r.api_version, "kind": r.kind,
        "metadata": {"name": o.metadata.name, "namespace": ns, "labels": o.metadata.labels},
    });
    let in_scope = |p: &&Picker| p.namespace.as_deref().is_none_or(|pns| pns == ns);
    let reference = |p: &Picker, claimed: bool| proto::PolicyRef {
        kind: p.kind.resource().kind,
        namespace: p.namespace.clone().unwrap_or_default(),
        name: p.name.clone(),
        claimed,
    };
    let mut out = Vec::new();
    let claim = claim_of(o);
    let claimer = pickers.iter().filter(visible).find(|p| match &claim {
        Some(Claim::Namespaced(cns, name)) => {
            p.kind == Kind::PropagationPolicy
                && p.namespace.as_deref() == Some(cns)
                && &p.name == name
        }
        Some(Claim::Cluster(name)) => p.kind == Kind::ClusterPropagationPolicy && &p.name == name,
        None => false,
    });
    match (claim, claimer) {
        (Some(_), Some(p)) => out.push(reference(p, true)),
        // Claimed by a policy the caller may not see (or one since deleted): nothing shown.
        (Some(_), None) => {}
        (None, _) => {
            let of_kind = |k: Kind| -> Vec<&Picker> {
                pickers
                    .iter()
                    .filter(|p| p.kind == k)
                    .filter(in_scope)
                    .collect()
            };
            let pending = [Kind::PropagationPolicy, Kind::ClusterPropagationPolicy]
                .into_iter()
                .find_map(|k| {
                    let candidates = of_kind(k);
                    let chosen =
                        policy_claim::pick(candidates.iter().map(|p| &p.policy), &template)?;
                    candidates
                        .into_iter()
                        .find(|p| std::ptr::eq(&p.policy, chosen))
                });
            if let Some(p) = pending.filter(|p| visible(p)) {
                out.push(reference(p, false));
            }
        }
    }
    out.extend(
        pickers
            .iter()
            .filter(|p| matches!(p.kind, Kind::OverridePolicy | Kind::ClusterOverridePolicy))
            .filter(visible)
            .filter(in_scope)
            .filter(|p| policy_claim::policy_match(&p.policy, &template).is_some())
            .map(|p| reference(p, false)),
    );
    out
}

/// Karmada names a workload's binding `<name>-<kind in lowercase>`.
fn placement(
    reads: &Reads<'_>,
    beside: &Beside,
    kind: Kind,
    o: &DynamicObject,
) -> Option<proto::Placement> {
    if !beside.allows(Kind::ResourceBinding, o.metadata.namespace.as_deref()?) {
        return None;
    }
    let store = reads.store(Kind::ResourceBinding).ok()?;
    let name = format!(
        "{}-{}",
        o.metadata.name.as_deref()?,
        kind.resource().kind.to_lowercase()
    );
    let rb = store
        .get(o.metadata.namespace.as_deref(), &name)?
        .decode()
        .ok()?;
    Some(placement_of(name, &rb.data))
}

/// Per-cluster override diffs, read as the caller from the binding's Works in
/// `karmada-es-<cluster>` (none for callers who may not read Works: admins only).
async fn overrides(
    on: &OnInstance,
    o: &DynamicObject,
    placement: &proto::Placement,
) -> Result<Vec<proto::ClusterOverrides>, ApiError> {
    let template = serde_json::to_value(o).unwrap_or_default();
    let ns = o.metadata.namespace.clone().unwrap_or_default();
    let mut out = Vec::new();
    for target in &placement.clusters {
        let listed = super::beside::works_of(on, &target.name).await;
        let listed = match listed {
            Ok(l) => l,
            // Works carry the manifests they propagate, Secrets' data included: only
            // admins read them. Others see placement and status from the binding, without
            // per-cluster override diffs.
            Err(ApiError::Forbidden(_) | ApiError::PermissionDenied(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
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

fn workload(reads: &Reads<'_>, beside: &Beside, kind: Kind, o: &DynamicObject) -> proto::Workload {
    proto::Workload {
        policies: policies_for(reads, beside, kind, o),
        placement: placement(reads, beside, kind, o),
        ..workload_alone(kind, o)
    }
}

/// The workload without what stands beside it (its policies and placement).
fn workload_alone(kind: Kind, o: &DynamicObject) -> proto::Workload {
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
        policies: Vec::new(),
        placement: None,
        object_json: convert::object_json(o),
    }
}

#[tonic::async_trait]
impl WorkloadService for Workloads {
    async fn list_workloads(
        &self,
        req: Request<proto::ListWorkloadsRequest>,
    ) -> Result<Response<proto::ListWorkloadsResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (items, filtered, reads) = objects::cached(
            &on,
            &req.kind,
            &Kind::WORKLOADS,
            &req.namespace,
            req.options.as_ref(),
        )
        .await?;
        let page = paging::paginate(items, req.options.as_ref())?;
        let namespaces = page
            .items
            .iter()
            .filter_map(|(_, o)| o.namespace().map(String::from));
        let beside = Beside::of(&on, namespaces).await;
        let workloads = page
            .items
            .iter()
            .map(|(k, o)| Ok(workload(&reads, &beside, *k, &objects::decoded(o)?)))
            .collect::<Result<_, ApiError>>()?;
        Ok(Response::new(proto::ListWorkloadsResponse {
            workloads,
            next_page_token: page.next_page_token,
            filtered,
        }))
    }

    async fn get_workload(
        &self,
        req: Request<proto::GetWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let kind = objects::kind("kind", &req.kind, &Kind::WORKLOADS)?;
        check_name("namespace", &req.namespace)?;
        check_name("name", &req.name)?;
        let reads = on
            .read(Verb::Get, kind, Some(&req.namespace), Some(&req.name))
            .await?;
        let o = reads
            .store(kind)?
            .get(Some(&req.namespace), &req.name)
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "{} {}/{} not found in instance {:?}",
                    req.kind, req.namespace, req.name, req.instance
                ))
            })?;
        let o = objects::decoded(&o)?;
        let beside = Beside::of(&on, [req.namespace.clone()]).await;
        let mut w = workload(&reads, &beside, kind, &o);
        if let Some(p) = w.placement.as_mut() {
            // Both are read live from the instance: at once, not one after the other.
            let (changes, done) = tokio::join!(
                overrides(&on, &o, p),
                super::failover::history(&on, &req.namespace, &p.binding_name)
            );
            p.overrides = changes?;
            p.evictions.extend(done);
        }
        Ok(Response::new(w))
    }

    async fn create_workload(
        &self,
        req: Request<proto::CreateWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (kind, obj) = objects::parse(&req.object_json, &Kind::WORKLOADS)?;
        let created = objects::create(&on, kind, &obj).await?;
        Ok(Response::new(shown(&on, kind, &created).await))
    }

    async fn update_workload(
        &self,
        req: Request<proto::UpdateWorkloadRequest>,
    ) -> Result<Response<proto::Workload>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let (kind, obj) = objects::parse(&req.object_json, &Kind::WORKLOADS)?;
        let updated = objects::replace(&on, kind, &obj).await?;
        Ok(Response::new(shown(&on, kind, &updated).await))
    }

    async fn promote_workload(
        &self,
        req: Request<proto::PromoteWorkloadRequest>,
    ) -> Result<Response<proto::PromoteWorkloadResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let p = super::workload_promote::promote(&on, req.into_inner()).await?;
        Ok(Response::new(proto::PromoteWorkloadResponse {
            workload: Some(shown(&on, p.kind, &p.object).await),
            policy_name: p.policy_name,
            promoted: p.promoted,
        }))
    }

    async fn list_workload_pods(
        &self,
        req: Request<proto::ListWorkloadPodsRequest>,
    ) -> Result<Response<proto::ListWorkloadPodsResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let r = super::workload_pods::pods(&on, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    type GetPodLogsStream = super::workload_pods::LogStream;

    async fn get_pod_logs(
        &self,
        req: Request<proto::GetPodLogsRequest>,
    ) -> Result<Response<Self::GetPodLogsStream>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let within = self.0.tree.settings().request_timeout;
        let drain = self.0.drain.clone();
        let closing = async move { drain.closing().await };
        let r = super::workload_pods::logs(&on, req.into_inner(), within, closing).await?;
        Ok(Response::new(r))
    }

    async fn trace_resource(
        &self,
        req: Request<proto::TraceResourceRequest>,
    ) -> Result<Response<proto::Trace>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        Ok(Response::new(
            super::trace::trace(&on, req.into_inner()).await?,
        ))
    }

    async fn list_workload_events(
        &self,
        req: Request<proto::ListWorkloadEventsRequest>,
    ) -> Result<Response<proto::ListWorkloadEventsResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let r = super::workload_pods::events(&on, req.into_inner()).await?;
        Ok(Response::new(r))
    }

    async fn delete_workload(
        &self,
        req: Request<proto::DeleteWorkloadRequest>,
    ) -> Result<Response<proto::DeleteWorkloadResponse>, Status> {
        let instance = req.get_ref().instance.clone();
        let on = on_instance(&self.0, &req, &instance).await?;
        let req = req.into_inner();
        let kind = objects::kind("kind", &req.kind, &Kind::WORKLOADS)?;
        check_name("namespace", &req.namespace)?;
        check_name("name", &req.name)?;
        objects::delete(&on, kind, Some(&req.namespace), &req.name).await?;
        Ok(Response::new(proto::DeleteWorkloadResponse {}))
    }
}

/// A workload with what `beside` lets the caller see of its policies and placement; `None`
/// when the instance does not let the caller read it.
pub(super) async fn workload_for(
    on: &OnInstance,
    beside: &Beside,
    kind: Kind,
    o: &DynamicObject,
) -> Option<proto::Workload> {
    let ns = o.metadata.namespace.as_deref();
    let reads = on
        .read(Verb::Get, kind, ns, o.metadata.name.as_deref())
        .await
        .ok()?;
    Some(workload(&reads, beside, kind, o))
}

/// A workload just written, with what the caller may see beside it.
async fn shown(on: &OnInstance, kind: Kind, o: &DynamicObject) -> proto::Workload {
    let ns = o.metadata.namespace.clone().unwrap_or_default();
    let beside = Beside::of(on, [ns]).await;
    match workload_for(on, &beside, kind, o).await {
        Some(w) => w,
        None => workload_alone(kind, o),
    }
}
