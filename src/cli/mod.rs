//! The `kairship` command line.

mod caller_args;
#[cfg(feature = "testbed")]
pub mod chaos;
pub mod ctl;
#[cfg(feature = "testbed")]
pub mod demo;
pub mod run;
mod shard_args;
#[cfg(feature = "testbed")]
pub mod sim;

use clap::{Parser, Subcommand};

use crate::telemetry::LogArgs;

#[derive(Debug, Parser)]
#[command(
    name = "kairship",
    version,
    about = "Management plane for fleets of Karmada instances"
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the simulated Karmada fleet alone (host API, Karmada APIs, member clusters, faults).
    #[cfg(feature = "testbed")]
    Sim(sim::SimArgs),
    /// The main job: a simulated Karmada fleet and Kairship with all roles against it.
    #[cfg(feature = "testbed")]
    Demo(Box<demo::DemoArgs>),
    /// A client for people: instances, stats, clusters and actors over gRPC.
    Ctl(Box<ctl::CtlArgs>),
    /// Run Kairship against a host cluster (production).
    Run(Box<run::RunArgs>),
    /// Chaos experiments: faults against one instance while the others carry load.
    #[cfg(feature = "testbed")]
    Chaos(chaos::ChaosArgs),
    /// Print Kairship's CustomResourceDefinitions as YAML (the same bytes as deploy/crds/).
    Crds,
    /// Print the REST API's OpenAPI 3.0 document (as served at /openapi.json; ui/openapi.json).
    Openapi,
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
