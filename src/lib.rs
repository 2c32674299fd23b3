//! Kairship: one entry point (gRPC, REST and a kubectl-compatible proxy) for many
//! Karmada instances, with one supervised actor per instance.
//!
//! The crate's parts, from the request's edge inward:
//! - [`api`]: the apiserver: the handler chain every request passes (`api::chain`), gRPC,
//!   REST, the kubectl proxy, the console's files, each request decoded once at its edge;
//! - [`auth`]: who a caller is (token file, OIDC) and their role on each instance;
//! - [`actors`]: the supervision tree: the root, the Lease elector, the instance manager
//!   and one actor per Karmada instance; [`controllers`] are what each instance actor runs
//!   besides its caches, probes and status; [`cache`] holds an instance's objects;
//! - [`backups`], [`certificates`]: an instance's backups and the certificates it is
//!   reached with; [`rollout`]: changing many instances in waves (issue 55);
//!   [`hibernation`]: when an instance should be asleep (schedules, idleness);
//! - [`crd`]: Kairship's resources in the host (`Instance`, `InstanceRoleBinding`, ...);
//!   [`bootstrap`] installs them; [`member_networks`]: where callers' members may be;
//! - [`cli`]: the `kairship` binary's subcommands; [`server`]: one process's tree and API;
//!   [`chaos`]: chaos experiments; [`metrics`], [`telemetry`]: metrics and logging;
//!   [`memory`], [`open_files`], [`quantity`], [`proto`], [`error`]: small shared parts.
//!
//! The Kubernetes wire format (paths, selectors, `Status`, Tables, TLS, the roles table)
//! is the `kairship-wire` crate (`wire/`), shared with the Kubernetes-API simulator, the
//! `kairship-sim` crate (`sim/`), which only the `demo`, `sim` and `chaos` commands use.

pub mod actors;
pub mod api;
pub mod auth;
pub mod backups;
pub mod bootstrap;
pub mod cache;
pub mod certificates;
#[cfg(feature = "testbed")]
pub mod chaos;
pub mod cli;
pub mod controllers;
pub mod crd;
pub mod error;
pub mod hibernation;
pub mod member_networks;
pub mod memory;
pub mod metrics;
#[cfg(test)]
mod module_graph;
pub mod open_files;
pub mod outbound;
pub mod proto;
pub mod quantity;
pub mod rollout;
pub mod server;
pub mod telemetry;

/// Errors a `kairship` command ends with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The simulated fleet of `demo` and `sim` (its conversion lives beside those commands,
    /// so the library itself does not name the simulator).
    #[cfg(feature = "testbed")]
    #[error(transparent)]
    Fleet(Box<dyn std::error::Error + Send + Sync>),
    #[cfg(feature = "testbed")]
    #[error(transparent)]
    FaultApi(#[from] kairship_wire::fault_client::CallError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
}
