//! Cluster failover as Karmada >= 1.14 does it: the cluster controller taints a cluster
//! `NoSchedule` when it is not Ready (`cluster.karmada.io/not-ready` for Ready=False,
//! `cluster.karmada.io/unreachable` for Unknown) and nothing more; `NoExecute` taints come
//! only from ClusterTaintPolicies ([`taint_policies`], added and removed on the conditions
//! they name). A binding whose cluster carries a NoExecute taint it does not tolerate (or
//! whose toleration ran out) is rescheduled onto the remaining clusters; policies carry no
//! default toleration (removed in v1.15). The real fleet runs karmada-controller-manager
//! with the `Failover` feature gate and `--enable-no-execute-taint-eviction`, so the
//! eviction happens there too.

use serde_json::{json, Value};
use tracing::info;

use super::scheduler::affinity_matches;
use super::Controller;
use crate::patch::PatchKind;
use crate::store::meta::now_rfc3339;
use crate::store::AsValue;
use kairship_wire::status::ApiResult;

pub const NOT_READY: &str = "cluster.karmada.io/not-ready";
pub const UNREACHABLE: &str = "cluster.karmada.io/unreachable";
pub const UNSCHEDULABLE: &str = "cluster.karmada.io/unschedulable";

fn parse_time(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str()?.parse().ok()
}

fn seconds_since(v: &Value) -> Option<f64> {
    let t = parse_time(v)?;
    let d = jiff::Timestamp::now().duration_since(t);
    Some(d.as_secs_f64())
}

fn taints_of(cluster: &Value) -> Vec<Value> {
    cluster["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn same_taint(a: &Value, key: &str, effect: &str) -> bool {
    a["key"] == key && a["effect"] == effect
}

/// `taints` with each of `add` (key, effect) present (kept as it was if it was) and each
/// of `remove` gone; every other taint as it is.
fn set_taints(
    mut taints: Vec<Value>,
    add: &[(&str, &str, &str)],
    remove: &[(&str, &str)],
) -> Vec<Value> {
    taints.retain(|t| !remove.iter().any(|(k, e)| same_taint(t, k, e)));
    for (key, effect, value) in add {
        if !taints.iter().any(|t| same_taint(t, key, effect)) {
            let mut t = json!({"key": key, "effect": effect, "timeAdded": now_rfc3339()});
            if !value.is_empty() {
                t["value"] = (*value).into();
            }
            taints.push(t);
        }
    }
    taints
}

/// The scheduling taints Karmada's cluster controller keeps by the Ready condition.
pub fn readiness_taints(cluster: &Value) -> Vec<Value> {
    let ready = cluster["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].as_str().unwrap_or_default().to_string());
    let (taints, not_ready, unreachable) = (
        taints_of(cluster),
        (NOT_READY, "NoSchedule"),
        (UNREACHABLE, "NoSchedule"),
    );
    match ready.as_deref() {
        Some("True") => set_taints(taints, &[], &[not_ready, unreachable]),
        Some("Unknown") => set_taints(taints, &[(UNREACHABLE, "NoSchedule", "")], &[not_ready]),
        Some(_) => set_taints(taints, &[(NOT_READY, "NoSchedule", "")], &[unreachable]),
        None => set_taints(taints, &[(NOT_READY, "NoSchedule", "")], &[]),
    }
}

/// Whether every `{conditionType, operator, statusValues}` holds on the cluster's
/// conditions (ANDed; an empty list never matches), as Karmada's taint policy controller
/// reads them.
fn conditions_match(conditions: &[Value], wanted: &Value) -> bool {
    let Some(wanted) = wanted.as_array().filter(|w| !w.is_empty()) else {
        return false;
    };
    wanted.iter().all(|m| {
        let values: Vec<&str> = m["statusValues"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut matched = false;
        for c in conditions
            .iter()
            .filter(|c| c["type"] == m["conditionType"])
        {
            let has = values.contains(&c["status"].as_str().unwrap_or_default());
            matched = match m["operator"].as_str() {
                Some("In") => matched || has,
                Some("NotIn") => !has,
                _ => return false,
            };
        }
        matched
    })
}

/// The cluster's taints after every ClusterTaintPolicy (oldest first) that targets it:
/// its taints added when `addOnConditions` match, removed when `removeOnConditions` do.
pub fn taint_policies(
    cluster: &Value,
    taints: Vec<Value>,
    policies: &[impl AsValue],
) -> Vec<Value> {
    let conditions = cluster["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut ordered: Vec<&Value> = policies.iter().map(AsValue::as_value).collect();
    ordered.sort_by_key(|p| {
        p["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    let mut taints = taints;
    for p in ordered {
        let target = &p["spec"]["targetClusters"];
        if !target.is_null() && !affinity_matches(target, cluster) {
            continue;
        }
        let listed: Vec<(String, String, String)> = p["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let s = |k: &str| t[k].as_str().unwrap_or_default().to_string();
                (s("key"), s("effect"), s("value"))
            })
            .collect();
        if conditions_match(&conditions, &p["spec"]["addOnConditions"]) {
            let add: Vec<(&str, &str, &str)> = listed
                .iter()
                .map(|(k, e, v)| (k.as_str(), e.as_str(), v.as_str()))
                .collect();
            taints = set_taints(taints, &add, &[]);
        }
        if conditions_match(&conditions, &p["spec"]["removeOnConditions"]) {
            let remove: Vec<(&str, &str)> = listed
                .iter()
                .map(|(k, e, _)| (k.as_str(), e.as_str()))
                .collect();
            taints = set_taints(taints, &[], &remove);
        }
    }
    taints
}

/// Whether a placement must leave `cluster` now: a NoExecute taint it does not tolerate,
/// or tolerates only for a time that has run out.
pub fn evicts(placement: &Value, cluster: &Value) -> bool {
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
                None => Some(0.0),
            };
            match allowed {
                None => false,
                Some(secs) => seconds_since(&taint["timeAdded"]).is_none_or(|since| since >= secs),
            }
        })
}

/// Keeps each cluster's taints as Karmada's cluster and taint policy controllers would.
pub fn run(c: &Controller) -> ApiResult<()> {
    let def = c.def("cluster.karmada.io", "v1alpha1", "clusters")?;
    let policies = c.list("policy.karmada.io", "v1alpha1", "clustertaintpolicies")?;
    for cluster in c.list("cluster.karmada.io", "v1alpha1", "clusters")? {
        let want = taint_policies(&cluster, readiness_taints(&cluster), &policies);
        if want.iter().any(|t| t["effect"] == "NoExecute") {
            // A toleration with tolerationSeconds runs out with no write to wake a pass.
            c.wait_for_clock();
        }
        let have = taints_of(&cluster);
        if want == have {
            continue;
        }
        let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
        let shown = Value::Array(want.clone());
        info!(cluster = name, taints = %shown, "cluster taints follow readiness and taint policies");
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

    fn cluster(ready: &str, taints: Value) -> Value {
        json!({"metadata": {"name": "m"}, "spec": {"taints": taints}, "status": {"conditions": [
            {"type": "Ready", "status": ready, "lastTransitionTime": "2020-01-01T00:00:00Z"}]}})
    }

    fn keys(taints: &[Value]) -> Vec<(String, String)> {
        let mut out: Vec<_> = taints
            .iter()
            .map(|t| {
                let s = |k: &str| t[k].as_str().unwrap_or_default().to_string();
                (s("key"), s("effect"))
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn readiness_brings_no_schedule_taints_only() {
        let other = json!({"key": UNSCHEDULABLE, "effect": "NoSchedule"});
        let down = readiness_taints(&cluster("False", json!([other])));
        assert_eq!(
            keys(&down),
            [
                (NOT_READY.into(), "NoSchedule".into()),
                (UNSCHEDULABLE.into(), "NoSchedule".into())
            ]
        );
        let unknown = readiness_taints(&cluster("Unknown", Value::Array(down)));
        assert_eq!(
            keys(&unknown),
            [
                (UNREACHABLE.into(), "NoSchedule".into()),
                (UNSCHEDULABLE.into(), "NoSchedule".into())
            ]
        );
        // A policy's NoExecute taint on the same key is not the cluster controller's.
        let mine = json!([{"key": NOT_READY, "effect": "NoExecute"}]);
        let back = readiness_taints(&cluster("True", mine));
        assert_eq!(keys(&back), [(NOT_READY.into(), "NoExecute".into())]);
    }

    #[test]
    fn taint_policies_add_and_remove_on_conditions() {
        let policy = json!({"metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"targetClusters": {"clusterNames": ["m"]},
                "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
                "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
                "taints": [{"key": NOT_READY, "effect": "NoExecute"}]}});
        let down = cluster("False", json!([]));
        let t = taint_policies(&down, vec![], std::slice::from_ref(&policy));
        assert_eq!(keys(&t), [(NOT_READY.into(), "NoExecute".into())]);
        assert!(t[0]["timeAdded"].is_string());
        let up = cluster("True", Value::Array(t));
        assert!(taint_policies(&up, taints_of(&up), std::slice::from_ref(&policy)).is_empty());
        // Another cluster is not its target.
        let mut elsewhere = cluster("False", json!([]));
        elsewhere["metadata"]["name"] = "n".into();
        assert!(taint_policies(&elsewhere, vec![], &[policy]).is_empty());
    }

    #[test]
    fn eviction_honours_tolerations_and_their_time() {
        let old =
            json!([{"key": NOT_READY, "effect": "NoExecute", "timeAdded": "2020-01-01T00:00:00Z"}]);
        let new = json!([{"key": NOT_READY, "effect": "NoExecute", "timeAdded": now_rfc3339()}]);
        let none = json!({});
        // No default toleration since Karmada v1.15: evicted at once.
        assert!(evicts(&none, &cluster("False", new.clone())));
        let forever = json!({"clusterTolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute"}]});
        assert!(!evicts(&forever, &cluster("False", old.clone())));
        let minute = json!({"clusterTolerations": [{"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}]});
        assert!(!evicts(&minute, &cluster("False", new)));
        assert!(evicts(&minute, &cluster("False", old)));
        assert!(!evicts(&none, &cluster("True", json!([]))));
        // NoSchedule taints keep what is placed.
        let sched = json!([{"key": NOT_READY, "effect": "NoSchedule"}]);
        assert!(!evicts(&none, &cluster("False", sched)));
    }
}
