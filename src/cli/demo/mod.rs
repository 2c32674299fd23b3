//! `kairship demo`: the main job on an embedded default. A simulated fleet (host API and
//! N Karmada instances with member clusters, a sample workload with its policies in each)
//! and Kairship with all roles against it, serving until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use kairship_sim::{Fleet, FleetConfig};

use crate::context::Settings;
use crate::{bootstrap, server, Error};

mod cluster;
mod replicas;
mod setup;

use setup::{
    attach_all, bind_roles, client_from, io, step, wait_running, write_endpoints, write_tokens,
    Attach, DemoTokens, Endpoints,
};

const NAMESPACE: &str = "kairship-system";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where endpoints.json, the CA and the kubeconfigs are written.
    #[arg(long, default_value = ".kairship-demo")]
    pub state_dir: PathBuf,
    #[arg(long, default_value_t = 3)]
    pub instances: usize,
    #[arg(long, default_value_t = 3)]
    pub clusters: usize,
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub grpc_addr: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub http_addr: SocketAddr,
    /// Plain-HTTP metrics and probes.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub probes_addr: SocketAddr,
    /// `sim`: the embedded simulator. `real`: upstream kube-apiserver, etcd and Karmada
    /// run as processes (built by scripts/real-fleet/build.sh). `cluster`: the real fleet
    /// plus a kubelet-backed node on its host, with Kairship installed there by its Helm
    /// chart (3 replicas); needs root and the image of scripts/image/build.sh.
    #[arg(long, value_enum, default_value_t = FleetKind::Sim)]
    pub fleet: FleetKind,
    /// `--fleet cluster`: Kairship's image as an OCI archive (scripts/image/build.sh);
    /// by default `target/image/kairship-<version>.oci.tar`.
    #[arg(long)]
    pub image_archive: Option<PathBuf>,
    /// `--fleet cluster`: the image's name inside that archive.
    #[arg(long, default_value = concat!("ghcr.io/kairship/kairship:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// `--fleet cluster`: the Helm chart to install.
    #[arg(long, default_value = "deploy/chart/kairship")]
    pub chart: PathBuf,
    /// Elect the controller-manager leader through a Lease on the host, as `kairship run`
    /// does (kube-system/kairship-controller-manager); false: always the leader.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Seconds a cache's watch may keep failing, while its instance answers, before the
    /// instance is Degraded (a Karmada CRD missing, a kind Kairship may not list).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub instance_degraded_after_secs: u64,
    /// Refuse member clusters on loopback when joining (as `kairship run` does); the
    /// demo's own members run on loopback, so it allows them by default.
    #[arg(long)]
    pub no_member_loopback: bool,
    /// Days before an instance's first certificate expires that its
    /// `CertificatesExpiring` condition turns True (as `kairship run`).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub certificate_expiry_warning_days: u64,
    /// An OIDC provider whose tokens Kairship accepts besides the demo's token file (the
    /// console then offers to sign in with it).
    #[command(flatten)]
    pub oidc: crate::cli::run::OidcArgs,
    /// Register each instance with Clusterpedia (`kairship run --clusterpedia`): installs
    /// Clusterpedia's CRDs, fetched by scripts/real-fleet/build.sh, into the host. The
    /// demo does not run Clusterpedia's own servers (see the README).
    #[arg(long)]
    pub clusterpedia: bool,
    /// What one caller may hold of Kairship, as `kairship run` takes them.
    #[command(flatten)]
    pub limits: crate::cli::run::LimitArgs,
    /// Sharded replicas of Kairship (`--fleet sim` or `real`): this process is the first,
    /// the others `kairship run` processes beside it; each runs its share of the instances
    /// and any answers for all. The demo prints who owns what and how to kill one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=9))]
    pub replicas: u64,
    /// Each instance also at `<instance>.<domain>` (SNI and Host); the kubeconfigs the
    /// demo writes name it as `tls-server-name`, so `kubectl get --raw` reaches the
    /// instance. `*.localtest` never resolves: clients connect by address.
    #[arg(long, default_value = crate::api::instance_hosts::DEMO_DOMAIN, value_parser = crate::cli::run::instance_domain)]
    pub instance_domain: crate::api::instance_hosts::InstanceHosts,
}

/// Clusterpedia's namespace in the demo (its default).
const CLUSTERPEDIA_NAMESPACE: &str = "clusterpedia-system";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetKind {
    Sim,
    Real,
    Cluster,
}

/// What the demo needs of a fleet, simulated or real.
struct FleetView {
    host_kubeconfig: PathBuf,
    /// Each instance's name and a kubeconfig straight to its karmada-apiserver.
    instances: Vec<(String, PathBuf)>,
    /// The fault API (the simulator's admin API, or the real fleet's process faults).
    admin_url: Option<String>,
    fault_hint: String,
}

/// Binds the demo's roles and loads the auth configuration as `kairship run` would.
async fn demo_auth(
    host: &kube::Client,
    tokens: &DemoTokens,
    viewer_instance: Option<&String>,
    oidc: &crate::cli::run::OidcArgs,
) -> Result<std::sync::Arc<crate::auth::Auth>, Error> {
    bind_roles(host, viewer_instance).await?;
    let config = crate::auth::AuthConfig {
        token_file: Some(tokens.token_file.clone()),
        webhook_secret_file: Some(tokens.webhook_secret.clone()),
        oidc: oidc.config()?,
        ..Default::default()
    };
    crate::auth::Auth::new(&config, host.clone())
        .await
        .map_err(|e| Error::Usage(format!("authentication: {e}")))
}

/// Descriptors per instance when the fleet runs in this process: the simulated API
/// server's listener, and the instance client's one HTTP/2 connection and the demo's
/// seeding client, each open at both ends, with room for reconnects.
const FILES_PER_SIM_INSTANCE: u64 = 8;

pub async fn run(args: DemoArgs) -> Result<(), Error> {
    let limit = crate::open_files::raise_open_files();
    if args.fleet == FleetKind::Sim {
        crate::open_files::check(args.instances, FILES_PER_SIM_INSTANCE, limit)
            .map_err(Error::Usage)?;
    }
    let total = 5;
    let dir = &args.state_dir;
    std::fs::create_dir_all(dir.join("kubeconfigs"))
        .map_err(io(format!("creating {}", dir.display())))?;
    let _ = std::fs::remove_file(dir.join("endpoints.json"));

    if args.clusterpedia && args.fleet == FleetKind::Cluster {
        return Err(Error::Usage(
            "--clusterpedia works with --fleet sim or real; with the chart, set clusterpedia.enabled".into(),
        ));
    }
    if args.replicas > 1 {
        if args.fleet == FleetKind::Cluster {
            return Err(Error::Usage(
                "--replicas is for --fleet sim or real; the chart's pods are its replicas (helm upgrade --set replicaCount=N)".into(),
            ));
        }
        if !args.leader_elect {
            return Err(Error::Usage("--replicas needs --leader-elect=true".into()));
        }
        if args.oidc.oidc_issuer_url.is_some() {
            return Err(Error::Usage(
                "--replicas takes the demo's tokens only (no --oidc-*)".into(),
            ));
        }
    }
    match args.fleet {
        FleetKind::Real => return run_real(&args, total).await,
        FleetKind::Cluster => return cluster::run(&args).await,
        FleetKind::Sim => {}
    }
    step(1, total, &format!("starting the simulated fleet: host API + {} Karmada instance(s) x {} member cluster(s)", args.instances, args.clusters));
    let sim_dir = dir.join("sim");
    let fleet = Fleet::start(FleetConfig {
        instances: args.instances,
        clusters: args.clusters,
        state_dir: Some(sim_dir.clone()),
        ..Default::default()
    })
    .await?;
    let view = sim_view(&fleet, &sim_dir);
    let result = serve(&args, &view, total).await;
    fleet.shutdown();
    result
}

/// The same demo on real control planes: kube-apiserver and etcd for the host and each
/// member, Karmada's own components for each instance.
async fn run_real(args: &DemoArgs, total: usize) -> Result<(), Error> {
    step(1, total, &format!("starting a real fleet: host kube-apiserver + {} Karmada instance(s) x {} member cluster(s) (binaries from scripts/real-fleet/build.sh)", args.instances, args.clusters));
    let real = RealRun::start(args, None).await?;
    let result = serve(args, &real.view(), total).await;
    real.stop().await;
    result
}

/// A real fleet and its fault API (`POST /faults/{instance}`), for `--fleet real` and
/// `--fleet cluster`.
struct RealRun {
    fleet: std::sync::Arc<kairship_realfleet::RealFleet>,
    admin: SocketAddr,
    faults: tokio::task::JoinHandle<()>,
}

impl RealRun {
    /// `node_images`: a kubelet-backed node on the host running these images.
    async fn start(args: &DemoArgs, node_images: Option<Vec<PathBuf>>) -> Result<Self, Error> {
        let real_dir = std::path::absolute(args.state_dir.join("real"))
            .map_err(io("resolving the state directory".into()))?;
        let _ = std::fs::remove_dir_all(&real_dir);
        let mut config =
            kairship_realfleet::FleetConfig::new(real_dir, args.instances, args.clusters);
        config.node_images = node_images;
        let starting = kairship_realfleet::RealFleet::start(config, &|what: &str| {
            println!("      {what}");
        });
        // Interrupted while starting: dropping the half-started fleet stops its processes
        // (and the node's janitor removes what the node made).
        let fleet = tokio::select! {
            f = starting => f.map_err(|e| Error::Usage(format!("real fleet: {e}")))?,
            _ = super::shutdown_signal() => return Err(Error::Usage("interrupted while starting the real fleet".into())),
        };
        let fleet = std::sync::Arc::new(fleet);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(io("binding the fault API".into()))?;
        let admin = listener
            .local_addr()
            .map_err(io("binding the fault API".into()))?;
        let router = kairship_realfleet::faults::router(fleet.clone());
        let faults = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            fleet,
            admin,
            faults,
        })
    }

    fn view(&self) -> FleetView {
        let admin = self.admin;
        FleetView {
            host_kubeconfig: self.fleet.host.kubeconfig.clone(),
            instances: self
                .fleet
                .instances
                .iter()
                .map(|i| (i.name.clone(), i.kubeconfig.clone()))
                .collect(),
            admin_url: Some(format!("http://{admin}")),
            fault_hint: format!(
                "curl -X POST http://{admin}/faults/{{instance}} -d '{{\"mode\":\"down\"}}' -H 'content-type: application/json'   (SIGKILLs its kube-apiserver; DELETE restarts it)"
            ),
        }
    }

    /// Stops the fault API, then the fleet, before returning: every process, and the
    /// node's namespaces, mounts and cgroups, are gone once this returns.
    async fn stop(self) {
        self.faults.abort();
        let _ = self.faults.await;
        // The fault API's router held the other reference; this drop is the last.
        let fleet = self.fleet;
        let _ = tokio::task::spawn_blocking(move || drop(fleet)).await;
    }
}

/// Kairship up on a fleet, with what the demo prints.
pub(crate) struct Up {
    pub running: server::Running,
    pub names: Vec<String>,
    pub admin: String,
    pub viewer: String,
    pub https: String,
    pub host_kubeconfig: PathBuf,
    /// The other replicas (`--replicas`), in processes of their own.
    pub replicas: Vec<replicas::Replica>,
    /// Each instance's owner when sharded.
    pub owners: std::collections::BTreeMap<String, String>,
}

/// A simulated fleet and Kairship on it, in this process, for `kairship chaos run`.
pub(crate) struct SimDemo {
    pub fleet: Fleet,
    pub up: Up,
}

pub(crate) async fn start_sim(args: &DemoArgs) -> Result<SimDemo, Error> {
    let dir = &args.state_dir;
    std::fs::create_dir_all(dir.join("kubeconfigs"))
        .map_err(io(format!("creating {}", dir.display())))?;
    let sim_dir = dir.join("sim");
    let fleet = Fleet::start(FleetConfig {
        instances: args.instances,
        clusters: args.clusters,
        state_dir: Some(sim_dir.clone()),
        ..Default::default()
    })
    .await?;
    let view = sim_view(&fleet, &sim_dir);
    let up = bring_up(args, &view, 5).await?;
    Ok(SimDemo { fleet, up })
}

fn sim_view(fleet: &Fleet, sim_dir: &Path) -> FleetView {
    FleetView {
        host_kubeconfig: sim_dir.join("kubeconfigs/host.kubeconfig"),
        instances: fleet
            .instances()
            .iter()
            .map(|i| {
                let path = sim_dir.join(format!("kubeconfigs/{}.kubeconfig", i.name));
                (i.name.clone(), path)
            })
            .collect(),
        admin_url: Some(fleet.admin_url()),
        fault_hint: format!(
            "kairship sim fault --state-dir {} {{instance}} --mode down",
            sim_dir.display()
        ),
    }
}

/// Installs CRDs, attaches and seeds the instances, starts Kairship, waits for Running
/// and writes endpoints.json.
async fn bring_up(args: &DemoArgs, fleet: &FleetView, total: usize) -> Result<Up, Error> {
    let dir = &args.state_dir;
    let host_kubeconfig = fleet.host_kubeconfig.clone();
    let host = client_from(&host_kubeconfig).await?;

    step(
        2,
        total,
        "installing Kairship's CRDs and attaching the instances",
    );
    let kube_err = |what: &str| {
        let what = what.to_string();
        move |e: kube::Error| Error::Usage(format!("{what}: {e}"))
    };
    bootstrap::install_crds(&host)
        .await
        .map_err(kube_err("installing CRDs"))?;
    bootstrap::ensure_namespace(&host, NAMESPACE)
        .await
        .map_err(kube_err("creating the namespace"))?;
    let mut list = Vec::new();
    for (name, path) in &fleet.instances {
        let kubeconfig = std::fs::read(path).map_err(io(format!("reading {}", path.display())))?;
        list.push(Attach {
            name: name.clone(),
            seed: path.clone(),
            kubeconfig,
        });
    }
    attach_all(&host, list).await?;
    if args.clusterpedia {
        install_clusterpedia_crds(&host).await?;
    }

    step(
        3,
        total,
        "starting Kairship (controller-manager, gRPC API, HTTPS API and proxy)",
    );
    let names: Vec<String> = fleet.instances.iter().map(|(n, _)| n.clone()).collect();
    let tokens = write_tokens(dir)?;
    let auth = demo_auth(&host, &tokens, names.first(), &args.oidc).await?;
    let (admin, viewer) = (tokens.admin.clone(), tokens.viewer.clone());
    let cert = kairship_wire::tls::generate_for("kairship", &[args.instance_domain.wildcard()])
        .map_err(|e| Error::Usage(e.to_string()))?;
    let audit_log = dir.join("audit.log");
    // Sharded: the first replica's port is told to its peers before it is bound.
    let mut http_addr = args.http_addr;
    let first = match args.replicas > 1 {
        true => {
            if http_addr.port() == 0 {
                http_addr.set_port(replicas::free_port()?);
            }
            Some(replicas::first(http_addr, &cert.ca_pem))
        }
        false => None,
    };
    let election = match (&first, args.leader_elect) {
        (Some(f), _) => crate::actors::tree::Election::Lease(f.leader.clone()),
        (None, true) => {
            crate::actors::tree::Election::Lease(crate::host::leader::LeaderConfig::new(
                replicas::LEASE_NAMESPACE,
                "kairship-controller-manager",
                "kairship-demo",
            ))
        }
        (None, false) => crate::actors::tree::Election::Always,
    };
    let running = server::start(server::ServerConfig {
        host: host.clone(),
        identity: first
            .as_ref()
            .map_or_else(|| "kairship-demo".to_string(), |f| f.identity.clone()),
        election,
        settings: Settings {
            shards: first.as_ref().map(|f| f.shards.clone()),
            degraded_after: Duration::from_secs(args.instance_degraded_after_secs),
            certificate_warning: Duration::from_secs(args.certificate_expiry_warning_days * 86_400),
            clusterpedia: args
                .clusterpedia
                .then(|| CLUSTERPEDIA_NAMESPACE.to_string()),
            // Its probes port is on loopback unless told otherwise: the instances' series
            // are there for whoever explores the demo.
            probes_instance_series: args.probes_addr.ip().is_loopback(),
            // The demo's members run on loopback.
            member_networks: match args.no_member_loopback {
                true => Default::default(),
                false => crate::member_networks::MemberNetworks::allowing_loopback(),
            },
            ..Settings::default()
        },
        grpc_addr: args.grpc_addr,
        http_addr,
        probes_addr: Some(args.probes_addr),
        tls: cert.server_config.clone(),
        grpc_tls: None,
        // Audit events as kube-apiserver writes them, beside endpoints.json.
        audit: crate::cli::run::audit_sink(Some(&audit_log))?,
        limits: args.limits.server(),
        fairness: args.limits.fairness(),
        auth,
        chaos_reports: Some(dir.join("chaos")),
        instance_hosts: Some(Arc::new(args.instance_domain.clone())),
        // Reached at its loopback address: the kubeconfigs it hands out name that.
        kubeconfigs: crate::api::kubeconfigs::Issuer {
            ca_pem: Some(cert.ca_pem.clone()),
            ..Default::default()
        },
        shutdown_delay: Duration::ZERO,
        forward: first.as_ref().map(|f| f.forward.clone()),
    })
    .await
    .map_err(|e| Error::Usage(e.to_string()))?;
    let mut others = match args.replicas > 1 {
        true => replicas::start(
            args.replicas as usize,
            &replicas::Launch {
                dir,
                host_kubeconfig: &host_kubeconfig,
                cert: &cert,
                token_file: &tokens.token_file,
                webhook_secret: &tokens.webhook_secret,
                flags: replica_flags(args),
            },
        )?,
        false => Vec::new(),
    };

    step(4, total, "waiting for every instance to be Running");
    if let Err(e) = wait_running(&host).await {
        let why = replicas::ended(&mut others).map_or(e.to_string(), |r| format!("{e}; {r}"));
        replicas::stop(others);
        return Err(Error::Usage(why));
    }
    let owners = match args.replicas > 1 {
        true => match replicas::owners(&host, &names, Duration::from_secs(60)).await {
            Ok(o) => o,
            Err(e) => {
                replicas::stop(others);
                return Err(e);
            }
        },
        false => Default::default(),
    };

    step(5, total, "writing endpoints.json and kubeconfigs");
    let https = format!("https://{}", running.http_addr);
    write_endpoints(
        dir,
        &Endpoints {
            grpc: running.grpc_addr.to_string(),
            // Plain text on loopback (the HTTPS port serves gRPC with TLS too).
            grpc_tls: false,
            audit_log: Some(&audit_log),
            https: https.clone(),
            ca_pem: &cert.ca_pem,
            sim_admin: fleet.admin_url.clone(),
            metrics: running.probes_addr.map(|a| format!("http://{a}/metrics")),
            host_kubeconfig: &host_kubeconfig,
            names: &names,
            instance_hosts: Some(&args.instance_domain),
            admin: &admin,
            viewer: &viewer,
            replicas: others
                .iter()
                .map(|r| {
                    serde_json::json!({"name": r.name, "https": r.https, "pid": r.pid(),
                        "log": r.log.display().to_string()})
                })
                .collect(),
        },
    )?;

    Ok(Up {
        running,
        names,
        admin,
        viewer,
        https,
        host_kubeconfig,
        replicas: others,
        owners,
    })
}

/// The first replica's settings that the others take as `kairship run` flags.
fn replica_flags(args: &DemoArgs) -> Vec<String> {
    let mut flags = vec![
        format!(
            "--instance-degraded-after-secs={}",
            args.instance_degraded_after_secs
        ),
        format!(
            "--certificate-expiry-warning-days={}",
            args.certificate_expiry_warning_days
        ),
        "--probes-instance-series".to_string(),
        format!("--instance-domain={}", args.instance_domain.domain()),
    ];
    if !args.no_member_loopback {
        flags.push("--member-allowed-cidrs=127.0.0.0/8,::1/128".into());
    }
    if args.clusterpedia {
        flags.push("--clusterpedia".into());
        flags.push(format!("--clusterpedia-namespace={CLUSTERPEDIA_NAMESPACE}"));
    }
    flags
}

async fn serve(args: &DemoArgs, fleet: &FleetView, total: usize) -> Result<(), Error> {
    let dir = &args.state_dir;
    let Up {
        running,
        names,
        admin,
        viewer,
        https,
        host_kubeconfig,
        replicas: others,
        owners,
    } = bring_up(args, fleet, total).await?;
    let d = dir.display();
    let first = names.first().cloned().unwrap_or_default();
    println!();
    println!("Kairship demo is running ({} instances).", names.len());
    println!(
        "  gRPC:        {} (plaintext on loopback; reflection enabled)",
        running.grpc_addr
    );
    println!("  HTTPS:       {https} (CA: {d}/ca.crt)");
    println!(
        "  console:     {https}/ui/   (sign in with the admin token below; the CA is self-signed)"
    );
    println!("  OpenAPI:     {https}/openapi.json");
    println!("  endpoints:   {d}/endpoints.json");
    if let Some(a) = running.probes_addr {
        println!("  metrics:     http://{a}/metrics (plain HTTP, with /healthz and /readyz)");
    }
    println!("  kubectl through Kairship's proxy:");
    println!("    kubectl --kubeconfig {d}/kubeconfigs/{first}.kubeconfig get clusters");
    println!("    kubectl --kubeconfig {d}/kubeconfigs/{first}.kubeconfig get deployments,propagationpolicies,overridepolicies");
    println!(
        "  the host cluster:  kubectl --kubeconfig {} get instances",
        host_kubeconfig.display()
    );
    println!(
        "  a fault:     {}",
        fleet.fault_hint.replace("{instance}", &first)
    );
    println!(
        "  chaos:       kairship chaos run --profile short --endpoints {d}/endpoints.json --state-dir {d}/chaos   (the console shows the report)"
    );
    println!("  the gRPC API: kairship ctl --state-dir {d} instances list");
    println!(
        "  placement:   kairship ctl --state-dir {d} workloads get {first} nginx   (per-cluster replicas, overrides)"
    );
    println!(
        "                grpcurl -plaintext -H 'authorization: Bearer {admin}' {} kairship.v1alpha1.InstanceService/ListInstances",
        running.grpc_addr
    );
    println!("  tokens:      admin {admin}");
    println!("               viewer {viewer} (bound to {first})");
    println!("               (token file {d}/tokens.csv; roles: kubectl --kubeconfig {} get instancerolebindings)", host_kubeconfig.display());
    if !others.is_empty() {
        print_replicas(&https, &others, &owners, &d.to_string());
    }
    println!("Press Ctrl-C to stop.");
    super::shutdown_signal().await;
    println!("stopping...");
    let _ = std::fs::remove_file(dir.join("endpoints.json"));
    // The others hand their instances to this one as they go, then this one stops.
    let _ = tokio::task::spawn_blocking(move || replicas::stop(others)).await;
    running.shutdown().await;
    println!("stopped");
    Ok(())
}

/// Who owns what, and how to see an instance move.
fn print_replicas(
    https: &str,
    others: &[replicas::Replica],
    owners: &std::collections::BTreeMap<String, String>,
    d: &str,
) {
    let owned = |replica: &str| {
        let list: Vec<&str> = owners
            .iter()
            .filter(|(_, o)| o.as_str() == replica)
            .map(|(i, _)| i.as_str())
            .collect();
        match list.is_empty() {
            true => "(none yet)".to_string(),
            false => list.join(", "),
        }
    };
    println!("  replicas (sharded; any answers for every instance):");
    let first = replicas::name(1);
    println!("    {first}  this process  {https}  owns {}", owned(&first));
    for r in others {
        println!(
            "    {}  pid {}  {}  owns {}  (log {})",
            r.name,
            r.pid(),
            r.https,
            owned(&r.name),
            r.log.display()
        );
    }
    if let Some(r) = others.first() {
        println!(
            "  move instances: kill -9 {}   ({}'s instances go to the others once its Lease lapses, about 15 s; \
             kairship ctl --state-dir {d} actors list shows each actor's REPLICA)",
            r.pid(),
            r.name
        );
    }
}

/// Clusterpedia's PediaCluster and ClusterSyncResources CRDs from the build cache, and
/// its namespace, where Kairship writes the kubeconfig Secrets Clusterpedia reads.
async fn install_clusterpedia_crds(host: &kube::Client) -> Result<(), Error> {
    let dir = kairship_realfleet::default_bin_dir()
        .parent()
        .map(|p| p.join("clusterpedia-crds"))
        .unwrap_or_default();
    if !dir
        .join("cluster.clusterpedia.io_pediaclusters.yaml")
        .is_file()
    {
        return Err(Error::Usage(format!(
            "--clusterpedia: Clusterpedia's CRDs are not in {}: run scripts/real-fleet/build.sh",
            dir.display()
        )));
    }
    let failed = |e: kairship_realfleet::Error| Error::Usage(format!("--clusterpedia: {e}"));
    kairship_realfleet::karmada::install_crds(host, &dir)
        .await
        .map_err(failed)?;
    kairship_realfleet::karmada::wait_served(
        host,
        "/apis/cluster.clusterpedia.io/v1alpha2",
        Duration::from_secs(30),
        "Clusterpedia's CRDs",
        &dir,
    )
    .await
    .map_err(failed)?;
    bootstrap::ensure_namespace(host, CLUSTERPEDIA_NAMESPACE)
        .await
        .map_err(|e| Error::Usage(format!("creating {CLUSTERPEDIA_NAMESPACE}: {e}")))
}
