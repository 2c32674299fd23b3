//! Scenarios run against the simulated fleet and the real one alike, so both must agree:
//! the upstream nginx sample, a cluster-scoped template, Tables from the cache, and the
//! policy Karmada lets claim a workload, and failover by ClusterTaintPolicy.

pub mod claims;
pub mod cluster_scoped;
pub mod failover;
pub mod nginx;
pub mod tables;
