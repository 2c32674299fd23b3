//! `kairship demo`: the main job on an embedded default. A simulated fleet (host API and
//! N Karmada instances with member clusters, a sample workload with its policies in each)
//! and Kairship with all roles against it, serving until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use kairship_sim::{Fleet, FleetConfig};
use kairship_wire::kubeconfig;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use crate::actors::context::Settings;
use crate::{bootstrap, server, Error};

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
    /// run as processes (built by scripts/real-fleet/build.sh).
    #[arg(long, value_enum, default_value_t = FleetKind::Sim)]
    pub fleet: FleetKind,
    /// Elect the controller-manager leader through a Lease on the host, as `kairship run`
    /// does (kube-system/kairship-controller-manager); false: always the leader.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Seconds a cache's watch may keep failing, while its instance answers, before the
    /// instance is Degraded (a Karmada CRD missing, a kind Kairship may not list).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub instance_degraded_after_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetKind {
    Sim,
    Real,
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

/// Instances seeded and attached at once in step 2.
const ATTACH_CONCURRENCY: usize = 16;

fn step(n: usize, total: usize, what: &str) {
    println!("[{n}/{total}] {what}");
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn random_token() -> Result<String, Error> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Usage("no system randomness for the demo's tokens".into()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Owner-only, since it holds credentials.
fn write_secret(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents)
}

fn sample_objects() -> Vec<(ApiResource, Value)> {
    let ar = |group: &str, version: &str, kind: &str, plural: &str| ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    vec![
        (
            ar("apps", "v1", "Deployment", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}}, "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}),
        ),
        (
            ar(
                "policy.karmada.io",
                "v1alpha1",
                "PropagationPolicy",
                "propagationpolicies",
            ),
            // Karmada's own nginx sample: replicas divided 1:1 between member1 and member2.
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "nginx-propagation", "namespace": "default"},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                    "replicaScheduling": {"replicaDivisionPreference": "Weighted", "replicaSchedulingType": "Divided",
                        "weightPreference": {"staticWeightList": [
                            {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                            {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}}}),
        ),
        (
            ar(
                "policy.karmada.io",
                "v1alpha1",
                "OverridePolicy",
                "overridepolicies",
            ),
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": "nginx-op", "namespace": "default"},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                "overrideRules": [
                    {"targetCluster": {"clusterNames": ["member2"]}, "overriders": {"labelsOverrider": [
                        {"operator": "add", "value": {"env": "skoala-dev"}},
                        {"operator": "add", "value": {"env-stat": "skoala-stage"}},
                        {"operator": "remove", "value": {"for": "for"}},
                        {"operator": "replace", "value": {"bar": "test"}}]}},
                    {"targetCluster": {"clusterNames": ["member1"]}, "overriders": {"annotationsOverrider": [
                        {"operator": "add", "value": {"env": "skoala-stage"}},
                        {"operator": "remove", "value": {"bom": "bom"}},
                        {"operator": "replace", "value": {"emma": "sophia"}}]}}]}}),
        ),
    ]
}

async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    super::run::host_client(Some(&path.to_path_buf())).await
}

async fn seed(instance_kubeconfig: &Path) -> Result<(), Error> {
    let client = client_from(instance_kubeconfig).await?;
    // What an operator installing Kairship does on each instance: identities passed
    // through the proxy meet these role bindings.
    bootstrap::apply_instance_rbac(&client)
        .await
        .map_err(|e| Error::Usage(format!("{}: {e}", instance_kubeconfig.display())))?;
    for (ar, obj) in sample_objects() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let o: DynamicObject =
            serde_json::from_value(obj).map_err(|e| Error::Usage(e.to_string()))?;
        match api.create(&PostParams::default(), &o).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(Error::Usage(format!(
                    "seeding {} in {}: {e}",
                    ar.kind,
                    instance_kubeconfig.display()
                )))
            }
        }
    }
    Ok(())
}

/// Writes the token file and webhook secret, binds `admin` to every instance and
/// `viewer` to the first, and loads the auth configuration as `kairship run` would.
async fn demo_auth(
    dir: &Path,
    host: &kube::Client,
    admin: &str,
    viewer: &str,
    viewer_instance: Option<&String>,
) -> Result<std::sync::Arc<crate::auth::Auth>, Error> {
    use crate::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
    let tokens = dir.join("tokens.csv");
    let text =
        format!("{admin},admin,demo-admin,\"kairship:admins\"\n{viewer},viewer,demo-viewer\n");
    write_secret(&tokens, text.as_bytes()).map_err(io(format!("writing {}", tokens.display())))?;
    let secret = dir.join("webhook.secret");
    write_secret(&secret, random_token()?.as_bytes())
        .map_err(io(format!("writing {}", secret.display())))?;
    let bindings: Api<InstanceRoleBinding> = Api::all(host.clone());
    let grants = [
        ("demo-admin", Role::Admin, "*".to_string(), "admin"),
        (
            "demo-viewer",
            Role::View,
            viewer_instance.cloned().unwrap_or_default(),
            "viewer",
        ),
    ];
    for (name, role, instance, user) in grants {
        let b = InstanceRoleBinding::new(
            name,
            InstanceRoleBindingSpec {
                role,
                instances: vec![instance],
                subjects: vec![Subject {
                    kind: SubjectKind::User,
                    name: user.into(),
                }],
            },
        );
        match bindings.create(&PostParams::default(), &b).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::Usage(format!("creating binding {name}: {e}"))),
        }
    }
    let config = crate::auth::AuthConfig {
        token_file: Some(tokens),
        webhook_secret_file: Some(secret),
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
    let limit = crate::limits::raise_open_files();
    if args.fleet == FleetKind::Sim {
        crate::limits::check(args.instances, FILES_PER_SIM_INSTANCE, limit)
            .map_err(Error::Usage)?;
    }
    let total = 5;
    let dir = &args.state_dir;
    std::fs::create_dir_all(dir.join("kubeconfigs"))
        .map_err(io(format!("creating {}", dir.display())))?;
    let _ = std::fs::remove_file(dir.join("endpoints.json"));

    if args.fleet == FleetKind::Real {
        return run_real(&args, total).await;
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
    use std::sync::Arc;
    step(1, total, &format!("starting a real fleet: host kube-apiserver + {} Karmada instance(s) x {} member cluster(s) (binaries from scripts/real-fleet/build.sh)", args.instances, args.clusters));
    let real_dir = std::path::absolute(args.state_dir.join("real"))
        .map_err(io("resolving the state directory".into()))?;
    let _ = std::fs::remove_dir_all(&real_dir);
    let config = kairship_realfleet::FleetConfig::new(real_dir, args.instances, args.clusters);
    let starting = kairship_realfleet::RealFleet::start(config, &|what: &str| {
        println!("      {what}");
    });
    // Interrupted while starting: dropping the half-started fleet stops its processes.
    let fleet = tokio::select! {
        f = starting => f.map_err(|e| Error::Usage(format!("real fleet: {e}")))?,
        _ = super::shutdown_signal() => return Err(Error::Usage("interrupted while starting the real fleet".into())),
    };
    let fleet = Arc::new(fleet);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(io("binding the fault API".into()))?;
    let admin = listener
        .local_addr()
        .map_err(io("binding the fault API".into()))?;
    let faults = tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            kairship_realfleet::faults::router(Arc::clone(&fleet)),
        )
        .await;
        drop(fleet);
    });
    let view = FleetView {
        host_kubeconfig: std::path::absolute(args.state_dir.join("real/host/admin.kubeconfig"))
            .map_err(io("resolving the state directory".into()))?,
        instances: (1..=args.instances)
            .map(|i| {
                let name = format!("karmada-{i}");
                let path = args.state_dir.join(format!("real/{name}/admin.kubeconfig"));
                (name, path)
            })
            .collect(),
        admin_url: Some(format!("http://{admin}")),
        fault_hint: format!(
            "curl -X POST http://{admin}/faults/{{instance}} -d '{{\"mode\":\"down\"}}' -H 'content-type: application/json'   (SIGKILLs its kube-apiserver; DELETE restarts it)"
        ),
    };
    let result = serve(args, &view, total).await;
    faults.abort();
    result
}

/// Kairship up on a fleet, with what the demo prints.
pub(crate) struct Up {
    pub running: server::Running,
    pub names: Vec<String>,
    pub admin: String,
    pub viewer: String,
    pub https: String,
    pub host_kubeconfig: PathBuf,
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
    // Each instance is a handful of round trips; done one after another they took
    // minutes for 1,000 instances, so a bounded number run at once.
    use futures::{StreamExt, TryStreamExt};
    let attach_one = |(name, path): &(String, std::path::PathBuf)| {
        let host = host.clone();
        let (name, path) = (name.clone(), path.clone());
        async move {
            seed(&path).await?;
            let config = std::fs::read(&path).map_err(io(format!("reading {}", path.display())))?;
            bootstrap::attach_external(&host, NAMESPACE, &name, config)
                .await
                .map_err(|e| Error::Usage(format!("attaching instance {name}: {e}")))
        }
    };
    let count = fleet.instances.len();
    let mut attached = 0usize;
    let mut attaching = futures::stream::iter(fleet.instances.iter().map(attach_one))
        .buffer_unordered(ATTACH_CONCURRENCY);
    while let Some(()) = attaching.try_next().await? {
        attached += 1;
        if count >= 100 && (attached.is_multiple_of(100) || attached == count) {
            println!("      attached {attached}/{count}");
        }
    }

    step(
        3,
        total,
        "starting Kairship (controller-manager, gRPC API, HTTPS API and proxy)",
    );
    let names: Vec<String> = fleet.instances.iter().map(|(n, _)| n.clone()).collect();
    let (admin, viewer) = (random_token()?, random_token()?);
    let auth = demo_auth(dir, &host, &admin, &viewer, names.first()).await?;
    let cert = kairship_wire::tls::generate("kairship").map_err(|e| Error::Usage(e.to_string()))?;
    let ca_path = dir.join("ca.crt");
    std::fs::write(&ca_path, &cert.ca_pem).map_err(io(format!("writing {}", ca_path.display())))?;
    let running = server::start(server::ServerConfig {
        host: host.clone(),
        identity: "kairship-demo".into(),
        election: match args.leader_elect {
            true => crate::actors::tree::Election::Lease(crate::actors::leader::LeaderConfig::new(
                "kube-system",
                "kairship-controller-manager",
                "kairship-demo",
            )),
            false => crate::actors::tree::Election::Always,
        },
        settings: Settings {
            degraded_after: Duration::from_secs(args.instance_degraded_after_secs),
            ..Settings::default()
        },
        grpc_addr: args.grpc_addr,
        http_addr: args.http_addr,
        probes_addr: Some(args.probes_addr),
        tls: cert.server_config.clone(),
        auth,
        chaos_reports: Some(dir.join("chaos")),
    })
    .await
    .map_err(|e| Error::Usage(e.to_string()))?;

    step(4, total, "waiting for every instance to be Running");
    let started = Instant::now();
    let mut last = usize::MAX;
    loop {
        // A loaded host may fail one call; the wait is bounded below, not by one error.
        let (ready, total) = match bootstrap::running_instances(&host).await {
            Ok(counts) => counts,
            Err(e) if started.elapsed() <= Duration::from_secs(120) => {
                println!("      listing instances failed ({e}); retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => return Err(kube_err("listing instances")(e)),
        };
        if ready != last {
            println!("      instances running: {ready}/{total}");
            last = ready;
        }
        if ready == total {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            println!("      still waiting after 2 minutes; serving anyway (check `kubectl get instances`)");
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    step(5, total, "writing endpoints.json and kubeconfigs");
    let https = format!("https://{}", running.http_addr);
    let mut entries = Vec::new();
    for name in &names {
        let server = format!("{https}/apis/kairship.io/v1alpha1/instances/{name}/proxy");
        let path = dir.join(format!("kubeconfigs/{name}.kubeconfig"));
        kubeconfig::write(
            &path,
            &kubeconfig::build(name, &server, &cert.ca_pem, &admin),
        )
        .map_err(io(format!("writing {}", path.display())))?;
        entries.push(json!({"name": name, "kubeconfig": path.display().to_string()}));
    }
    let endpoints = json!({
        "grpc": running.grpc_addr.to_string(),
        "http": https,
        "ca": ca_path.display().to_string(),
        "sim_admin": fleet.admin_url,
        "metrics": running.probes_addr.map(|a| format!("http://{a}/metrics")),
        "host_kubeconfig": host_kubeconfig.display().to_string(),
        "instances": entries,
        "tokens": {"admin": admin, "viewer": viewer, "viewer_instance": names.first()},
        "webhook_secret_file": dir.join("webhook.secret").display().to_string(),
    });
    let text = serde_json::to_vec_pretty(&endpoints).map_err(|e| Error::Usage(e.to_string()))?;
    kubeconfig::write_atomic(&dir.join("endpoints.json"), &text)
        .map_err(io("writing endpoints.json".into()))?;

    Ok(Up {
        running,
        names,
        admin,
        viewer,
        https,
        host_kubeconfig,
    })
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
        "  console:     {https}/ui/#token={admin}   (signs in as admin; the CA is self-signed)"
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
    println!("Press Ctrl-C to stop.");
    super::shutdown_signal().await;
    println!("stopping...");
    let _ = std::fs::remove_file(dir.join("endpoints.json"));
    running.shutdown().await;
    println!("stopped");
    Ok(())
}
