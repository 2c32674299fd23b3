//! Cluster failover: a NotReady cluster gets the NoSchedule `cluster.karmada.io/not-ready`
//! taint at once and the NoExecute one after a grace period; a binding whose cluster
//! carries a NoExecute taint it does not tolerate (or whose toleration ran out) is
//! rescheduled onto the remaining clusters. Taints go when the cluster is Ready again.

use serde_json::{json, Value};
use tracing::info;

use super::scheduler::cluster_ready;
use super::{Controller, KarmadaConfig};
use crate::patch::PatchKind;
use crate::store::meta::now_rfc3339;
use kairship_wire::status::ApiResult;

pub const NOT_READY: &str = "cluster.karmada.io/not-ready";
pub const UNSCHEDULABLE: &str = "cluster.karmada.io/unschedulable";

fn parse_time(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str()?.parse().ok()
}

fn seconds_since(v: &Value) -> Option<f64> {
    let t = parse_time(v)?;
    let d = jiff::Timestamp::now().duration_since(t);
    Some(d.as_secs_f64())
}

/// How long a cluster has been NotReady, if it is.
fn not_ready_for(cluster: &Value) -> Option<f64> {
    if cluster_ready(cluster) {
        return None;
    }
    let cond = cluster["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    seconds_since(&cond["lastTransitionTime"]).or(Some(0.0))
}

/// The taints a cluster should carry given its readiness, keeping everyone else's.
pub fn desired_taints(cluster: &Value, grace: std::time::Duration) -> Vec<Value> {
    let current: Vec<Value> = cluster["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<Value> = current
        .iter()
        .filter(|t| t["key"] != NOT_READY)
        .cloned()
        .collect();
    if let Some(down) = not_ready_for(cluster) {
        let keep = |effect: &str| {
            current
                .iter()
                .find(|t| t["key"] == NOT_READY && t["effect"] == effect)
                .cloned()
                .unwrap_or_else(
                    || json!({"key": NOT_READY, "effect": effect, "timeAdded": now_rfc3339()}),
                )
        };
        out.push(keep("NoSchedule"));
        if down >= grace.as_secs_f64() {
            out.push(keep("NoExecute"));
        }
    }
    out
}

/// Whether a placement must leave `cluster` now: a NoExecute taint it does not tolerate,
/// or tolerates only for a time that has run out. Policies without a toleration of the
/// not-ready taint get Karmada's default one (`eviction_toleration`).
pub fn evicts(placement: &Value, cluster: &Value, config: &KarmadaConfig) -> bool {
    let tolerations: Vec<Value> = placement["clusterTolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    cluster["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["effect"] == "NoExecute")
        .any(|taint| {
            let matching = tolerations.iter().find(|tol| {
                let key = tol["key"].as_str().unwrap_or_default();
                let effect_ok = tol["effect"]
                    .as_str()
                    .is_none_or(|e| e.is_empty() || e == "NoExecute");
                let key_ok = key.is_empty() && tol["operator"] == "Exists"
                    || Some(key) == taint["key"].as_str();
                let value_ok = tol["operator"] == "Exists"
                    || tol["value"].as_str().unwrap_or_default()
                        == taint["value"].as_str().unwrap_or_default();
                effect_ok && key_ok && value_ok
            });
            let allowed = match matching {
                Some(tol) => tol["tolerationSeconds"].as_f64(),
                None if taint["key"] == NOT_READY => Some(config.eviction_toleration.as_secs_f64()),
                None => Some(0.0),
            };
            match allowed {
                None => false,
                Some(secs) => seconds_since(&taint["timeAdded"]).is_none_or(|since| since >= secs),
            }
        })
}

/// Keeps the not-ready taints in line with each cluster's readiness.
pub fn run(c: &Controller) -> ApiResult<()> {
    let def = c.def("cluster.karmada.io", "v1alpha1", "clusters")?;
    for cluster in c.list("cluster.karmada.io", "v1alpha1", "clusters")? {
        let want = desired_taints(&cluster, c.config.failover_grace);
        let have = cluster["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if want == have {
            continue;
        }
        let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
        let shown = Value::Array(want.clone());
        info!(cluster = name, taints = %shown, "cluster taints follow readiness");
        let body = json!({"spec": {"taints": want}});
        c.store().patch(
            &def,
            None,
            name,
            PatchKind::Merge,
            body.to_string().as_bytes(),
            false,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cluster(ready: bool, since: &str, taints: Value) -> Value {
        json!({"metadata": {"name": "m"}, "spec": {"taints": taints}, "status": {"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": since}]}})
    }

    #[test]
    fn taints_follow_readiness_after_grace() {
        let other = json!({"key": UNSCHEDULABLE, "effect": "NoSchedule"});
        let fresh = cluster(false, &now_rfc3339(), json!([other]));
        let t = desired_taints(&fresh, Duration::from_secs(60));
        assert_eq!(t.len(), 2);
        assert!(t
            .iter()
            .any(|x| x["key"] == NOT_READY && x["effect"] == "NoSchedule"));
        let long = cluster(false, "2020-01-01T00:00:00Z", json!([]));
        let t = desired_taints(&long, Duration::from_secs(60));
        assert!(t.iter().any(|x| x["effect"] == "NoExecute"));
        let back = cluster(true, "2020-01-01T00:00:00Z", Value::Array(t));
        assert!(desired_taints(&back, Duration::from_secs(60)).is_empty());
    }

    #[test]
    fn eviction_honours_tolerations_and_their_time() {
        let config = KarmadaConfig {
            eviction_toleration: Duration::from_secs(300),
            ..Default::default()
        };
        let old =
            json!([{"key": NOT_READY, "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}]);
        let new = json!([{"key": NOT_READY, "effect": "NoExecute", "timeAdded": now_rfc3339()}]);
        let none = json!({});
        assert!(evicts(&none, &cluster(false, "", old.clone()), &config));
        assert!(!evicts(&none, &cluster(false, "", new.clone()), &config));
        let forever = json!({"clusterTolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]});
        assert!(!evicts(&forever, &cluster(false, "", old.clone()), &config));
        let short = json!({"clusterTolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]});
        assert!(evicts(&short, &cluster(false, "", new), &config));
        assert!(!evicts(&none, &cluster(true, "", json!([])), &config));
    }
}
