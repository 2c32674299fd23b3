//! Kairship: one entry point (gRPC, REST and a kubectl-compatible proxy) for many
//! Karmada instances, with one supervised actor per instance.
//!
//! Layout: [`cli`] holds the subcommands of the `kairship` binary; [`telemetry`] sets up
//! logging. The Kubernetes wire format (paths, selectors, `Status`, Tables, TLS) is the
//! `kairship-wire` crate (`wire/`), shared with the Kubernetes-API simulator, the
//! `kairship-sim` crate (`sim/`), which only the `demo` and `sim` commands use.

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
pub mod member_networks;
pub mod memory;
pub mod metrics;
#[cfg(test)]
mod module_graph;
pub mod open_files;
pub mod proto;
pub mod quantity;
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
