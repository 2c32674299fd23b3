//! Graceful eviction, as Karmada's taint manager and graceful eviction controller do it:
//! a cluster a binding must leave for a NoExecute taint it does not tolerate becomes a
//! `spec.gracefulEvictionTasks` entry (reason `TaintUntolerated`, producer `TaintManager`)
//! as the binding is scheduled elsewhere; the task is dropped once every cluster the
//! binding now uses reports its workload healthy, and `EvictWorkloadFromClusterSucceed`
//! ("Evict from cluster X succeed.") is recorded on the binding and its template. Those
//! tasks and events are a workload's failover history.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{events, Controller};
use crate::patch::PatchKind;
use crate::store::meta::now_rfc3339;
use crate::store::AsValue;
use kairship_wire::status::ApiResult;

const GROUP: &str = "work.karmada.io";
const V: &str = "v1alpha2";

/// The binding's tasks with one more for each cluster of `previous` it must now leave for
/// an untolerated NoExecute taint; `None` when there is none to add.
pub fn with_evicted(
    spec: &Value,
    previous: &BTreeMap<String, i64>,
    clusters: &[impl AsValue],
) -> Option<Value> {
    let mut tasks: Vec<Value> = spec["gracefulEvictionTasks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut added = false;
    for name in previous.keys() {
        let Some(cluster) = clusters
            .iter()
            .map(AsValue::as_value)
            .find(|c| c["metadata"]["name"] == name.as_str())
        else {
            continue;
        };
        if !super::failover::evicts(&spec["placement"], cluster)
            || tasks.iter().any(|t| t["fromCluster"] == name.as_str())
        {
            continue;
        }
        tasks.push(json!({
            "fromCluster": name,
            "replicas": previous[name],
            "reason": "TaintUntolerated",
            "producer": "TaintManager",
            "purgeMode": "Gracefully",
            "creationTimestamp": now_rfc3339(),
        }));
        added = true;
    }
    added.then_some(Value::Array(tasks))
}

/// Whether every cluster the binding uses reports its workload healthy.
fn settled(binding: &Value) -> bool {
    let statuses = binding["status"]["aggregatedStatus"].as_array();
    binding["spec"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|t| {
            statuses.into_iter().flatten().any(|s| {
                s["clusterName"] == t["name"] && s["health"] == "Healthy" && s["applied"] == true
            })
        })
}

/// Drops the tasks of settled bindings, recording each eviction.
pub fn run(c: &Controller) -> ApiResult<()> {
    for plural in super::BINDING_PLURALS {
        let def = c.def(GROUP, V, plural)?;
        for b in c.list(GROUP, V, plural)? {
            let Some(tasks) = b["spec"]["gracefulEvictionTasks"].as_array() else {
                continue;
            };
            if tasks.is_empty() || !settled(&b) {
                continue;
            }
            let meta = &b["metadata"];
            c.store().patch(
                &def,
                meta["namespace"].as_str().filter(|n| !n.is_empty()),
                meta["name"].as_str().unwrap_or_default(),
                PatchKind::Merge,
                json!({"spec": {"gracefulEvictionTasks": null}})
                    .to_string()
                    .as_bytes(),
                false,
            )?;
            for t in tasks {
                let cluster = t["fromCluster"].as_str().unwrap_or_default();
                let message = format!("Evict from cluster {cluster} succeed.");
                for about in [&b, &b["spec"]["resource"]] {
                    events::record(
                        c,
                        about,
                        false,
                        "EvictWorkloadFromClusterSucceed",
                        &message,
                        events::CONTROLLER_MANAGER,
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untolerated_no_execute_taint_makes_a_task_once() {
        let tainted = json!({"metadata": {"name": "m2"}, "spec": {"taints": [
            {"key": "cluster.karmada.io/not-ready", "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}]}});
        let fine = json!({"metadata": {"name": "m1"}, "spec": {}});
        let clusters = [fine, tainted];
        let previous: BTreeMap<String, i64> = [("m1".into(), 1), ("m2".into(), 1)].into();
        let spec = json!({"placement": {}});
        let tasks = with_evicted(&spec, &previous, &clusters).expect("a task");
        assert_eq!(tasks[0]["fromCluster"], "m2");
        assert_eq!(tasks[0]["reason"], "TaintUntolerated");
        let again = json!({"placement": {}, "gracefulEvictionTasks": tasks});
        assert!(with_evicted(&again, &previous, &clusters).is_none());
    }

    #[test]
    fn settled_when_every_cluster_is_healthy() {
        let b = json!({"spec": {"clusters": [{"name": "m1"}]}, "status": {"aggregatedStatus": [
            {"clusterName": "m1", "applied": true, "health": "Healthy"}]}});
        assert!(settled(&b));
        let b = json!({"spec": {"clusters": [{"name": "m1"}]}, "status": {}});
        assert!(!settled(&b));
    }
}
