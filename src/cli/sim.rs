//! `kairship sim`: the simulated fleet alone, and `kairship sim fault|cluster` to steer it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use kairship_sim::faults::{Fault, FaultMode};
use kairship_sim::{Fleet, FleetConfig};
use serde_json::{json, Value};

use crate::Error;

/// Lets `demo` and `sim` use `?` on the simulator's errors.
impl From<kairship_sim::Error> for Error {
    fn from(e: kairship_sim::Error) -> Self {
        Error::Fleet(Box::new(e))
    }
}

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub action: Option<SimAction>,
    /// Where endpoints.json and the kubeconfigs are written.
    #[arg(long, global = true, default_value = ".kairship-sim")]
    pub state_dir: PathBuf,
    /// Number of Karmada instances.
    #[arg(long, default_value_t = 3)]
    pub instances: usize,
    /// Member clusters per instance.
    #[arg(long, default_value_t = 3)]
    pub clusters: usize,
    /// Seconds between member-cluster status changes (their load drifts); 0 holds them still.
    #[arg(long, default_value_t = 5)]
    pub cluster_tick_secs: u64,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 10)]
    pub bookmark_secs: u64,
    /// Port of the plain-HTTP admin API (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub admin_port: u16,
    /// Serve every instance behind one listening port, picked by the TLS server name
    /// (each kubeconfig's tls-server-name), as instances behind one ingress are: no
    /// listener per instance, so large fleets are bounded by memory, not open files.
    #[arg(long)]
    pub shared_listener: bool,
}

#[derive(Debug, Subcommand)]
pub enum SimAction {
    /// Inject a fault into one instance (or `host`), or clear it.
    Fault {
        /// Instance name, or `host`.
        instance: String,
        #[arg(long, value_parser = parse_mode, required_unless_present = "clear")]
        mode: Option<FaultMode>,
        #[arg(long)]
        latency_ms: Option<u64>,
        #[arg(long)]
        error_rate: Option<f64>,
        /// Remove the fault.
        #[arg(long, conflicts_with = "mode")]
        clear: bool,
    },
    /// Hold a member cluster NotReady, or make it flap.
    Cluster {
        instance: String,
        cluster: String,
        #[arg(long)]
        ready: Option<bool>,
        #[arg(long)]
        flapping: bool,
    },
}

fn parse_mode(s: &str) -> Result<FaultMode, String> {
    serde_json::from_value(Value::String(s.to_string())).map_err(|_| {
        format!("unknown mode {s:?}: expected down, latency, errors, drop-watches or compact")
    })
}

/// Descriptors per instance: only the simulator's ends are in this process (the API
/// server's listener and the connections Kairship and kubectl open to it), with room for
/// reconnects. Measured: Kairship keeps about 4 per instance with HTTP/2.
const FILES_PER_INSTANCE: u64 = 8;

/// Behind one listener an instance holds only its clients' connections: one per replica
/// watching it (HTTP/2), two while it moves between replicas. Counted per two instances.
const FILES_PER_TWO_SHARED: u64 = 3;

pub async fn run(args: SimArgs) -> Result<(), Error> {
    match args.action {
        None => {
            let limit = crate::open_files::raise_open_files();
            let need = if args.shared_listener {
                crate::open_files::check(args.instances.div_ceil(2), FILES_PER_TWO_SHARED, limit)
            } else {
                crate::open_files::check(args.instances, FILES_PER_INSTANCE, limit)
            };
            need.map_err(Error::Usage)?;
            serve(&args).await
        }
        Some(SimAction::Fault {
            instance,
            mode,
            latency_ms,
            error_rate,
            clear,
        }) => {
            let admin = admin_url(&args.state_dir)?;
            let url = format!("{admin}/faults/{instance}");
            let (code, body) = if clear {
                kairship_wire::fault_client::call("DELETE", &url, None).await?
            } else {
                let mode = mode.ok_or_else(|| Error::Usage("--mode is required".into()))?;
                let fault = Fault {
                    mode,
                    latency_ms,
                    error_rate,
                };
                let body = serde_json::to_value(&fault).map_err(|e| Error::Usage(e.to_string()))?;
                kairship_wire::fault_client::call("POST", &url, Some(body)).await?
            };
            report(code, body)
        }
        Some(SimAction::Cluster {
            instance,
            cluster,
            ready,
            flapping,
        }) => {
            let admin = admin_url(&args.state_dir)?;
            let url = format!("{admin}/clusters/{instance}/{cluster}");
            let (code, body) = kairship_wire::fault_client::call(
                "POST",
                &url,
                Some(json!({"ready": ready, "flapping": flapping})),
            )
            .await?;
            report(code, body)
        }
    }
}

fn report(code: u16, body: Value) -> Result<(), Error> {
    if (200..300).contains(&code) {
        println!("{body}");
        Ok(())
    } else {
        let msg = body
            .get("error")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| body.to_string());
        Err(Error::Usage(format!("simulator refused ({code}): {msg}")))
    }
}

fn admin_url(state_dir: &Path) -> Result<String, Error> {
    let path = state_dir.join("endpoints.json");
    let text = std::fs::read(&path).map_err(|source| Error::Io {
        context: format!(
            "reading {} (is `kairship sim --state-dir {}` running?)",
            path.display(),
            state_dir.display()
        ),
        source,
    })?;
    let v: Value = serde_json::from_slice(&text)
        .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", path.display())))?;
    v.get("sim_admin")
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| Error::Usage(format!("{} has no sim_admin address", path.display())))
}

async fn serve(args: &SimArgs) -> Result<(), Error> {
    let mut config = FleetConfig {
        instances: args.instances,
        clusters: args.clusters,
        cluster_tick: Duration::from_secs(args.cluster_tick_secs),
        state_dir: Some(args.state_dir.clone()),
        admin_port: args.admin_port,
        shared_listener: args.shared_listener,
        ..FleetConfig::default()
    };
    config.server.bookmark_interval = Duration::from_secs(args.bookmark_secs.max(1));
    let fleet = Fleet::start(config).await?;
    let dir = args.state_dir.display();
    println!(
        "simulated fleet running: {} instance(s) x {} cluster(s)",
        args.instances, args.clusters
    );
    println!("  endpoints:  {dir}/endpoints.json");
    println!(
        "  host:       kubectl --kubeconfig {dir}/kubeconfigs/host.kubeconfig get karmadas -A"
    );
    for i in fleet.instances() {
        println!(
            "  {:<11} kubectl --kubeconfig {dir}/kubeconfigs/{}.kubeconfig get clusters",
            format!("{}:", i.name),
            i.name
        );
    }
    println!("  faults:     kairship sim fault --state-dir {dir} <instance> --mode down|latency|errors|drop-watches|compact");
    println!("press Ctrl-C to stop");
    super::shutdown_signal().await;
    fleet.shutdown();
    println!("simulated fleet stopped");
    Ok(())
}
