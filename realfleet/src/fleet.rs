//! Starting and stopping a whole real fleet.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use crate::apiserver::{ApiServer, Options};
use crate::node::{self, Node};
use crate::process::{free_port, Proc};
use crate::{karmada, members, pki, Error};

/// One etcd on loopback, its data under `dir`: (process, client URL).
pub fn start_etcd(bin: &std::path::Path, dir: &std::path::Path) -> Result<(Proc, String), Error> {
    let etcd_port = free_port()?;
    let peer_port = free_port()?;
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd = Proc::spawn(
        "etcd",
        &bin.join("etcd"),
        vec![
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            "--quota-backend-bytes=1073741824".into(),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ],
        dir.join("etcd.log"),
    )?;
    Ok((etcd, etcd_url))
}

pub struct FleetConfig {
    /// The binaries of `scripts/real-fleet/build.sh`.
    pub bin: PathBuf,
    /// Karmada's CRDs (the same script copies them beside `bin`).
    pub crds: PathBuf,
    /// Working directory: certificates, kubeconfigs, etcd data, logs.
    pub dir: PathBuf,
    pub instances: usize,
    pub clusters: usize,
    pub nodes_per_cluster: usize,
    /// A kubelet-backed node on the host (`node`), running these images besides its own
    /// pause and CoreDNS; `None`: no node (the host only stores objects).
    pub node_images: Option<Vec<PathBuf>>,
}

impl FleetConfig {
    pub fn new(dir: PathBuf, instances: usize, clusters: usize) -> Self {
        let bin = crate::default_bin_dir();
        let crds = bin
            .parent()
            .map(|p| p.join("karmada-crds"))
            .unwrap_or_default();
        Self {
            bin,
            crds,
            dir,
            instances,
            clusters,
            nodes_per_cluster: 2,
            node_images: None,
        }
    }
}

pub struct Instance {
    pub name: String,
    pub api: Mutex<ApiServer>,
    pub kubeconfig: PathBuf,
    pub members: Vec<Mutex<ApiServer>>,
    _components: Vec<Proc>,
}

pub struct RealFleet {
    /// First, so it goes first: its janitor runs while the API servers still stand.
    pub node: Option<Node>,
    pub dir: PathBuf,
    pub host: ApiServer,
    pub instances: Vec<Instance>,
    _etcd: Proc,
    tasks: Vec<JoinHandle<()>>,
}

const READY: Duration = Duration::from_secs(180);

impl RealFleet {
    /// Starts everything; `progress` hears each step.
    pub async fn start(
        config: FleetConfig,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<Self, Error> {
        for b in [
            "etcd",
            "kube-apiserver",
            "karmada-aggregated-apiserver",
            "karmada-controller-manager",
            "karmada-scheduler",
        ] {
            if !config.bin.join(b).is_file() {
                return Err(Error::MissingBinary(
                    config.bin.join(b).display().to_string(),
                ));
            }
        }
        std::fs::create_dir_all(&config.dir)
            .map_err(Error::io(format!("creating {}", config.dir.display())))?;
        // The node's network first: the API servers name its address in their
        // certificates, and the guard cleans everything up if anything below fails.
        let node_guard = match &config.node_images {
            Some(_) => {
                for b in ["kubelet", "kube-proxy", "kube-scheduler"] {
                    if !config.bin.join(b).is_file() {
                        return Err(Error::MissingBinary(
                            config.bin.join(b).display().to_string(),
                        ));
                    }
                }
                let guard = node::Guard::acquire(&config.dir.join("node"))?;
                node::net::setup()?;
                progress(&format!(
                    "node network: namespace {}, the machine at {} and the node at {}",
                    node::net::NETNS,
                    node::net::HOST_IP,
                    node::net::NODE_IP
                ));
                Some(guard)
            }
            None => None,
        };
        let for_pods = node_guard.is_some();
        let (etcd, etcd_url) = start_etcd(&config.bin, &config.dir)?;
        progress(&format!(
            "etcd on {etcd_url} (one etcd, a key prefix per API server)"
        ));
        let bin = &config.bin;
        let mut host = ApiServer::start(
            bin,
            &config.dir,
            "host",
            &etcd_url,
            Options {
                cluster_host: for_pods,
                ..Options::default()
            },
        )?;
        let mut instances = Vec::new();
        for i in 1..=config.instances {
            let name = format!("karmada-{i}");
            let fp = pki::front_proxy(&config.dir)?;
            let api = ApiServer::start(
                bin,
                &config.dir,
                &name,
                &etcd_url,
                Options {
                    front_proxy: Some(fp),
                    for_pods,
                    ..Options::default()
                },
            )?;
            let mut ms = Vec::new();
            for m in 1..=config.clusters {
                ms.push(ApiServer::start(
                    bin,
                    &config.dir,
                    &format!("{name}-member{m}"),
                    &etcd_url,
                    // Control planes running as pods (managed instances) join them too.
                    Options {
                        for_pods,
                        ..Options::default()
                    },
                )?);
            }
            instances.push((name, api, ms));
        }
        progress(&format!(
            "{} kube-apiservers starting (host, {} karmada-apiserver(s), {} member(s))",
            1 + config.instances * (1 + config.clusters),
            config.instances,
            config.instances * config.clusters
        ));
        host.wait_ready(READY).await?;
        let node = match (node_guard, config.node_images) {
            (Some(guard), Some(images)) => {
                let mut all = node::base_images(bin);
                all.extend(images);
                let node_config = node::NodeConfig {
                    bin: bin.clone(),
                    images: all,
                };
                Some(Node::start(guard, node_config, &host, progress).await?)
            }
            _ => None,
        };
        let mut tasks = Vec::new();
        let mut out = Vec::new();
        for (name, mut api, mut ms) in instances {
            let client = api.wait_ready(READY).await?;
            progress(&format!(
                "{name}: Karmada's CRDs, aggregated API server, controller-manager, scheduler"
            ));
            karmada::install_crds(&client, &config.crds).await?;
            let mut components =
                vec![karmada::aggregated_apiserver(bin, &api, &client, &etcd_url).await?];
            karmada::wait_served(
                &client,
                "/apis/cluster.karmada.io/v1alpha1",
                READY,
                &format!("{name}'s Cluster API (karmada-aggregated-apiserver)"),
                &components[0].log,
            )
            .await?;
            components.push(karmada::webhook(bin, &api, &client).await?);
            let advertised = match for_pods {
                true => format!(
                    "https://{}:{}",
                    node::net::HOST_IP,
                    api.url.rsplit(':').next().unwrap_or_default()
                ),
                false => api.url.clone(),
            };
            crate::pull_mode::bootstrap(&client, &advertised, &api.ca_pem).await?;
            components.extend(karmada::controllers(bin, &api)?);
            for m in ms.iter_mut() {
                let mc = m.wait_ready(READY).await?;
                components.push(karmada::kube_controller_manager(bin, m)?);
                members::create_nodes(&mc, config.nodes_per_cluster).await?;
                tasks.push(tokio::spawn(members::fill_deployment_status(
                    mc,
                    Duration::from_secs(2),
                )));
            }
            for m in &ms {
                // The Cluster is named as the member (`member1`), without the instance prefix.
                let short = m.name.rsplit('-').next().unwrap_or(&m.name);
                let member = karmada::Member {
                    name: short,
                    url: &m.url,
                    token: &m.token,
                    ca_pem: &m.ca_pem,
                };
                karmada::join(&client, &member).await?;
            }
            let clusters: Vec<&str> = ms
                .iter()
                .map(|m| m.name.rsplit('-').next().unwrap_or(&m.name))
                .collect();
            let log = components
                .iter()
                .find(|p| p.name.starts_with("karmada-controller-manager"))
                .map(|p| p.log.clone())
                .unwrap_or_default();
            karmada::wait_clusters_ready(&client, &clusters, READY, &log).await?;
            progress(&format!(
                "{name}: joined {} member cluster(s) in Push mode, all Ready",
                ms.len()
            ));
            out.push(Instance {
                kubeconfig: api.kubeconfig.clone(),
                name,
                api: Mutex::new(api),
                members: ms.into_iter().map(Mutex::new).collect(),
                _components: components,
            });
        }
        Ok(Self {
            node,
            dir: config.dir,
            host,
            instances: out,
            _etcd: etcd,
            tasks,
        })
    }

    /// A kubeconfig for an instance's karmada-apiserver as the node's pods reach it (the
    /// machine's end of the node link), with its admin credentials.
    pub async fn pod_kubeconfig(&self, name: &str) -> Option<String> {
        let inst = self.instance(name)?;
        let api = inst.api.lock().await;
        let port = api.url.rsplit(':').next()?;
        let url = format!("https://{}:{port}", node::net::HOST_IP);
        Some(kairship_wire::kubeconfig::build(name, &url, &api.ca_pem, &api.token).to_string())
    }

    pub fn instance(&self, name: &str) -> Option<&Instance> {
        self.instances.iter().find(|i| i.name == name)
    }

    /// `down` kills the instance's karmada-apiserver, `latency` stops it; `None` undoes.
    pub async fn fault(&self, instance: &str, mode: Option<&str>) -> Result<(), Error> {
        let inst = self
            .instance(instance)
            .ok_or_else(|| Error::Invalid(format!("no instance {instance:?} in this fleet")))?;
        let mut api = inst.api.lock().await;
        match mode {
            Some("down") => {
                api.proc.kill().await;
                Ok(())
            }
            Some("latency") => api.proc.signal("STOP"),
            Some(other) => Err(Error::Invalid(format!(
                "mode {other:?} is not available on a real fleet (down and latency are)"
            ))),
            None => {
                let _ = api.proc.signal("CONT");
                api.proc.restart()?;
                api.wait_ready(READY).await.map(|_| ())
            }
        }
    }
}

impl RealFleet {
    /// `ready: false` kills the kube-apiserver of the instance's member `cluster` (Karmada
    /// finds it NotReady), `true` starts it again and waits until it answers.
    pub async fn member_fault(
        &self,
        instance: &str,
        cluster: &str,
        ready: bool,
    ) -> Result<(), Error> {
        let inst = self
            .instance(instance)
            .ok_or_else(|| Error::Invalid(format!("no instance {instance:?} in this fleet")))?;
        let wanted = format!("{instance}-{cluster}");
        let mut member = None;
        for m in &inst.members {
            if m.lock().await.name == wanted {
                member = Some(m);
            }
        }
        let member = member.ok_or_else(|| {
            Error::Invalid(format!("no member cluster {cluster:?} in {instance}"))
        })?;
        let mut api = member.lock().await;
        match ready {
            false => {
                api.proc.kill().await;
                Ok(())
            }
            true => {
                api.proc.restart()?;
                api.wait_ready(READY).await.map(|_| ())
            }
        }
    }
}

impl Drop for RealFleet {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
