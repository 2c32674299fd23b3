//! The scheduler's decisions, as Karmada documents them: which clusters fit a placement
//! (Ready, cluster affinity, taints and tolerations, spread by cluster), and how replicas
//! are given to them (Duplicated; Divided by static weights, by available replicas, or
//! Aggregated onto as few clusters as possible).

use serde_json::Value;

use super::detector::labels_match;

/// What the scheduler knows of a member cluster.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub name: String,
    pub ready: bool,
    pub labels: Value,
    pub provider: String,
    pub region: String,
    pub zone: String,
    pub taints: Vec<Value>,
    /// Replicas it could still run (free pods from its resource summary).
    pub available: i64,
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn tolerated(taint: &Value, tolerations: &Value) -> bool {
    let effect = taint["effect"].as_str().unwrap_or_default();
    if effect != "NoSchedule" && effect != "NoExecute" {
        return true;
    }
    tolerations.as_array().into_iter().flatten().any(|t| {
        let effect_ok = t["effect"]
            .as_str()
            .is_none_or(|e| e.is_empty() || e == effect);
        let key = t["key"].as_str().unwrap_or_default();
        let key_ok = key.is_empty() || key == taint["key"].as_str().unwrap_or_default();
        let value_ok = match t["operator"].as_str() {
            Some("Exists") => true,
            _ => {
                t["value"].as_str().unwrap_or_default()
                    == taint["value"].as_str().unwrap_or_default()
            }
        };
        effect_ok && key_ok && value_ok
    })
}

fn field_ok(selector: &Value, c: &ClusterInfo) -> bool {
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let have = match e["key"].as_str() {
                Some("provider") => c.provider.as_str(),
                Some("region") => c.region.as_str(),
                Some("zone") => c.zone.as_str(),
                _ => return false,
            };
            let values = strs(&e["values"]);
            match e["operator"].as_str() {
                Some("In") => values.contains(&have),
                Some("NotIn") => !values.contains(&have),
                _ => false,
            }
        })
}

/// Whether `c` is in a `clusterAffinity` (or a weight rule's `targetCluster`).
pub fn affinity_ok(aff: &Value, c: &ClusterInfo) -> bool {
    let names = strs(&aff["clusterNames"]);
    (names.is_empty() || names.contains(&c.name.as_str()))
        && !strs(&aff["exclude"]).contains(&c.name.as_str())
        && aff
            .get("labelSelector")
            .is_none_or(|l| l.is_null() || labels_match(l, &c.labels))
        && aff
            .get("fieldSelector")
            .is_none_or(|f| f.is_null() || field_ok(f, c))
}

/// The clusters a placement may use, by name; or why none fits.
pub fn feasible<'a>(
    placement: &Value,
    clusters: &'a [ClusterInfo],
) -> Result<Vec<&'a ClusterInfo>, String> {
    let aff = &placement["clusterAffinity"];
    let tolerations = &placement["clusterTolerations"];
    let mut out: Vec<&ClusterInfo> = clusters
        .iter()
        .filter(|c| c.ready)
        .filter(|c| aff.is_null() || affinity_ok(aff, c))
        .filter(|c| c.taints.iter().all(|t| tolerated(t, tolerations)))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if out.is_empty() {
        return Err(format!(
            "0/{} clusters are available: none is Ready, matches the cluster affinity and tolerates its taints",
            clusters.len()
        ));
    }
    Ok(out)
}

/// Divides `replicas` by `weights` (floor shares, then one each to the largest weights,
/// ties by name), leaving out clusters that get none.
pub fn divide(replicas: i64, weights: &[(String, i64)]) -> Vec<(String, i64)> {
    let total: i64 = weights.iter().map(|w| w.1.max(0)).sum();
    if total == 0 || replicas <= 0 {
        return Vec::new();
    }
    let mut shares: Vec<(String, i64, i64)> = weights
        .iter()
        .map(|(n, w)| (n.clone(), *w.max(&0), replicas * w.max(&0) / total))
        .collect();
    let mut left = replicas - shares.iter().map(|s| s.2).sum::<i64>();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        shares[b]
            .1
            .cmp(&shares[a].1)
            .then(shares[a].0.cmp(&shares[b].0))
    });
    for i in order.iter().cycle().take(order.len() * 2) {
        if left == 0 {
            break;
        }
        if shares[*i].1 > 0 {
            shares[*i].2 += 1;
            left -= 1;
        }
    }
    let mut out: Vec<(String, i64)> = shares
        .into_iter()
        .filter(|s| s.2 > 0)
        .map(|s| (s.0, s.2))
        .collect();
    out.sort();
    out
}

/// Target clusters and their replicas for a binding of `replicas` (0 for kinds without
/// replicas: every feasible cluster, no count).
pub fn schedule(
    placement: &Value,
    replicas: i64,
    clusters: &[ClusterInfo],
) -> Result<Vec<(String, i64)>, String> {
    let mut fit = feasible(placement, clusters)?;
    // spreadConstraints by cluster: at most maxGroups clusters, the roomiest first.
    if let Some(max) = placement["spreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|s| {
            (s["spreadByField"].as_str() == Some("cluster"))
                .then(|| s["maxGroups"].as_i64())
                .flatten()
        })
    {
        let mut by_room = fit.clone();
        by_room.sort_by(|a, b| b.available.cmp(&a.available).then(a.name.cmp(&b.name)));
        by_room.truncate(usize::try_from(max.max(1)).unwrap_or(1));
        by_room.sort_by(|a, b| a.name.cmp(&b.name));
        fit = by_room;
    }
    let rs = &placement["replicaScheduling"];
    let divided = rs["replicaSchedulingType"].as_str() == Some("Divided");
    if replicas == 0 || !divided {
        return Ok(fit.iter().map(|c| (c.name.clone(), replicas)).collect());
    }
    let weights: Vec<(String, i64)> = match rs["replicaDivisionPreference"].as_str() {
        Some("Aggregated") => {
            // As few clusters as possible: the roomiest first until the replicas fit.
            let mut by_room = fit.clone();
            by_room.sort_by(|a, b| b.available.cmp(&a.available).then(a.name.cmp(&b.name)));
            let (mut left, mut out) = (replicas, Vec::new());
            for c in by_room {
                if left <= 0 {
                    break;
                }
                let take = left.min(c.available.max(0));
                if take > 0 {
                    out.push((c.name.clone(), take));
                    left -= take;
                }
            }
            if left > 0 {
                return Err(format!(
                    "not enough room: {left} of {replicas} replicas fit nowhere"
                ));
            }
            out.sort();
            return Ok(out);
        }
        _ => {
            let pref = &rs["weightPreference"];
            if let Some(list) = pref["staticWeightList"].as_array() {
                fit.iter()
                    .map(|c| {
                        let w = list
                            .iter()
                            .filter(|r| affinity_ok(&r["targetCluster"], c))
                            .map(|r| r["weight"].as_i64().unwrap_or(0))
                            .max()
                            .unwrap_or(0);
                        (c.name.clone(), w)
                    })
                    .collect()
            } else if pref["dynamicWeight"].as_str() == Some("AvailableReplicas") {
                fit.iter()
                    .map(|c| (c.name.clone(), c.available.max(0)))
                    .collect()
            } else {
                fit.iter().map(|c| (c.name.clone(), 1)).collect()
            }
        }
    };
    let out = divide(replicas, &weights);
    if out.is_empty() {
        return Err("no cluster has a weight above zero".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, available: i64) -> ClusterInfo {
        ClusterInfo {
            name: name.into(),
            ready: true,
            labels: json!({}),
            provider: String::new(),
            region: String::new(),
            zone: String::new(),
            taints: vec![],
            available,
        }
    }

    #[test]
    fn static_weights_divide_with_remainder_to_the_heaviest() {
        let w = |v: &[(&str, i64)]| {
            v.iter()
                .map(|(n, w)| (n.to_string(), *w))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            divide(2, &w(&[("member1", 1), ("member2", 1)])),
            w(&[("member1", 1), ("member2", 1)])
        );
        assert_eq!(
            divide(3, &w(&[("member1", 2), ("member2", 1)])),
            w(&[("member1", 2), ("member2", 1)])
        );
        assert_eq!(
            divide(3, &w(&[("a", 1), ("b", 1)])),
            w(&[("a", 2), ("b", 1)])
        );
        assert_eq!(divide(1, &w(&[("a", 1), ("b", 3)])), w(&[("b", 1)]));
    }

    #[test]
    fn the_nginx_sample_is_one_and_one_then_two_and_two() {
        let placement = json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "replicaScheduling": {"replicaDivisionPreference": "Weighted", "replicaSchedulingType": "Divided",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}});
        let cs = [
            cluster("member1", 10),
            cluster("member2", 10),
            cluster("member3", 10),
        ];
        assert_eq!(
            schedule(&placement, 2, &cs),
            Ok(vec![("member1".into(), 1), ("member2".into(), 1)])
        );
        assert_eq!(
            schedule(&placement, 4, &cs),
            Ok(vec![("member1".into(), 2), ("member2".into(), 2)])
        );
    }

    #[test]
    fn not_ready_tainted_and_excluded_clusters_are_not_chosen() {
        let mut cs = vec![cluster("a", 5), cluster("b", 5), cluster("c", 5)];
        cs[0].ready = false;
        cs[1].taints =
            vec![json!({"key": "cluster.karmada.io/unschedulable", "effect": "NoSchedule"})];
        assert_eq!(schedule(&json!({}), 2, &cs), Ok(vec![("c".into(), 2)]));
        let tolerating = json!({"clusterTolerations": [{"key": "cluster.karmada.io/unschedulable", "operator": "Exists"}]});
        assert_eq!(
            schedule(&tolerating, 1, &cs),
            Ok(vec![("b".into(), 1), ("c".into(), 1)])
        );
        let excluded = json!({"clusterAffinity": {"exclude": ["c"]}});
        assert!(schedule(&excluded, 1, &cs).is_err());
    }

    #[test]
    fn aggregated_and_dynamic_weights_follow_available_replicas() {
        let cs = [cluster("a", 3), cluster("b", 10)];
        let agg = json!({"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Aggregated"}});
        assert_eq!(schedule(&agg, 5, &cs), Ok(vec![("b".into(), 5)]));
        assert_eq!(
            schedule(&agg, 12, &cs),
            Ok(vec![("a".into(), 2), ("b".into(), 10)])
        );
        let dynamic = json!({"replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
            "weightPreference": {"dynamicWeight": "AvailableReplicas"}}});
        assert_eq!(
            schedule(&dynamic, 13, &cs),
            Ok(vec![("a".into(), 3), ("b".into(), 10)])
        );
    }
}
