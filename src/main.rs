//! `kairship`: the management plane for fleets of Karmada instances.

use std::process::ExitCode;

use clap::Parser;

use kairship::cli::{Cli, Command};

fn main() -> ExitCode {
    // Before any thread starts: the allocator's options for a process of many cached objects.
    kairship_heap::configure();
    let cli = Cli::parse();
    // The chaos report is the output; the fleet it runs speaks up only about trouble.
    let default_filter = match cli.command {
        #[cfg(feature = "testbed")]
        Command::Chaos(_) => "warn,kube_client=off",
        _ => "info",
    };
    kairship::telemetry::init(&cli.log, default_filter);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            #[cfg(feature = "testbed")]
            Command::Sim(args) => kairship::cli::sim::run(args).await,
            Command::Run(args) => kairship::cli::run::run(*args).await,
            #[cfg(feature = "testbed")]
            Command::Demo(args) => kairship::cli::demo::run(*args).await,
            Command::Ctl(args) => kairship::cli::ctl::run(*args).await,
            #[cfg(feature = "testbed")]
            Command::Chaos(args) => kairship::cli::chaos::run(args).await,
            Command::Crds => kairship::crd::crds_yaml()
                .map(|y| print!("{y}"))
                .map_err(|e| kairship::Error::Usage(format!("rendering CRDs: {e}"))),
            Command::Openapi => kairship::api::openapi::document_text()
                .map(|t| print!("{t}"))
                .map_err(|e| kairship::Error::Usage(format!("rendering OpenAPI: {e}"))),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
