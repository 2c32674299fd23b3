//! Kairship: one entry point (gRPC, REST and a kubectl-compatible proxy) for many
//! Karmada instances, with one supervised actor per instance.
//!
//! The crate's parts in layers: each folder uses only folders of the layers below it
//! (`module_graph` fails the tests otherwise), so each can be read after those it uses.
//!
//! 1. Shared parts with no dependencies here: [`proto`] (the API's messages),
//!    [`quantity`], [`memory`], [`open_files`], [`outbound`], [`member_networks`],
//!    [`telemetry`], [`schedule`] (cron and maintenance windows), [`error`].
//! 2. [`crd`]: Kairship's resources in the host (`Instance`, `InstanceRoleBinding`, ...);
//!    [`bootstrap`] installs them.
//! 3. [`host`]: reaching the host cluster: clients, typed host errors, backoff, what
//!    Kairship may touch there, Lease-based leadership and shards, watched stores.
//! 4. [`auth`] (who a caller is, their role on each instance), [`certificates`],
//!    [`backups`], [`cache`] (an instance's objects, read by the API).
//! 5. [`context`]: what every long-running part is handed (host client, leadership,
//!    settings, routes to each instance's reader, host Events); [`status`]: what an
//!    instance actor observed and the status it reports from it (pure).
//! 6. [`controllers`]: what each instance actor runs besides its caches, probes and
//!    status; [`rollout`]: changing many instances in waves; [`hibernation`]: putting
//!    instances to sleep and waking them.
//! 7. [`actors`]: the supervision tree: root, instance manager, one actor per instance.
//! 8. [`api`]: the apiserver (the handler chain `api::chain`, gRPC, REST, the kubectl
//!    proxy, the console); [`metrics`].
//! 9. [`server`]: one process's tree and API; [`cli`]: the `kairship` binary's commands;
//!    [`chaos`]: chaos experiments.
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
pub mod context;
pub mod controllers;
pub mod crd;
pub mod error;
pub mod hibernation;
pub mod host;
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
pub mod schedule;
pub mod server;
pub mod status;
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
