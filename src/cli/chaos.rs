//! `kairship chaos run`: the experiments in `chaos/` against a fleet this command starts
//! (the simulator and Kairship in this process) or a running demo (`--endpoints`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::chaos::faults::Injector;
use crate::chaos::load::Endpoints;
use crate::chaos::run::{run_one, Control};
use crate::chaos::spec::{self, Profile};
use crate::Error;

#[derive(Debug, Args)]
pub struct ChaosArgs {
    #[command(subcommand)]
    pub command: ChaosCommand,
}

#[derive(Debug, Subcommand)]
pub enum ChaosCommand {
    /// Run experiments and write the report (table, report.json, report.svg).
    Run(ChaosRunArgs),
}

#[derive(Debug, Args)]
pub struct ChaosRunArgs {
    /// Experiment files; default: every chaos/*.yaml.
    pub files: Vec<PathBuf>,
    /// Where the report (and the fleet this command starts) go.
    #[arg(long, default_value = ".kairship-chaos")]
    pub state_dir: PathBuf,
    /// A running demo's endpoints.json; without it a fleet is started here.
    #[arg(long)]
    pub endpoints: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Profile::Full)]
    pub profile: Profile,
    /// Instances of the fleet started here (the first is the usual victim).
    #[arg(long, default_value_t = 3)]
    pub instances: usize,
    #[arg(long, default_value_t = 2)]
    pub clusters: usize,
}

fn experiment_files(files: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    if !files.is_empty() {
        return Ok(files.to_vec());
    }
    let dir = PathBuf::from("chaos");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|source| Error::Io {
            context: "reading chaos/ (run from the repository, or name the files)".into(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    out.sort();
    Ok(out)
}

pub async fn run(args: ChaosArgs) -> Result<(), Error> {
    let ChaosCommand::Run(args) = args.command;
    // Injected panics are expected here: one line each, not a backtrace.
    std::panic::set_hook(Box::new(|info| eprintln!("panic (chaos): {info}")));
    let experiments = experiment_files(&args.files)?
        .iter()
        .map(|p| spec::load(p).map_err(|e| Error::Usage(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    if experiments.is_empty() {
        return Err(Error::Usage("no experiments to run".into()));
    }
    let (endpoints, tree, demo) = match &args.endpoints {
        Some(path) => (Endpoints::read(path).map_err(Error::Usage)?, None, None),
        None => {
            println!(
                "starting a fleet: {} instance(s) x {} member cluster(s), Kairship in this process",
                args.instances, args.clusters
            );
            let demo_args = super::demo::DemoArgs {
                state_dir: args.state_dir.join("fleet"),
                instances: args.instances,
                clusters: args.clusters,
                grpc_addr: "127.0.0.1:0"
                    .parse()
                    .map_err(|_| Error::Usage("address".into()))?,
                http_addr: "127.0.0.1:0"
                    .parse()
                    .map_err(|_| Error::Usage("address".into()))?,
                probes_addr: "127.0.0.1:0"
                    .parse()
                    .map_err(|_| Error::Usage("address".into()))?,
                fleet: super::demo::FleetKind::Sim,
                // Only `--fleet cluster` installs an image with a chart.
                image_archive: None,
                image: String::new(),
                chart: PathBuf::new(),
                leader_elect: false,
                instance_degraded_after_secs: 60,
                no_member_loopback: false,
                certificate_expiry_warning_days: 30,
                oidc: Default::default(),
                clusterpedia: false,
                limits: Default::default(),
                replicas: 1,
                instance_domain: crate::cli::run::instance_domain(
                    crate::api::instance_hosts::DEMO_DOMAIN,
                )
                .map_err(Error::Usage)?,
            };
            let demo = super::demo::start_sim(&demo_args).await?;
            let path = demo_args.state_dir.join("endpoints.json");
            let endpoints = Endpoints::read(&path).map_err(Error::Usage)?;
            let tree = demo.up.running.tree.handle();
            (endpoints, Some(tree), Some(demo))
        }
    };
    let host = match &endpoints.host_kubeconfig {
        Some(path) => Some(crate::cli::run::host_client(Some(path)).await?),
        None => None,
    };
    let injector = Injector {
        sim_admin: endpoints.sim_admin.clone(),
        tree,
        host,
        viewer_token: endpoints.viewer_token.clone(),
        own_kubeconfigs: endpoints
            .host_kubeconfig
            .as_ref()
            .and_then(|p| p.parent().map(std::path::Path::to_path_buf)),
    };
    let control = Control::new(&endpoints).map_err(Error::Usage)?;
    let run_id = format!("chaos-{}", jiff::Timestamp::now().as_second());
    let mut reports = Vec::new();
    for e in &experiments {
        println!(
            "running {} ({:?} profile): {}",
            e.name, args.profile, e.description
        );
        let r = run_one(e, &endpoints, &injector, &control, args.profile, &run_id).await;
        reports.push(r);
        crate::chaos::write_report(&args.state_dir, args.profile, &reports).map_err(|source| {
            Error::Io {
                context: format!("writing the report to {}", args.state_dir.display()),
                source,
            }
        })?;
    }
    print!("{}", crate::chaos::report::table(&reports));
    let d = args.state_dir.display();
    println!("report: {d}/report.json, picture: {d}/report.svg");
    if let Some(demo) = demo {
        demo.up.running.shutdown().await;
        demo.fleet.shutdown();
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| r.skipped.is_none() && !r.passed)
        .map(|r| r.name.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "goals missed in: {} (see the table above)",
            failed.join(", ")
        )))
    }
}
