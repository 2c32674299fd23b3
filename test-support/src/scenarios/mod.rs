//! Scenarios run against the simulated fleet and the real one alike, so both must agree:
//! the upstream nginx sample, a cluster-scoped template, and Tables from the cache.

pub mod cluster_scoped;
pub mod nginx;
pub mod tables;
