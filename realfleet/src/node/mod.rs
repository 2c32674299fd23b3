//! A kubelet-backed node for the host cluster, so Kairship runs as pods as its users run
//! it: Debian's containerd and runc, kubelet and kube-proxy built at the pinned Kubernetes
//! version, the CNI bridge, CoreDNS, and the host's kube-scheduler and
//! kube-controller-manager (Deployments, ReplicaSets, EndpointSlices, service-account
//! tokens, garbage collection). No registry is reachable: images are imported into
//! containerd from OCI archives.
//!
//! Layout: [`net`] the node's network namespace and its link to the machine;
//! [`containerd`] the runtime and image imports; [`kubelet`] kubelet and kube-proxy;
//! [`addons`] CoreDNS; [`janitor`] removes everything, from `Drop` and before a start.
//! One node per machine (a lock in `/run`); it needs root.

pub mod addons;
pub mod containerd;
pub mod janitor;
pub mod kubelet;
pub mod net;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::api::Api;

use crate::apiserver::ApiServer;
use crate::process::{free_port, Proc};
use crate::Error;

pub use containerd::Containerd;

pub const NODE_NAME: &str = "kairship-node";
const LOCK: &str = "/run/kairship-node.lock";
/// The directory of the node that holds the lock, for the janitor of the next start.
const OWNER: &str = "/run/kairship-node.dir";
const READY: Duration = Duration::from_secs(180);

/// `name` from a Debian package (`package`), or an error that says how to install it.
pub fn system_binary(name: &str, package: &str) -> Result<PathBuf, Error> {
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        let p = Path::new(d).join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::Invalid(format!(
        "{name} is not installed: apt-get install {package} (scripts/install-test-deps.sh installs what the cluster tier needs)"
    )))
}

/// Held from before the node's network exists until everything it made is gone: its
/// `Drop` runs the janitor, also when a start is interrupted half-way.
pub struct Guard {
    dir: PathBuf,
    _lock: std::fs::File,
}

impl Guard {
    /// Takes the machine's one node slot for `dir`, first cleaning up after a run that
    /// was killed before it could.
    pub fn acquire(dir: &Path) -> Result<Self, Error> {
        if !is_root() {
            return Err(Error::Invalid(
                "the cluster node needs root (network namespaces, mounts, cgroups)".into(),
            ));
        }
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)
            .map_err(Error::io(format!("opening {LOCK}")))?;
        if lock.try_lock().is_err() {
            let owner = std::fs::read_to_string(OWNER).unwrap_or_default();
            return Err(Error::Invalid(format!(
                "another kairship node is running on this machine (directory {}); stop it first",
                owner.trim()
            )));
        }
        if let Ok(previous) = std::fs::read_to_string(OWNER) {
            let previous = PathBuf::from(previous.trim());
            tracing::info!(dir = %previous.display(), "cleaning up after an earlier node");
            janitor::clean(&previous);
        }
        // Leftovers whose directory is unknown (a namespace, cgroups): remove them too.
        janitor::clean(dir);
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        std::fs::write(OWNER, dir.display().to_string())
            .map_err(Error::io(format!("writing {OWNER}")))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        janitor::clean(&self.dir);
        let _ = std::fs::remove_file(OWNER);
    }
}

fn is_root() -> bool {
    // /proc/self/status: "Uid:\treal\teffective\t..."
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

pub struct NodeConfig {
    /// kubelet, kube-proxy, kube-scheduler, kube-controller-manager.
    pub bin: PathBuf,
    /// OCI archives to import: the pause and CoreDNS images of
    /// `scripts/real-fleet/build.sh`, and whatever the pods will run.
    pub images: Vec<PathBuf>,
}

/// The running node. Field order is drop order: the processes first, then the janitor
/// (through the guard) sweeps what they left.
pub struct Node {
    procs: Vec<Proc>,
    pub containerd: Containerd,
    pub dir: PathBuf,
    /// The host's API server as pods and the node reach it.
    pub host_url: String,
    _guard: Guard,
}

/// The images every node needs, from `scripts/real-fleet/build.sh`, and the busybox
/// workload image (exec, logs, port-forward) where it was built.
pub fn base_images(bin: &Path) -> Vec<PathBuf> {
    let images = bin.parent().map(|p| p.join("images")).unwrap_or_default();
    let mut out = vec![images.join("pause.tar"), images.join("coredns.tar")];
    if images.join("busybox.tar").is_file() {
        out.push(images.join("busybox.tar"));
    }
    out
}

/// The busybox workload image's name on the node.
pub const BUSYBOX_IMAGE: &str = "kairship.local/busybox:1.35";

impl Node {
    /// Starts the node against `host`, whose network `net::setup` made under `guard`.
    pub async fn start(
        guard: Guard,
        config: NodeConfig,
        host: &ApiServer,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<Self, Error> {
        for b in [
            "kubelet",
            "kube-proxy",
            "kube-scheduler",
            "kube-controller-manager",
        ] {
            if !config.bin.join(b).is_file() {
                return Err(Error::MissingBinary(
                    config.bin.join(b).display().to_string(),
                ));
            }
        }
        let dir = guard.dir.clone();
        let port = host
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or_else(|| Error::Invalid(format!("no port in {}", host.url)))?;
        let host_url = format!("https://{}:{port}", net::HOST_IP);
        let kubeconfig = dir.join("node.kubeconfig");
        kairship_wire::kubeconfig::write(
            &kubeconfig,
            &kairship_wire::kubeconfig::build("host", &host_url, &host.ca_pem, &host.token),
        )
        .map_err(Error::io(format!("writing {}", kubeconfig.display())))?;

        progress("the host's kube-controller-manager and kube-scheduler");
        let mut procs = host_controllers(&config.bin, host)?;

        progress("containerd and runc in the node's network namespace; importing images");
        let containerd = Containerd::start(&dir).await?;
        for image in &config.images {
            containerd.import(image).await?;
        }
        let names = containerd.ctr(&["images", "ls", "-q"]).await?;
        for want in [
            containerd::PAUSE_IMAGE.to_string(),
            format!("kairship.local/coredns:{}", addons::COREDNS_VERSION),
        ] {
            if !names.lines().any(|l| l.trim() == want) {
                return Err(Error::Invalid(format!(
                    "no image {want} after importing {:?}: run scripts/real-fleet/build.sh",
                    config.images
                )));
            }
        }

        progress(&format!(
            "kubelet and kube-proxy (node {NODE_NAME}, {})",
            net::NODE_IP
        ));
        procs.push(kubelet::kubelet(
            &config.bin,
            &dir,
            &kubeconfig,
            &containerd.socket,
        )?);
        procs.push(kubelet::kube_proxy(&config.bin, &dir, &kubeconfig)?);
        let mut node = Self {
            procs,
            containerd,
            dir,
            host_url,
            _guard: guard,
        };
        let client = host.client().await?;
        node.wait_node_ready(&client).await?;
        progress("CoreDNS (kube-dns) as the cluster's DNS");
        addons::coredns(&client).await?;
        node.wait_available(&client, "kube-system", "coredns", READY)
            .await?;
        Ok(node)
    }

    /// Fails when a node process has exited.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        self.containerd.proc.check_alive()?;
        self.procs.iter_mut().try_for_each(Proc::check_alive)
    }

    async fn wait_node_ready(&mut self, client: &kube::Client) -> Result<(), Error> {
        let api: Api<NodeObject> = Api::all(client.clone());
        let deadline = Instant::now() + READY;
        loop {
            self.check_alive()?;
            if let Ok(Some(n)) = api.get_opt(NODE_NAME).await {
                let ready = n
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if ready {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: format!("node {NODE_NAME}"),
                    secs: READY.as_secs(),
                    log: self.dir.join("kubelet.log").display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until a Deployment has all its replicas available.
    pub async fn wait_available(
        &mut self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
        within: Duration,
    ) -> Result<(), Error> {
        let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        let deadline = Instant::now() + within;
        loop {
            self.check_alive()?;
            if let Ok(Some(d)) = api.get_opt(name).await {
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let have = d
                    .status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0);
                if have >= want {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: format!("deployment {namespace}/{name}"),
                    secs: within.as_secs(),
                    log: self.dir.join("kubelet.log").display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The host's kube-controller-manager (every default controller: Deployments,
/// ReplicaSets, EndpointSlices, service-account tokens and the root CA, garbage
/// collection) and kube-scheduler, in the machine's namespace next to the API server.
fn host_controllers(bin: &Path, host: &ApiServer) -> Result<Vec<Proc>, Error> {
    let kc = host.kubeconfig.display().to_string();
    let kcm = Proc::spawn(
        "kube-controller-manager host",
        &bin.join("kube-controller-manager"),
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--controllers=*".into(),
            format!(
                "--service-account-private-key-file={}",
                host.dir.join("sa.key").display()
            ),
            format!("--root-ca-file={}", host.dir.join("ca.crt").display()),
            "--use-service-account-credentials=true".into(),
            format!("--cluster-cidr={}", net::POD_CIDR),
            format!("--service-cluster-ip-range={}", net::SERVICE_CIDR),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--v=1".into(),
        ],
        host.dir.join("kube-controller-manager.log"),
    )?;
    let scheduler = Proc::spawn(
        "kube-scheduler host",
        &bin.join("kube-scheduler"),
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--v=1".into(),
        ],
        host.dir.join("kube-scheduler.log"),
    )?;
    Ok(vec![kcm, scheduler])
}
