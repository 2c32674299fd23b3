//! A managed instance's control plane as karmada-operator runs it in the host: each
//! component's Deployment or StatefulSet (labelled `app.kubernetes.io/managed-by=
//! karmada-operator`, `app.kubernetes.io/instance=<name>`) with its pods, restarts, last
//! failure and health; a component's log; and a restart, as `kubectl rollout restart`
//! does. These are host objects in the namespace Kairship keeps managed instances in, read
//! and written with Kairship's own host identity once the chain has authorized the caller
//! on the instance (listing: view; logs and restarts: admin) and audited the request.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::log_stream::{self, LogStream};
use crate::api::context::ApiContext;
use crate::crd::{Instance, InstanceMode};
use crate::error::{check_name, ApiError};
use crate::proto;

/// The namespace and label selector of `instance`'s components; FAILED_PRECONDITION for an
/// External instance, whose control plane Kairship does not run.
fn scope(ctx: &ApiContext, instance: &Instance) -> Result<(String, String), ApiError> {
    let name = instance.metadata.name.clone().unwrap_or_default();
    if instance.spec.mode != InstanceMode::Managed {
        return Err(ApiError::FailedPrecondition(format!(
            "instance {name:?} is External: its control plane runs elsewhere, and Kairship sees no components of it"
        )));
    }
    let ns = ctx.tree.settings().managed_namespace_of(instance);
    let selector =
        format!("app.kubernetes.io/managed-by=karmada-operator,app.kubernetes.io/instance={name}");
    Ok((ns, selector))
}

/// As [`scope`], once the host shows the instance's `Karmada` object is Kairship's (it
/// carries `kairship.io/instance=<name>`): a same-named object someone else made in that
/// namespace is not this instance's, and nothing here reads, restarts or renews it.
pub(super) async fn owned_scope(
    ctx: &ApiContext,
    instance: &Instance,
) -> Result<(String, String), ApiError> {
    let (ns, selector) = scope(ctx, instance)?;
    let name = instance.metadata.name.clone().unwrap_or_default();
    let karmadas: Api<kube::api::DynamicObject> = Api::namespaced_with(
        ctx.tree.host().clone(),
        &ns,
        &crate::host::karmada::karmada_resource(),
    );
    let what = format!("Karmada {ns}/{name}");
    let karmada = ctx.host_call(&what, karmadas.get_opt(&name)).await?;
    match karmada {
        Some(k) if crate::host::karmada::owned(&k, &name) => Ok((ns, selector)),
        Some(_) => Err(ApiError::FailedPrecondition(format!(
            "{what} is not Kairship's (it lacks the label {}={name}): Kairship neither reads nor changes its components",
            crate::host::scope::OWNER_LABEL
        ))),
        None => Err(ApiError::FailedPrecondition(format!(
            "{what} does not exist (yet): the instance has no components to act on"
        ))),
    }
}

/// A component's name: the operator's `app.kubernetes.io/name` label, else the object's.
fn component_name(meta: &kube::api::ObjectMeta) -> String {
    meta.labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/name"))
        .cloned()
        .or_else(|| meta.name.clone())
        .unwrap_or_default()
}

/// What the pods say: restarts, the latest termination, and a failing container's reason.
fn from_pods(pods: &[&Value]) -> (i32, String, Option<String>) {
    let mut restarts = 0i64;
    let mut last: Option<(String, String)> = None;
    let mut failing = None;
    for p in pods {
        for c in p["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            let t = &c["lastState"]["terminated"];
            if let Some(at) = t["finishedAt"].as_str() {
                if last.as_ref().is_none_or(|(when, _)| at > when.as_str()) {
                    let why = format!(
                        "{} (exit {}) at {at}",
                        t["reason"].as_str().unwrap_or("Terminated"),
                        t["exitCode"].as_i64().unwrap_or_default()
                    );
                    last = Some((at.to_string(), why));
                }
            }
        }
        if failing.is_none() {
            failing = crate::controllers::components::failing(p);
        }
    }
    (
        i32::try_from(restarts).unwrap_or(i32::MAX),
        last.map(|(_, why)| why).unwrap_or_default(),
        failing,
    )
}

struct Workload {
    kind: &'static str,
    meta: kube::api::ObjectMeta,
    replicas: i32,
    ready: i32,
    updated: i32,
    /// The controller has seen the latest spec.
    observed: bool,
    /// `spec.selector`, which the component's pods match.
    selector: Value,
    images: Vec<String>,
}

/// A Deployment or StatefulSet as JSON: both say the same things at the same paths.
fn workload(kind: &'static str, v: &Value) -> Workload {
    let count = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    Workload {
        kind,
        meta: serde_json::from_value(v["metadata"].clone()).unwrap_or_default(),
        replicas: count("/spec/replicas").unwrap_or(1),
        ready: count("/status/readyReplicas").unwrap_or(0),
        updated: count("/status/updatedReplicas").unwrap_or(0),
        observed: v["status"]["observedGeneration"].as_i64()
            >= v["metadata"]["generation"].as_i64(),
        selector: v["spec"]["selector"].clone(),
        images: v["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["image"].as_str().map(String::from))
            .collect(),
    }
}

async fn workloads(ctx: &ApiContext, ns: &str, selector: &str) -> Result<Vec<Workload>, ApiError> {
    let params = ListParams::default().labels(selector);
    let deployments: Api<Deployment> = Api::namespaced(ctx.tree.host().clone(), ns);
    let sets: Api<StatefulSet> = Api::namespaced(ctx.tree.host().clone(), ns);
    let (d, s) = tokio::join!(
        ctx.host_call("the instance's Deployments", deployments.list(&params)),
        ctx.host_call("the instance's StatefulSets", sets.list(&params))
    );
    let json = |o: serde_json::Result<Value>| o.unwrap_or_default();
    let mut out: Vec<Workload> = Vec::new();
    for d in d?.items {
        out.push(workload("Deployment", &json(serde_json::to_value(d))));
    }
    for s in s?.items {
        out.push(workload("StatefulSet", &json(serde_json::to_value(s))));
    }
    out.sort_by_key(|w| component_name(&w.meta));
    Ok(out)
}

/// The pods of every component of instance `name`, in one list: the operator labels each
/// pod template with the instance, and each component's pods are told apart by its own
/// selector ([`pods_of`]).
async fn instance_pods(ctx: &ApiContext, ns: &str, name: &str) -> Result<Vec<Value>, ApiError> {
    let api: Api<Pod> = Api::namespaced(ctx.tree.host().clone(), ns);
    let params = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let list = ctx
        .host_call("the instance's pods", api.list(&params))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect())
}

/// The pods `w` selects among `pods` (a selector without terms selects none here).
fn pods_of<'a>(w: &Workload, pods: &'a [Value]) -> Vec<&'a Value> {
    if w.selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.is_empty())
        && w.selector["matchExpressions"]
            .as_array()
            .is_none_or(|e| e.is_empty())
    {
        return Vec::new();
    }
    pods.iter()
        .filter(|p| {
            kairship_wire::label_selector::label_selector_matches(
                &w.selector,
                &p["metadata"]["labels"],
            )
        })
        .collect()
}

fn component(w: &Workload, pods: &[&Value]) -> proto::Component {
    let (restarts, last_termination, failing) = from_pods(pods);
    let rolling = !w.observed || w.updated < w.replicas;
    let (health, reason) = match (failing, w.ready >= w.replicas) {
        (Some(why), _) => ("Degraded", why),
        (None, true) if !rolling => ("Healthy", String::new()),
        (None, _) if !w.observed => (
            "Progressing",
            "its controller has not seen the latest spec yet".to_string(),
        ),
        (None, _) if rolling => (
            "Progressing",
            format!("rolling out: {}/{} updated", w.updated, w.replicas),
        ),
        (None, _) => (
            "Degraded",
            format!("{}/{} replicas ready", w.ready, w.replicas),
        ),
    };
    let name = component_name(&w.meta);
    proto::Component {
        setting: crate::crd::karmada_spec::setting_of(&name)
            .unwrap_or_default()
            .into(),
        name,
        kind: w.kind.into(),
        replicas: w.replicas,
        ready_replicas: w.ready,
        updated_replicas: w.updated,
        restarts,
        last_termination,
        health: health.into(),
        reason,
        images: w.images.clone(),
        pods: pods
            .iter()
            .map(|p| super::workload_pods::pod("", p))
            .collect(),
    }
}

pub async fn list(
    ctx: &ApiContext,
    req: proto::ListComponentsRequest,
) -> Result<proto::ListComponentsResponse, ApiError> {
    let instance = ctx.instance(&req.name)?;
    let (ns, selector) = owned_scope(ctx, &instance).await?;
    let (ws, pods) = tokio::join!(
        workloads(ctx, &ns, &selector),
        instance_pods(ctx, &ns, &req.name)
    );
    let pods = pods?;
    let components = ws?
        .iter()
        .map(|w| component(w, &pods_of(w, &pods)))
        .collect();
    Ok(proto::ListComponentsResponse { components })
}

async fn find(
    ctx: &ApiContext,
    name: &str,
    component: &str,
) -> Result<(String, Workload), ApiError> {
    check_name("component", component)?;
    let instance = ctx.instance(name)?;
    let (ns, selector) = owned_scope(ctx, &instance).await?;
    let ws = workloads(ctx, &ns, &selector).await?;
    let names: Vec<String> = ws.iter().map(|w| component_name(&w.meta)).collect();
    let w = ws
        .into_iter()
        .find(|w| component_name(&w.meta) == component)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "instance {name:?} has no component {component:?}; it has {}",
                names.join(", ")
            ))
        })?;
    Ok((ns, w))
}

pub async fn restart(
    ctx: &ApiContext,
    req: proto::RestartComponentRequest,
) -> Result<proto::Component, ApiError> {
    let (ns, w) = find(ctx, &req.name, &req.component).await?;
    let object = w.meta.name.clone().unwrap_or_default();
    // As `kubectl rollout restart`: a new template annotation makes a new rollout.
    let at = jiff::Timestamp::now().to_string();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": at
    }}}}});
    let params = PatchParams::default();
    let what = format!("{} {ns}/{object}", w.kind);
    match w.kind {
        "Deployment" => {
            let api: Api<Deployment> = Api::namespaced(ctx.tree.host().clone(), &ns);
            ctx.host_call(
                &what,
                api.patch(&object, &params, &Patch::Strategic(&patch)),
            )
            .await?;
        }
        _ => {
            let api: Api<StatefulSet> = Api::namespaced(ctx.tree.host().clone(), &ns);
            ctx.host_call(
                &what,
                api.patch(&object, &params, &Patch::Strategic(&patch)),
            )
            .await?;
        }
    }
    tracing::info!(instance = %req.name, component = %req.component, object = %what, "component restart asked for");
    let (ns, w) = find(ctx, &req.name, &req.component).await?;
    let pods = instance_pods(ctx, &ns, &req.name).await?;
    Ok(component(&w, &pods_of(&w, &pods)))
}

pub async fn logs(
    ctx: &ApiContext,
    req: proto::GetComponentLogsRequest,
    closing: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<LogStream, ApiError> {
    let (ns, w) = find(ctx, &req.name, &req.component).await?;
    let pods = instance_pods(ctx, &ns, &req.name).await?;
    let mut names: Vec<&str> = pods_of(&w, &pods)
        .into_iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    names.sort();
    let pod = match req.pod.as_str() {
        "" => names.first().copied().ok_or_else(|| {
            ApiError::NotFound(format!("component {:?} has no pods", req.component))
        })?,
        p if names.contains(&p) => p,
        p => {
            return Err(ApiError::NotFound(format!(
                "pod {p:?} is not one of component {:?}'s: {}",
                req.component,
                names.join(", ")
            )))
        }
    };
    let query = log_stream::query(&log_stream::Options {
        container: &req.container,
        tail_lines: req.tail_lines,
        since_seconds: 0,
        previous: req.previous,
        follow: req.follow,
        timestamps: false,
    })?;
    let path = format!("/api/v1/namespaces/{ns}/pods/{pod}/log?{query}");
    let outgoing = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let what = format!("the log of component {:?} (pod {pod})", req.component);
    let within = ctx.tree.settings().host_call_timeout;
    let answer = tokio::time::timeout(within, ctx.tree.host().send(outgoing))
        .await
        .map_err(|_| {
            ApiError::DeadlineExceeded(format!("{what}: the host did not answer within {within:?}"))
        })?
        .map_err(|e| ApiError::Unavailable(format!("{what}: {e}")))?;
    log_stream::chunks(answer, &what, (), closing).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn w(replicas: i32, ready: i32, updated: i32) -> Workload {
        Workload {
            kind: "Deployment",
            meta: kube::api::ObjectMeta {
                name: Some("team-a-karmada-apiserver".into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    "karmada-apiserver".to_string(),
                )])),
                ..Default::default()
            },
            replicas,
            ready,
            updated,
            observed: true,
            selector: Value::Null,
            images: Vec::new(),
        }
    }

    #[test]
    fn deployments_and_statefulsets_read_alike() {
        let v = json!({"metadata": {"name": "m-etcd", "generation": 3,
                           "labels": {"app.kubernetes.io/name": "etcd"}},
                       "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "etcd"}},
                                "template": {"spec": {"containers": [{"name": "etcd", "image": "etcd:3.6"}]}}},
                       "status": {"observedGeneration": 3, "readyReplicas": 2, "updatedReplicas": 3}});
        let w = workload("StatefulSet", &v);
        assert_eq!(component_name(&w.meta), "etcd");
        assert_eq!(
            (w.replicas, w.ready, w.updated, w.observed),
            (3, 2, 3, true)
        );
        let pod = |app: &str| json!({"metadata": {"labels": {"app": app}}});
        let pods = [pod("etcd"), pod("other")];
        assert_eq!(pods_of(&w, &pods), [&pods[0]]);
        assert_eq!(w.images, ["etcd:3.6"]);
        assert_eq!(component(&w, &[]).health, "Degraded");
        let mut stale = v.clone();
        stale["status"]["observedGeneration"] = json!(2);
        assert!(!workload("StatefulSet", &stale).observed);
    }

    #[test]
    fn health_reads_rollout_readiness_and_failing_containers() {
        let c = component(&w(2, 2, 2), &[]);
        assert_eq!(
            (c.name.as_str(), c.health.as_str()),
            ("karmada-apiserver", "Healthy")
        );
        assert_eq!(component(&w(2, 1, 1), &[]).health, "Progressing");
        assert_eq!(component(&w(2, 1, 2), &[]).health, "Degraded");
        let crashing = json!({"metadata": {"name": "p1"}, "status": {"containerStatuses": [{
            "name": "apiserver", "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"reason": "Error", "exitCode": 1, "finishedAt": "2026-11-26T09:00:00Z"}}}]}});
        let c = component(&w(1, 1, 1), &[&crashing]);
        assert_eq!(c.health, "Degraded");
        assert!(
            c.reason.contains("p1") && c.reason.contains("CrashLoopBackOff"),
            "{}",
            c.reason
        );
        assert_eq!(c.restarts, 4);
        assert_eq!(c.last_termination, "Error (exit 1) at 2026-11-26T09:00:00Z");
    }
}
