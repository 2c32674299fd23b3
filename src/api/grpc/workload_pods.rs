//! A workload's pods, their logs and the events around them, across the member clusters
//! Karmada placed it on: read live through Karmada's cluster proxy as the caller (the
//! member's RBAC decides, as it does for `kubectl` through the proxy), from the one entry
//! point, so nobody has to connect to N clusters to see why a replica is not ready.

use serde_json::Value;

use super::{log_stream, member_proxy};
use crate::api::objects;
use crate::api::request::{OnInstance, Verb};
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto;

/// Pods listed per member (a workload's pods, with room for surges).
const PODS_READ: u32 = 500;
/// Events read per namespace and place, newest kept.
const EVENTS_READ: u32 = 500;

pub use super::log_stream::LogStream;

/// `spec.selector` as a `labelSelector` query (matchLabels and matchExpressions).
fn selector_query(selector: &Value) -> Option<String> {
    kairship_wire::table::format_label_selector(selector)
}

/// The workload's template (from the cache, as the caller may read it) and the clusters
/// its binding places it on.
async fn placed(
    on: &OnInstance,
    kind_name: &str,
    namespace: &str,
    name: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let kind = objects::kind("kind", kind_name, &Kind::WORKLOADS)?;
    check_name("namespace", namespace)?;
    check_name("name", name)?;
    let reads = on
        .read(Verb::Get, kind, Some(namespace), Some(name))
        .await?;
    let o = reads
        .store(kind)?
        .get(Some(namespace), name)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "{kind_name} {namespace}/{name} not found in instance {:?}",
                on.instance()
            ))
        })?;
    let template: Value = serde_json::to_value(objects::decoded(&o)?)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    // Karmada names a workload's binding `<name>-<kind in lowercase>`.
    let binding = format!("{name}-{}", kind.resource().kind.to_lowercase());
    let reads = on
        .read(
            Verb::Get,
            Kind::ResourceBinding,
            Some(namespace),
            Some(&binding),
        )
        .await?;
    let clusters = match reads
        .store(Kind::ResourceBinding)?
        .get(Some(namespace), &binding)
    {
        Some(b) => {
            let b: Value = serde_json::to_value(objects::decoded(&b)?)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            b["spec"]["clusters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        }
        None => Vec::new(),
    };
    Ok((template, clusters))
}

pub(super) fn pod(cluster: &str, p: &Value) -> proto::Pod {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let statuses: Vec<&Value> = p["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let reason = statuses
        .iter()
        .find_map(|c| {
            c["state"]["waiting"]["reason"]
                .as_str()
                .or_else(|| c["state"]["terminated"]["reason"].as_str())
        })
        .map(String::from)
        .unwrap_or_else(|| s(&p["status"]["reason"]));
    let containers: Vec<String> = p["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| s(&c["name"]))
        .collect();
    let count = |f: &dyn Fn(&Value) -> i64| {
        i32::try_from(statuses.iter().map(|c| f(c)).sum::<i64>()).unwrap_or(i32::MAX)
    };
    proto::Pod {
        cluster: cluster.to_string(),
        name: s(&p["metadata"]["name"]),
        phase: s(&p["status"]["phase"]),
        reason,
        ready_containers: count(&|c| i64::from(c["ready"] == true)),
        containers: i32::try_from(containers.len()).unwrap_or(i32::MAX),
        restarts: count(&|c| c["restartCount"].as_i64().unwrap_or(0)),
        node: s(&p["spec"]["nodeName"]),
        pod_ip: s(&p["status"]["podIP"]),
        created: s(&p["metadata"]["creationTimestamp"]),
        container_names: containers,
    }
}

pub async fn pods(
    on: &OnInstance,
    req: proto::ListWorkloadPodsRequest,
) -> Result<proto::ListWorkloadPodsResponse, ApiError> {
    let (template, clusters) = placed(on, &req.kind, &req.namespace, &req.name).await?;
    // A Job's selector names the control plane's Job by uid, which no member pod carries:
    // its pods go by the Job's name.
    let selector = match template["kind"].as_str() {
        Some("Job") => Some(format!("batch.kubernetes.io/job-name={}", req.name)),
        _ => selector_query(&template["spec"]["selector"]),
    };
    let selector = selector.ok_or_else(|| {
        ApiError::FailedPrecondition(format!(
            "{} {}/{} has no selector its pods could be found by",
            req.kind, req.namespace, req.name
        ))
    })?;
    let query = serde_urlencoded::to_string([
        ("labelSelector", selector.as_str()),
        ("limit", &PODS_READ.to_string()),
    ])
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let rest = format!("/api/v1/namespaces/{}/pods?{query}", req.namespace);
    // Every member at once: one slow member does not hold the others' answers up.
    let reads = clusters.iter().map(|c| {
        let what = format!(
            "the pods of {}/{} in cluster {c:?}",
            req.namespace, req.name
        );
        let rest = rest.clone();
        async move { (c.clone(), member_proxy::get(on, c, &rest, &what).await) }
    });
    let answers = futures::future::join_all(reads).await;
    let clusters = answers
        .into_iter()
        .map(|(cluster, listed)| match listed {
            Ok(list) => proto::ClusterPods {
                pods: list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| pod(&cluster, p))
                    .collect(),
                cluster,
                error: String::new(),
            },
            Err(e) => proto::ClusterPods {
                cluster,
                pods: Vec::new(),
                error: e.to_string(),
            },
        })
        .collect();
    Ok(proto::ListWorkloadPodsResponse { clusters })
}

pub(super) fn event(cluster: &str, e: &Value) -> proto::WorkloadEvent {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let time = ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .map(|f| s(&e[f]))
        .find(|t| !t.is_empty())
        .or_else(|| {
            e["metadata"]["creationTimestamp"]
                .as_str()
                .map(String::from)
        })
        .unwrap_or_default();
    proto::WorkloadEvent {
        cluster: cluster.to_string(),
        object_kind: s(&e["involvedObject"]["kind"]),
        object_name: s(&e["involvedObject"]["name"]),
        r#type: s(&e["type"]),
        reason: s(&e["reason"]),
        message: s(&e["message"]),
        count: e["count"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(1),
        time,
    }
}

/// Whether an event is about the workload: the object itself, its binding, or (on a
/// member) what its controller made, named after it (ReplicaSets `<name>-<hash>`, pods
/// `<name>-<hash>-<id>` or `<name>-<ordinal>`).
pub(super) fn about(e: &Value, name: &str, binding: &str) -> bool {
    let object = e["involvedObject"]["name"].as_str().unwrap_or_default();
    object == name
        || object == binding
        || object
            .strip_prefix(name)
            .is_some_and(|rest| rest.starts_with('-'))
}

pub async fn events(
    on: &OnInstance,
    req: proto::ListWorkloadEventsRequest,
) -> Result<proto::ListWorkloadEventsResponse, ApiError> {
    let (_, clusters) = placed(on, &req.kind, &req.namespace, &req.name).await?;
    let binding = format!("{}-{}", req.name, req.kind.to_lowercase());
    let rest = format!(
        "/api/v1/namespaces/{}/events?limit={EVENTS_READ}",
        req.namespace
    );
    let instance_path = rest.clone();
    let own = on.live("the instance's events", |client| async move {
        let req = http::Request::get(instance_path)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        client.request::<Value>(req).await
    });
    let members = futures::future::join_all(clusters.iter().map(|c| {
        let what = format!("the events of {} in cluster {c:?}", req.namespace);
        let rest = rest.clone();
        async move { (c.clone(), member_proxy::get(on, c, &rest, &what).await) }
    }));
    let (own, members) = tokio::join!(own, members);
    let mut events = Vec::new();
    let mut unavailable = Vec::new();
    for (cluster, listed) in std::iter::once((String::new(), own)).chain(members) {
        match listed {
            Ok(list) => events.extend(
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| about(e, &req.name, &binding))
                    .map(|e| event(&cluster, e)),
            ),
            Err(e) if cluster.is_empty() => return Err(e),
            Err(e) => unavailable.push(format!("{cluster}: {e}")),
        }
    }
    events.sort_by(|a, b| b.time.cmp(&a.time));
    Ok(proto::ListWorkloadEventsResponse {
        events,
        unavailable,
    })
}

/// A pod's log as a stream of chunks; with `follow`, it holds one of the instance's
/// pass-through stream slots while it runs and ends when `closing` resolves.
pub async fn logs(
    on: &OnInstance,
    req: proto::GetPodLogsRequest,
    within: std::time::Duration,
    closing: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<LogStream, ApiError> {
    super::cluster_join::check_cluster_name(&req.cluster)?;
    check_name("namespace", &req.namespace)?;
    check_name("pod", &req.pod)?;
    let query = log_stream::query(&log_stream::Options {
        container: &req.container,
        tail_lines: req.tail_lines,
        since_seconds: req.since_seconds,
        previous: req.previous,
        follow: req.follow,
        timestamps: req.timestamps,
    })?;
    let path = member_proxy::path(
        &req.cluster,
        &format!(
            "/api/v1/namespaces/{}/pods/{}/log?{query}",
            req.namespace, req.pod
        ),
    );
    let slot = match req.follow {
        true => Some(on.open_stream()?),
        false => None,
    };
    let outgoing = http::Request::get(path)
        .body(kube::client::Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let answer = on.send(outgoing, Some(within)).await?;
    let what = format!(
        "the log of pod {}/{} in cluster {:?}",
        req.namespace, req.pod, req.cluster
    );
    log_stream::chunks(answer, &what, slot, closing).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_become_label_selector_queries() {
        let s = json!({"matchLabels": {"app": "web"},
                       "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                            {"key": "canary", "operator": "DoesNotExist"}]});
        assert_eq!(
            selector_query(&s).as_deref(),
            Some("app=web,tier in (a,b),!canary")
        );
        assert_eq!(selector_query(&json!({})), None);
    }

    #[test]
    fn events_about_the_workload_are_told_by_name() {
        let e = |n: &str| json!({"involvedObject": {"name": n}});
        for ok in ["web", "web-deployment", "web-5d8f7", "web-5d8f7-abcde"] {
            assert!(about(&e(ok), "web", "web-deployment"), "{ok}");
        }
        for other in ["webapp", "api-web", "web2"] {
            assert!(!about(&e(other), "web", "web-deployment"), "{other}");
        }
    }
}
