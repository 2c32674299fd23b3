//! Setup shared by the API benchmarks: a simulated fleet whose instances are attached to
//! the host as External `Instance`s, and helpers to seed and wait on it.

use std::time::Duration;

#[allow(dead_code)]
pub mod cache;
#[allow(dead_code, unused_imports)]
pub mod live_bytes;
#[allow(dead_code)]
pub mod procs;

use kairship::bootstrap;
use kairship_sim::{Fleet, FleetConfig};
use serde_json::{json, Value};

pub struct BenchFleet {
    pub dir: tempfile::TempDir,
    pub fleet: Fleet,
    pub host: kube::Client,
}

/// Installs Kairship's CRDs and namespace on the host of the fleet whose state is in
/// `dir`, and attaches its `n` instances as External Instances; `roles`: each instance
/// first learns Kairship's roles, as an operator's install gives them (needed where the
/// API acts as a caller on the instance).
pub async fn attach_all(host: &kube::Client, dir: &std::path::Path, n: usize, roles: bool) {
    bootstrap::install_crds(host).await.expect("crds");
    bootstrap::ensure_namespace(host, "kairship-system")
        .await
        .expect("namespace");
    for i in 1..=n {
        let name = format!("karmada-{i}");
        let path = dir.join(format!("kubeconfigs/{name}.kubeconfig"));
        if roles {
            bootstrap::apply_instance_rbac(&client(&path).await)
                .await
                .expect("instance RBAC applies");
        }
        let config = std::fs::read(&path).expect("instance kubeconfig");
        bootstrap::attach_external(host, "kairship-system", &name, config)
            .await
            .expect("attach");
    }
}

/// A client from a kubeconfig the fleet wrote.
pub async fn client(path: &std::path::Path) -> kube::Client {
    kairship::cli::run::host_client(Some(&path.to_path_buf()))
        .await
        .expect("client")
}

/// A Deployment in `default` with `labels` on the object.
pub fn deployment(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
}

/// A PropagationPolicy selecting every Deployment of `default`, placing them on a cluster
/// that does not exist: Karmada makes a ResourceBinding per Deployment and schedules none.
#[allow(dead_code)]
pub fn policy_for_all_deployments() -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "all-deployments", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {"clusterAffinity": {"clusterNames": ["nowhere"]}}}})
}

/// How many objects a LIST of `path` straight from an instance returns.
#[allow(dead_code)]
pub async fn count(c: &kube::Client, path: &str) -> usize {
    let req = http::Request::get(format!("{path}?limit=1"))
        .body(Vec::new())
        .expect("request");
    let Ok(v) = c.request::<Value>(req).await else {
        return 0;
    };
    v["items"].as_array().map_or(0, Vec::len)
        + v["metadata"]["remainingItemCount"].as_u64().unwrap_or(0) as usize
}

impl BenchFleet {
    /// `instances` instances of two quiet member clusters each, all attached.
    pub async fn start(instances: usize) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = Fleet::start(FleetConfig {
            instances,
            clusters: 2,
            state_dir: Some(dir.path().to_path_buf()),
            cluster_tick: Duration::from_secs(3600),
            // The simulated controllers pass over every object; only on changes here, so
            // a quiet instance costs nothing and the figures are Kairship's.
            karmada: kairship_sim::karmada::KarmadaConfig {
                resync: Duration::from_secs(3600),
                ..Default::default()
            },
            // The simulator shares the process: its watch history must not be dropped by
            // age while a bench counts the heap Kairship frees.
            server: kairship_sim::server::ServerConfig {
                store: kairship_sim::store::StoreConfig {
                    history_window: Duration::from_secs(24 * 3600),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        })
        .await
        .expect("fleet");
        let host = client(&dir.path().join("kubeconfigs/host.kubeconfig")).await;
        attach_all(&host, dir.path(), instances, false).await;
        Self { dir, fleet, host }
    }

    /// Writes objects straight into an instance's store (no API round trips).
    #[allow(dead_code)]
    pub fn seed_deployments(&self, instance: &str, objects: impl IntoIterator<Item = Value>) {
        self.seed(instance, ("apps", "v1", "deployments"), objects);
    }

    /// Writes objects of `(group, version, plural)` into `default` of an instance's store.
    pub fn seed(
        &self,
        instance: &str,
        (group, version, plural): (&str, &str, &str),
        objects: impl IntoIterator<Item = Value>,
    ) {
        let inst = self.fleet.instance(instance).expect("instance");
        let def = inst
            .server
            .store
            .lookup(group, version, plural)
            .expect("kind served");
        for o in objects {
            inst.server
                .store
                .create(&def, Some("default"), o)
                .expect("create");
        }
    }

    /// A client straight to an instance of the simulated fleet (not through Kairship).
    #[allow(dead_code)]
    pub async fn fleet_client(&self, instance: &str) -> kube::Client {
        client(
            &self
                .dir
                .path()
                .join(format!("kubeconfigs/{instance}.kubeconfig")),
        )
        .await
    }

    /// Until `n` instances report Running.
    pub async fn wait_running(&self, n: usize) {
        while kairship::bootstrap::running_instances(&self.host)
            .await
            .map(|c| c.0)
            .unwrap_or(0)
            < n
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Kairship serving a bench fleet in this process, authorization off.
#[allow(dead_code)]
pub struct BenchServer {
    pub running: kairship::server::Running,
    pub cert: kairship_wire::tls::ServingCert,
}

#[allow(dead_code)]
impl BenchServer {
    pub async fn start(bench: &BenchFleet) -> Self {
        let cert = kairship_wire::tls::generate("kairship").expect("cert");
        let running = kairship::server::start(kairship::server::ServerConfig {
            host: bench.host.clone(),
            identity: "bench".into(),
            election: kairship::actors::tree::Election::Always,
            settings: kairship::context::Settings::default(),
            grpc_addr: "127.0.0.1:0".parse().expect("addr"),
            http_addr: "127.0.0.1:0".parse().expect("addr"),
            probes_addr: None,
            tls: cert.server_config.clone(),
            grpc_tls: None,
            audit: std::sync::Arc::new(kairship::api::chain::audit::Sink::Log),
            limits: Default::default(),
            fairness: Default::default(),
            auth: kairship::auth::Auth::disabled(),
            chaos_reports: None,
            instance_hosts: None,
            kubeconfigs: Default::default(),
            shutdown_delay: Duration::ZERO,
            forward: None,
        })
        .await
        .expect("server");
        Self { running, cert }
    }

    /// A kubeconfig for an instance's proxy, written in the fleet's directory.
    pub fn proxy_kubeconfig(&self, bench: &BenchFleet, name: &str) -> std::path::PathBuf {
        let server = format!(
            "https://{}/apis/kairship.io/v1alpha1/instances/{name}/proxy",
            self.running.http_addr
        );
        let path = bench.dir.path().join(format!("proxy-{name}.kubeconfig"));
        kairship_wire::kubeconfig::write(
            &path,
            &kairship_wire::kubeconfig::build(name, &server, &self.cert.ca_pem, "bench"),
        )
        .expect("write");
        path
    }
}

/// This process's resident memory in KiB, from /proc.
#[allow(dead_code)]
pub fn rss_kib() -> u64 {
    procs::vm_rss_kib(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

/// This process's minor page faults so far (see [`procs::minor_faults`]).
#[allow(dead_code)]
pub fn minor_faults() -> u64 {
    procs::minor_faults(std::process::id())
}

/// This process's CPU time (user + system), from /proc (10 ms ticks).
#[allow(dead_code)]
pub fn cpu_time() -> Duration {
    Duration::from_millis(procs::usage_ticks(std::process::id()) * 10)
}

/// Waits (up to a minute) until the process is quiet: under 5% of a core over a second,
/// so background work of the simulated controllers does not land in a measurement.
#[allow(dead_code)]
pub async fn settle() {
    procs::settle_process(std::process::id()).await;
}
