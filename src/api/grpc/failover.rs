//! A workload's failover history, as Karmada records it: graceful eviction tasks on its
//! binding while a move is under way, and the `EvictWorkloadFromCluster*` events Karmada's
//! graceful eviction controller writes on the binding once it is done.

use serde_json::Value;

use crate::api::request::OnInstance;
use crate::proto;

const SUCCEEDED: &str = "EvictWorkloadFromClusterSucceed";
const FAILED: &str = "EvictWorkloadFromClusterFailed";
/// Events read per namespace, newest kept; Karmada's events live an hour by default.
const EVENTS_READ: u32 = 500;
/// How long the workload view waits for the history.
const HISTORY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The binding's `spec.gracefulEvictionTasks`: evictions under way.
pub fn in_progress(binding: &Value) -> Vec<proto::Eviction> {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    binding["spec"]["gracefulEvictionTasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| proto::Eviction {
            cluster: s(t, "fromCluster"),
            in_progress: true,
            reason: s(t, "reason"),
            producer: s(t, "producer"),
            time: s(t, "creationTimestamp"),
            message: s(t, "message"),
        })
        .collect()
}

/// The cluster an eviction event names ("Evict from cluster X succeed.").
fn cluster_of(message: &str) -> Option<&str> {
    message
        .strip_prefix("Evict from cluster ")?
        .split_whitespace()
        .next()
}

/// Evictions Karmada recorded on the binding, read as the caller; none when the caller may
/// not list the namespace's events or the instance does not answer (the rest of the
/// workload view stands without them).
pub async fn history(on: &OnInstance, namespace: &str, binding: &str) -> Vec<proto::Eviction> {
    let what = format!("instance {:?}: the events of {namespace}", on.instance());
    let listed = on.live(&what, |client| {
        let api: kube::Api<k8s_openapi::api::core::v1::Event> =
            kube::Api::namespaced(client, namespace);
        async move {
            api.list(&kube::api::ListParams::default().limit(EVENTS_READ))
                .await
        }
    });
    // The history is extra: a slow instance does not hold the workload view up for it.
    let Ok(Ok(listed)) = tokio::time::timeout(HISTORY_WAIT, listed).await else {
        return Vec::new();
    };
    let mut out: Vec<proto::Eviction> = listed
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("ResourceBinding")
                && e.involved_object.name.as_deref() == Some(binding)
                && matches!(e.reason.as_deref(), Some(SUCCEEDED | FAILED))
        })
        .filter_map(|e| {
            let message = e.message.clone().unwrap_or_default();
            let time = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
                .unwrap_or_default();
            Some(proto::Eviction {
                cluster: cluster_of(&message)?.to_string(),
                in_progress: false,
                reason: e.reason.clone().unwrap_or_default(),
                producer: String::new(),
                time,
                message,
            })
        })
        .collect();
    out.sort_by(|a, b| a.time.cmp(&b.time));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_and_event_messages_read_as_karmada_writes_them() {
        let b = serde_json::json!({"spec": {"gracefulEvictionTasks": [{"fromCluster": "member2",
            "reason": "TaintUntolerated", "producer": "TaintManager", "creationTimestamp": "2026-01-01T00:00:00Z"}]}});
        let t = in_progress(&b);
        assert_eq!((t[0].cluster.as_str(), t[0].in_progress), ("member2", true));
        assert_eq!(
            cluster_of("Evict from cluster member2 succeed."),
            Some("member2")
        );
        assert_eq!(cluster_of("Evict from cluster m-1 failed."), Some("m-1"));
        assert_eq!(cluster_of("something else"), None);
    }
}
