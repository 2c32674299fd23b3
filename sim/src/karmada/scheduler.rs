//! The scheduler: which member clusters a binding lands on and how many replicas each
//! gets, from the placement (affinity, taints and tolerations, spread, replica scheduling)
//! and the Clusters' readiness and resource summaries.

use std::collections::BTreeMap;

use serde_json::Value;

use super::selector::{field_selector_matches, label_selector_matches};
use crate::store::AsValue;

/// One scheduling decision: a cluster and its replicas (`None` for replica-less kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub replicas: Option<i64>,
}

/// Parses a Kubernetes quantity ("250m", "2", "64Mi", "1G") into a plain number.
pub fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0f64.powi(3),
        "Ti" => 1024.0f64.powi(4),
        _ => return None,
    };
    Some(n * mult)
}

pub fn cluster_ready(cluster: &Value) -> bool {
    cluster["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// How many more replicas of the given per-replica request a cluster can take, as the
/// general estimator reads the resource summary (free pods bound it when there is no request).
pub fn available_replicas(cluster: &Value, requirements: Option<&Value>) -> i64 {
    let summary = &cluster["status"]["resourceSummary"];
    let free = |res: &str| {
        let get = |part: &str| {
            summary[part][res]
                .as_str()
                .and_then(parse_quantity)
                .unwrap_or(0.0)
        };
        (get("allocatable") - get("allocated") - get("allocating")).max(0.0)
    };
    let mut avail = free("pods").floor() as i64;
    if let Some(req) = requirements.and_then(|r| r["resourceRequest"].as_object()) {
        for (res, q) in req {
            let Some(per) = q.as_str().and_then(parse_quantity).filter(|p| *p > 0.0) else {
                continue;
            };
            avail = avail.min((free(res) / per).floor() as i64);
        }
    }
    avail
}

fn tolerates(tolerations: &[Value], taint: &Value) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t["effect"]
            .as_str()
            .is_none_or(|e| e.is_empty() || Some(e) == taint["effect"].as_str());
        let key = t["key"].as_str().unwrap_or_default();
        let key_ok = key.is_empty() || Some(key) == taint["key"].as_str();
        let value_ok = match t["operator"].as_str().unwrap_or("Equal") {
            "Exists" => true,
            _ => {
                !key.is_empty()
                    && t["value"].as_str().unwrap_or_default()
                        == taint["value"].as_str().unwrap_or_default()
            }
        };
        effect_ok && key_ok && value_ok
    })
}

/// The first taint a cluster has that the placement does not tolerate.
pub fn untolerated_taint<'a>(placement: &Value, cluster: &'a Value) -> Option<&'a Value> {
    let tolerations = placement["clusterTolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    cluster["spec"]["taints"].as_array()?.iter().find(|t| {
        matches!(t["effect"].as_str(), Some("NoSchedule") | Some("NoExecute"))
            && !tolerates(&tolerations, t)
    })
}

pub fn affinity_matches(affinity: &Value, cluster: &Value) -> bool {
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    let names: Vec<&str> = affinity["clusterNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !names.is_empty() && !names.contains(&name) {
        return false;
    }
    if affinity["exclude"]
        .as_array()
        .is_some_and(|a| a.iter().any(|e| e.as_str() == Some(name)))
    {
        return false;
    }
    let empty = Value::Object(Default::default());
    if let Some(sel) = affinity.get("labelSelector").filter(|s| !s.is_null()) {
        if !label_selector_matches(sel, cluster["metadata"].get("labels").unwrap_or(&empty)) {
            return false;
        }
    }
    if let Some(sel) = affinity.get("fieldSelector").filter(|s| !s.is_null()) {
        if !field_selector_matches(sel, cluster) {
            return false;
        }
    }
    true
}

/// Clusters that pass the filters, or the reason none does (the `Scheduled` message).
fn feasible<'a>(placement: &Value, clusters: &'a [impl AsValue]) -> Result<Vec<&'a Value>, String> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut fit = Vec::new();
    let affinity = &placement["clusterAffinity"];
    for c in clusters.iter().map(AsValue::as_value) {
        let why = if !affinity.is_null() && !affinity_matches(affinity, c) {
            Some("did not match the placement cluster affinity constraint".to_string())
        } else if let Some(t) = untolerated_taint(placement, c) {
            Some(format!(
                "had untolerated taint {{{}: {}}}",
                t["key"].as_str().unwrap_or_default(),
                t["value"].as_str().unwrap_or_default()
            ))
        } else if !cluster_ready(c) {
            Some("is not ready".to_string())
        } else {
            None
        };
        match why {
            Some(w) => *reasons.entry(w).or_default() += 1,
            None => fit.push(c),
        }
    }
    if fit.is_empty() {
        let detail: Vec<String> = reasons
            .iter()
            .map(|(why, n)| format!("{n} cluster(s) {why}"))
            .collect();
        return Err(format!(
            "0/{} clusters are available: {}.",
            clusters.len(),
            detail.join(", ")
        ));
    }
    Ok(fit)
}

/// Splits `replicas` by weight: floor shares first, then the remainder one by one in
/// order of weight, then of the previous assignment (stability), then of name.
pub fn divide_by_weight(
    replicas: i64,
    weights: &[(String, i64)],
    previous: &BTreeMap<String, i64>,
) -> Vec<(String, i64)> {
    let total: i64 = weights.iter().map(|(_, w)| *w).sum();
    if total <= 0 || replicas <= 0 {
        return Vec::new();
    }
    let mut order: Vec<&(String, i64)> = weights.iter().filter(|(_, w)| *w > 0).collect();
    order.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(
                previous
                    .get(&b.0)
                    .unwrap_or(&0)
                    .cmp(previous.get(&a.0).unwrap_or(&0)),
            )
            .then(a.0.cmp(&b.0))
    });
    let mut out: Vec<(String, i64)> = order
        .iter()
        .map(|(n, w)| (n.clone(), replicas * w / total))
        .collect();
    let mut remain = replicas - out.iter().map(|(_, r)| r).sum::<i64>();
    for slot in out.iter_mut() {
        if remain == 0 {
            break;
        }
        slot.1 += 1;
        remain -= 1;
    }
    out.retain(|(_, r)| *r > 0);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn static_weight(placement: &Value, cluster: &Value) -> i64 {
    placement["replicaScheduling"]["weightPreference"]["staticWeightList"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| affinity_matches(&w["targetCluster"], cluster))
        .map(|w| w["weight"].as_i64().unwrap_or(0))
        .max()
        .unwrap_or(0)
}

/// Schedules a binding: the clusters and replicas Karmada would write to `spec.clusters`.
pub fn schedule(
    placement: &Value,
    replicas: i64,
    requirements: Option<&Value>,
    clusters: &[impl AsValue],
    previous: &BTreeMap<String, i64>,
) -> Result<Vec<Target>, String> {
    let mut fit = feasible(placement, clusters)?;
    let name = |c: &Value| {
        c["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let avail = |c: &Value| available_replicas(c, requirements);
    // Spread by cluster: at most maxGroups clusters, the roomiest first.
    if let Some(max) = placement["spreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["spreadByField"] == "cluster")
        .find_map(|s| s["maxGroups"].as_i64())
    {
        fit.sort_by(|a, b| avail(b).cmp(&avail(a)).then(name(a).cmp(&name(b))));
        fit.truncate(max.max(0) as usize);
        fit.sort_by_key(|c| name(c));
    }
    let rs = &placement["replicaScheduling"];
    let whole = |fit: &[&Value], r: Option<i64>| {
        fit.iter()
            .map(|c| Target {
                name: name(c),
                replicas: r,
            })
            .collect::<Vec<_>>()
    };
    if replicas == 0 {
        return Ok(whole(&fit, None));
    }
    if rs["replicaSchedulingType"].as_str() != Some("Divided") {
        return Ok(whole(&fit, Some(replicas)));
    }
    let weights: Vec<(String, i64)> = match rs["replicaDivisionPreference"].as_str() {
        Some("Aggregated") => {
            let mut by_room: Vec<(String, i64)> = fit.iter().map(|c| (name(c), avail(c))).collect();
            by_room.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut taken = Vec::new();
            let mut room = 0;
            for (n, a) in by_room {
                if room >= replicas {
                    break;
                }
                room += a;
                taken.push((n, a));
            }
            if room < replicas {
                return Err(format!(
                    "0/{} clusters are available: clusters available replicas {room} are not enough to schedule {replicas}.",
                    clusters.len()
                ));
            }
            taken
        }
        _ if rs["weightPreference"]["dynamicWeight"] == "AvailableReplicas" => {
            let w: Vec<(String, i64)> = fit.iter().map(|c| (name(c), avail(c))).collect();
            let room: i64 = w.iter().map(|(_, a)| a).sum();
            if room < replicas {
                return Err(format!(
                    "0/{} clusters are available: clusters available replicas {room} are not enough to schedule {replicas}.",
                    clusters.len()
                ));
            }
            w
        }
        _ => {
            let has_list = rs["weightPreference"]["staticWeightList"]
                .as_array()
                .is_some_and(|l| !l.is_empty());
            fit.iter()
                .map(|c| {
                    (
                        name(c),
                        if has_list {
                            static_weight(placement, c)
                        } else {
                            1
                        },
                    )
                })
                .collect()
        }
    };
    let divided = divide_by_weight(replicas, &weights, previous);
    if divided.is_empty() {
        return Err(format!(
            "0/{} clusters are available: no cluster has a weight for this placement.",
            clusters.len()
        ));
    }
    Ok(divided
        .into_iter()
        .map(|(name, r)| Target {
            name,
            replicas: Some(r),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, ready: bool, free_pods: i64, taints: Value) -> Value {
        json!({
            "metadata": {"name": name, "labels": {"region": if name == "member3" { "us" } else { "eu" }}},
            "spec": {"provider": "sim", "region": "eu-west-1", "zone": "z", "taints": taints},
            "status": {
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "resourceSummary": {
                    "allocatable": {"pods": (free_pods + 10).to_string(), "cpu": "8"},
                    "allocated": {"pods": "10", "cpu": "2"},
                },
            }
        })
    }

    fn fleet() -> Vec<Value> {
        vec![
            cluster("member1", true, 10, json!([])),
            cluster("member2", true, 30, json!([])),
            cluster("member3", true, 60, json!([])),
        ]
    }

    fn names(ts: &[Target]) -> Vec<(String, Option<i64>)> {
        ts.iter().map(|t| (t.name.clone(), t.replicas)).collect()
    }

    fn sample_placement() -> Value {
        serde_json::from_str(
            r#"{"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                "replicaScheduling": {"replicaDivisionPreference": "Weighted", "replicaSchedulingType": "Divided",
                  "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}"#,
        )
        .expect("a value")
    }

    #[test]
    fn the_nginx_sample_splits_evenly() {
        let none = BTreeMap::new();
        let p = sample_placement();
        let got = schedule(&p, 2, None, &fleet(), &none).expect("a value");
        assert_eq!(
            names(&got),
            vec![("member1".into(), Some(1)), ("member2".into(), Some(1))]
        );
        let got = schedule(&p, 4, None, &fleet(), &none).expect("a value");
        assert_eq!(
            names(&got),
            vec![("member1".into(), Some(2)), ("member2".into(), Some(2))]
        );
    }

    #[test]
    fn weights_and_remainders() {
        let none = BTreeMap::new();
        let w = |v: &[(&str, i64)]| {
            v.iter()
                .map(|(n, w)| (n.to_string(), *w))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            divide_by_weight(5, &w(&[("a", 1), ("b", 2)]), &none),
            vec![("a".into(), 1), ("b".into(), 4)]
        );
        // 3 over equal weights: the remainder goes to the first by name.
        assert_eq!(
            divide_by_weight(3, &w(&[("b", 1), ("a", 1)]), &none),
            vec![("a".into(), 2), ("b".into(), 1)]
        );
        // ...unless b held more before, which keeps placements stable.
        let prev = BTreeMap::from([("b".to_string(), 2)]);
        assert_eq!(
            divide_by_weight(3, &w(&[("a", 1), ("b", 1)]), &prev),
            vec![("a".into(), 1), ("b".into(), 2)]
        );
        assert_eq!(
            divide_by_weight(1, &w(&[("a", 1), ("b", 1), ("c", 1)]), &none),
            vec![("a".into(), 1)]
        );
        assert!(divide_by_weight(3, &w(&[("a", 0)]), &none).is_empty());
    }

    #[test]
    fn dynamic_aggregated_and_duplicated() {
        let none = BTreeMap::new();
        let dynamic = json!({"replicaScheduling": {"replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted", "weightPreference": {"dynamicWeight": "AvailableReplicas"}}});
        // Free pods 10/30/60: 10 replicas split 1/3/6 (10*10/100, 10*30/100, 10*60/100).
        let got = schedule(&dynamic, 10, None, &fleet(), &none).expect("a value");
        assert_eq!(
            names(&got),
            vec![
                ("member1".into(), Some(1)),
                ("member2".into(), Some(3)),
                ("member3".into(), Some(6))
            ]
        );
        assert!(schedule(&dynamic, 1000, None, &fleet(), &none)
            .expect_err("an error")
            .contains("not enough"));
        let aggregated = json!({"replicaScheduling": {"replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Aggregated"}});
        let got = schedule(&aggregated, 50, None, &fleet(), &none).expect("a value");
        assert_eq!(names(&got), vec![("member3".into(), Some(50))]);
        let got = schedule(&aggregated, 80, None, &fleet(), &none).expect("a value");
        assert_eq!(
            names(&got),
            vec![("member2".into(), Some(26)), ("member3".into(), Some(54))]
        );
        let dup = json!({"replicaScheduling": {"replicaSchedulingType": "Duplicated"}});
        let got = schedule(&dup, 2, None, &fleet(), &none).expect("a value");
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|t| t.replicas == Some(2)));
        // CPU requests bound room: 6 free cores at 2 cores a replica is 3.
        let req = json!({"resourceRequest": {"cpu": "2"}});
        assert_eq!(available_replicas(&fleet()[2], Some(&req)), 3);
    }

    #[test]
    fn affinity_taints_readiness_and_spread() {
        let none = BTreeMap::new();
        let taint = json!([{"key": "cluster.karmada.io/unschedulable", "effect": "NoSchedule"}]);
        let clusters = vec![
            cluster("member1", true, 10, taint.clone()),
            cluster("member2", false, 10, json!([])),
            cluster("member3", true, 10, json!([])),
        ];
        let dup = json!({});
        let got = schedule(&dup, 1, None, &clusters, &none).expect("a value");
        assert_eq!(names(&got), vec![("member3".into(), Some(1))]);
        let tolerating = json!({"clusterTolerations": [{"key": "cluster.karmada.io/unschedulable", "operator": "Exists"}]});
        let got = schedule(&tolerating, 1, None, &clusters, &none).expect("a value");
        assert_eq!(got.len(), 2);
        let only1 = json!({"clusterAffinity": {"clusterNames": ["member1"]}});
        let err = schedule(&only1, 1, None, &clusters, &none).expect_err("an error");
        assert!(err.starts_with("0/3 clusters are available"), "{err}");
        assert!(
            err.contains("untolerated taint {cluster.karmada.io/unschedulable: }"),
            "{err}"
        );
        let by_label =
            json!({"clusterAffinity": {"labelSelector": {"matchLabels": {"region": "us"}}}});
        assert_eq!(
            names(&schedule(&by_label, 1, None, &fleet(), &none).expect("a value")),
            vec![("member3".into(), Some(1))]
        );
        let exclude = json!({"clusterAffinity": {"exclude": ["member1", "member3"]}});
        assert_eq!(
            names(&schedule(&exclude, 1, None, &fleet(), &none).expect("a value")),
            vec![("member2".into(), Some(1))]
        );
        let spread = json!({"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2, "minGroups": 1}]});
        assert_eq!(
            names(&schedule(&spread, 1, None, &fleet(), &none).expect("a value")),
            vec![("member2".into(), Some(1)), ("member3".into(), Some(1))]
        );
        assert_eq!(
            names(&schedule(&dup, 0, None, &fleet(), &none).expect("a value"))[0].1,
            None
        );
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("250m"), Some(0.25));
        assert_eq!(parse_quantity("2Gi"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse_quantity("110"), Some(110.0));
        assert_eq!(parse_quantity("1x"), None);
    }
}
