//! Kairship: one entry point (gRPC, REST and a kubectl-compatible proxy) for many
//! Karmada instances, with one supervised actor per instance.
//!
//! Layout: [`cli`] holds the subcommands of the `kairship` binary; [`telemetry`] sets up
//! logging. The Kubernetes-API simulator lives in the `kairship-sim` crate (`sim/`).

pub mod actors;
pub mod api;
pub mod auth;
pub mod bootstrap;
pub mod chaos;
pub mod cli;
pub mod crd;
pub mod limits;
pub mod metrics;
pub mod proto;
pub mod quantity;
pub mod server;
pub mod telemetry;

/// Errors a `kairship` command ends with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Sim(#[from] kairship_sim::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
}
