//! Scenarios run against the simulated fleet and the real one alike, so both must agree:
//! the upstream nginx sample, a cluster-scoped template, Tables from the cache, and the
//! policy Karmada lets claim a workload, failover by ClusterTaintPolicy, what each of
//! Kairship's roles may do inside an instance (the role matrix), and the guardrails the
//! instance itself enforces on callers who reach it directly.

pub mod claims;
pub mod cluster_scoped;
pub mod failover;
pub mod guardrails;
pub mod nginx;
pub mod role_matrix;
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
