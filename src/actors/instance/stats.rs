//! The resource statistics controller's arithmetic: aggregate the member Clusters'
//! `nodeSummary` and `resourceSummary` into instance totals. Pure functions.

use serde_json::Value;

use crate::crd::InstanceStats;
use crate::quantity::{self, Milli};

/// Object counts taken from the instance's caches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub propagation_policies: usize,
    pub override_policies: usize,
    pub cluster_propagation_policies: usize,
    pub cluster_override_policies: usize,
    pub resource_bindings: usize,
    pub workloads: usize,
    pub namespaces: usize,
}

/// Whether a Cluster's `Ready` condition is `True`; an offline member is never Ready.
pub fn cluster_ready(cluster: &Value) -> bool {
    cluster
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn int_at(v: &Value, path: &str) -> i64 {
    v.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// Sums one resource across clusters; unparsable quantities count as zero (and are
/// reported by the caller's validation, not here).
fn total(clusters: &[&Value], section: &str, resource: &str) -> Milli {
    clusters
        .iter()
        .filter_map(|c| {
            c.pointer(&format!("/status/resourceSummary/{section}/{resource}"))
                .and_then(Value::as_str)
        })
        .filter_map(|q| quantity::parse(q).ok())
        .sum()
}

/// Aggregates Cluster objects (as JSON) and cache counts into instance totals.
pub fn aggregate(clusters: &[&Value], counts: Counts) -> InstanceStats {
    let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    InstanceStats {
        clusters_total: as_i64(clusters.len()),
        clusters_ready: as_i64(clusters.iter().filter(|c| cluster_ready(c)).count()),
        nodes_total: clusters
            .iter()
            .map(|c| int_at(c, "/status/nodeSummary/totalNum"))
            .sum(),
        nodes_ready: clusters
            .iter()
            .map(|c| int_at(c, "/status/nodeSummary/readyNum"))
            .sum(),
        cpu_allocatable: total(clusters, "allocatable", "cpu").to_decimal(),
        cpu_allocated: total(clusters, "allocated", "cpu").to_decimal(),
        memory_allocatable: total(clusters, "allocatable", "memory").to_binary(),
        memory_allocated: total(clusters, "allocated", "memory").to_binary(),
        pods_allocatable: total(clusters, "allocatable", "pods").to_decimal(),
        pods_allocated: total(clusters, "allocated", "pods").to_decimal(),
        propagation_policies: as_i64(counts.propagation_policies),
        override_policies: as_i64(counts.override_policies),
        cluster_propagation_policies: as_i64(counts.cluster_propagation_policies),
        cluster_override_policies: as_i64(counts.cluster_override_policies),
        resource_bindings: as_i64(counts.resource_bindings),
        workloads: as_i64(counts.workloads),
        namespaces: as_i64(counts.namespaces),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(ready: &str, nodes: (i64, i64), cpu: (&str, &str), mem: (&str, &str)) -> Value {
        json!({"status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "nodeSummary": {"totalNum": nodes.0, "readyNum": nodes.1},
            "resourceSummary": {"allocatable": {"cpu": cpu.0, "memory": mem.0, "pods": "110"}, "allocated": {"cpu": cpu.1, "memory": mem.1, "pods": "10"}},
        }})
    }

    #[test]
    fn aggregates_nodes_resources_and_readiness() {
        let a = cluster("True", (3, 3), ("48", "12500m"), ("192Gi", "40960Mi"));
        let b = cluster("False", (5, 0), ("80", "500m"), ("320Gi", "1Gi"));
        let counts = Counts {
            propagation_policies: 2,
            workloads: 5,
            ..Default::default()
        };
        let s = aggregate(&[&a, &b], counts);
        assert_eq!(
            (
                s.clusters_total,
                s.clusters_ready,
                s.nodes_total,
                s.nodes_ready
            ),
            (2, 1, 8, 3)
        );
        assert_eq!(
            (s.cpu_allocatable.as_str(), s.cpu_allocated.as_str()),
            ("128", "13")
        );
        assert_eq!(
            (s.memory_allocatable.as_str(), s.memory_allocated.as_str()),
            ("512Gi", "41Gi")
        );
        assert_eq!(
            (s.pods_allocatable.as_str(), s.pods_allocated.as_str()),
            ("220", "20")
        );
        assert_eq!((s.propagation_policies, s.workloads), (2, 5));
    }

    #[test]
    fn a_cluster_without_status_is_counted_but_not_ready() {
        let bare = json!({"metadata": {"name": "new"}});
        let s = aggregate(&[&bare], Counts::default());
        assert_eq!(
            (s.clusters_total, s.clusters_ready, s.nodes_total),
            (1, 0, 0)
        );
        assert_eq!(s.cpu_allocatable, "0");
    }
}
