//! Scenarios run against the simulated fleet and the real one alike, so both must agree:
//! the upstream nginx sample, a cluster-scoped template, Tables from the cache, and the
//! policy Karmada lets claim a workload, and failover by ClusterTaintPolicy.

pub mod claims;
pub mod cluster_scoped;
pub mod failover;
pub mod nginx;
pub mod tables;

/// `kubectl apply -f path`, failing the test with kubectl's words if it fails.
fn apply(kubectl: &dyn Fn(&[&str]) -> std::process::Output, path: &std::path::Path) {
    let out = kubectl(&["apply", "-f", &path.display().to_string()]);
    assert!(
        out.status.success(),
        "kubectl apply {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
