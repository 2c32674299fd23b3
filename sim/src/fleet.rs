//! A simulated fleet: the host API and one Karmada API per instance with its member
//! clusters. [`crate::launch`] starts it with the karmada-operator double and the fault
//! admin API, which both drive a [`Fleet`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tracing::info;

use crate::clusters::ClusterSim;
use crate::faults::{Fault, FaultMode};
use crate::resources::Flavor;
use crate::server::shared::SharedListener;
use crate::server::{ApiServer, ServerConfig};
use crate::Error;
use kairship_wire::kubeconfig;

#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Static instances started with the fleet, named `karmada-1`..
    pub instances: usize,
    /// Member clusters per instance.
    pub clusters: usize,
    pub server: ServerConfig,
    /// How often member cluster status moves.
    pub cluster_tick: Duration,
    /// How long the karmada-operator double takes to "install" a control plane.
    pub provision_delay: Duration,
    /// Where endpoints.json and kubeconfigs go; nothing is written when `None`.
    pub state_dir: Option<PathBuf>,
    /// Port for the admin API (0: any free port).
    pub admin_port: u16,
    /// Every instance behind one listener, reached by its name ([`SharedListener`]),
    /// instead of a port each.
    pub shared_listener: bool,
    /// Timings of each instance's simulated Karmada controllers.
    pub karmada: crate::karmada::KarmadaConfig,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            instances: 3,
            clusters: 3,
            server: ServerConfig::default(),
            cluster_tick: Duration::from_secs(5),
            provision_delay: Duration::from_secs(2),
            state_dir: None,
            admin_port: 0,
            shared_listener: false,
            karmada: Default::default(),
        }
    }
}

/// One simulated Karmada control plane.
pub struct Instance {
    pub name: String,
    pub server: Arc<ApiServer>,
    pub clusters: Arc<ClusterSim>,
    /// The member clusters' own objects, written by the simulated Karmada controllers.
    pub members: Arc<crate::karmada::Members>,
    /// The `Karmada` object (namespace, name) that provisioned it, for operator-made ones.
    pub managed_by: Option<(String, String)>,
    tasks: Vec<JoinHandle<()>>,
}

impl Instance {
    fn stop(&self) {
        self.server.shutdown();
        for t in &self.tasks {
            t.abort();
        }
    }

    pub fn kubeconfig(&self) -> Value {
        let kc = kubeconfig::build(
            &self.name,
            &self.server.url(),
            &self.server.tls.ca_pem,
            &self.server.token,
        );
        match self.server.tls_server_name() {
            Some(n) => kubeconfig::with_tls_server_name(kc, n),
            None => kc,
        }
    }
}

pub(crate) struct FleetInner {
    pub(crate) config: FleetConfig,
    pub(crate) host: Arc<ApiServer>,
    instances: Mutex<BTreeMap<String, Arc<Instance>>>,
    admin_addr: Mutex<Option<SocketAddr>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The instances' one listener, bound with the first of them (when configured).
    shared: tokio::sync::OnceCell<Arc<SharedListener>>,
}

/// Handle to a running fleet; cheap to clone. Call [`Fleet::shutdown`] to stop it.
#[derive(Clone)]
pub struct Fleet {
    pub(crate) inner: Arc<FleetInner>,
}

pub(crate) fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl Fleet {
    /// A fleet with its host API and nothing else yet (see [`Fleet::start`]).
    pub(crate) fn with_host(config: FleetConfig, host: Arc<ApiServer>) -> Self {
        Self {
            inner: Arc::new(FleetInner {
                config,
                host,
                instances: Mutex::new(BTreeMap::new()),
                admin_addr: Mutex::new(None),
                tasks: Mutex::new(Vec::new()),
                shared: Default::default(),
            }),
        }
    }

    /// Records the admin API's address and the background tasks to stop on shutdown.
    pub(crate) fn attach(
        &self,
        admin_addr: SocketAddr,
        tasks: impl IntoIterator<Item = JoinHandle<()>>,
    ) {
        *self.inner.admin_addr.lock() = Some(admin_addr);
        self.inner.tasks.lock().extend(tasks);
    }

    pub fn config(&self) -> &FleetConfig {
        &self.inner.config
    }

    pub fn host(&self) -> &Arc<ApiServer> {
        &self.inner.host
    }

    pub fn admin_url(&self) -> String {
        self.inner
            .admin_addr
            .lock()
            .map(|a| format!("http://{a}"))
            .unwrap_or_default()
    }

    pub fn instance(&self, name: &str) -> Option<Arc<Instance>> {
        self.inner.instances.lock().get(name).cloned()
    }

    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.inner.instances.lock().values().cloned().collect()
    }

    /// Starts a new Karmada API with `clusters` member clusters, and rewrites the state files.
    pub async fn add_instance(
        &self,
        name: &str,
        clusters: usize,
        managed_by: Option<(String, String)>,
    ) -> Result<Arc<Instance>, Error> {
        let inst = self.start_instance(name, clusters, managed_by).await?;
        // Its own kubeconfig and endpoints.json: rewriting every instance's file on each
        // add made a burst of N instances write N^2 files.
        if let Some(p) = self.kubeconfig_path(name) {
            kubeconfig::write(&p, &inst.kubeconfig())
                .map_err(Error::io(format!("writing {}", p.display())))?;
        }
        self.write_endpoints()?;
        Ok(inst)
    }

    pub(crate) async fn start_instance(
        &self,
        name: &str,
        clusters: usize,
        managed_by: Option<(String, String)>,
    ) -> Result<Arc<Instance>, Error> {
        if self.instance(name).is_some() {
            return Err(Error::Invalid(format!("instance {name:?} already exists")));
        }
        let server = ApiServer::new(name, Flavor::Karmada, self.inner.config.server.clone())?;
        if self.inner.config.shared_listener {
            let shared = self
                .inner
                .shared
                .get_or_try_init(|| SharedListener::bind(loopback()))
                .await
                .map_err(Error::io("binding the instances' shared listener"))?;
            shared.add(&server);
        } else {
            server
                .start(loopback())
                .await
                .map_err(Error::io(format!("binding the API of instance {name}")))?;
        }
        let (sim, ticker) =
            ClusterSim::start(server.clone(), clusters, self.inner.config.cluster_tick)?;
        let members = Arc::new(crate::karmada::Members::default());
        server.serve_members(members.clone());
        let controller = Arc::new(crate::karmada::Controller::new(
            server.clone(),
            members.clone(),
            self.inner.config.karmada.clone(),
        ));
        let karmada = tokio::spawn(controller.run());
        let inst = Arc::new(Instance {
            name: name.to_string(),
            server,
            clusters: sim,
            members,
            managed_by,
            tasks: vec![ticker, karmada],
        });
        self.inner
            .instances
            .lock()
            .insert(name.to_string(), inst.clone());
        info!(instance = name, url = %inst.server.url(), "instance started");
        Ok(inst)
    }

    /// Stops an instance's API and forgets it.
    pub fn remove_instance(&self, name: &str) -> Option<Arc<Instance>> {
        let inst = self.inner.instances.lock().remove(name)?;
        if let Some(shared) = self.inner.shared.get() {
            shared.remove(name);
        }
        inst.stop();
        if let Err(e) = self.write_state() {
            tracing::warn!(error = %e, "rewriting endpoints after removing an instance");
        }
        info!(instance = name, "instance stopped");
        Some(inst)
    }

    /// The server a fault name addresses: an instance, or `host`.
    pub fn server(&self, name: &str) -> Option<Arc<ApiServer>> {
        if name == "host" {
            return Some(self.inner.host.clone());
        }
        self.instance(name).map(|i| i.server.clone())
    }

    /// Applies (or with `None` clears) a fault on one server.
    pub fn set_fault(&self, name: &str, fault: Option<Fault>) -> Result<(), Error> {
        let server = self
            .server(name)
            .ok_or_else(|| Error::Invalid(format!("no instance named {name:?}")))?;
        if let Some(f) = &fault {
            f.validate().map_err(Error::Invalid)?;
            if f.mode == FaultMode::Compact {
                server.store.compact();
            }
        }
        info!(server = name, fault = ?fault, "fault set");
        server.faults.set(fault);
        Ok(())
    }

    pub fn host_kubeconfig(&self) -> Value {
        let h = &self.inner.host;
        kubeconfig::build("host", &h.url(), &h.tls.ca_pem, &h.token)
    }

    fn kubeconfig_path(&self, name: &str) -> Option<PathBuf> {
        self.inner
            .config
            .state_dir
            .as_ref()
            .map(|d| d.join("kubeconfigs").join(format!("{name}.kubeconfig")))
    }

    /// The endpoints.json document (../shared/DESIGN.md); Kairship's own fields stay null here.
    pub fn endpoints(&self) -> Value {
        let path = |n: &str| self.kubeconfig_path(n).map(|p| p.display().to_string());
        let instances: Vec<Value> = self
            .instances()
            .iter()
            .map(|i| json!({"name": i.name, "kubeconfig": path(&i.name)}))
            .collect();
        json!({
            "grpc": null, "http": null, "ca": null, "tokens": null,
            "sim_admin": self.admin_url(),
            "host_kubeconfig": path("host"),
            "instances": instances,
        })
    }

    /// Writes kubeconfigs and endpoints.json into the state directory, if there is one.
    pub fn write_state(&self) -> Result<(), Error> {
        if self.inner.config.state_dir.is_none() {
            return Ok(());
        }
        let io = |p: &PathBuf| Error::io(format!("writing {}", p.display()));
        for inst in self.instances() {
            if let Some(p) = self.kubeconfig_path(&inst.name) {
                kubeconfig::write(&p, &inst.kubeconfig()).map_err(io(&p))?;
            }
        }
        if let Some(p) = self.kubeconfig_path("host") {
            kubeconfig::write(&p, &self.host_kubeconfig()).map_err(io(&p))?;
        }
        self.write_endpoints()
    }

    fn write_endpoints(&self) -> Result<(), Error> {
        let Some(dir) = &self.inner.config.state_dir else {
            return Ok(());
        };
        let io = |p: &PathBuf| Error::io(format!("writing {}", p.display()));
        // Before the admin API is up there is nothing complete to advertise yet.
        if self.inner.admin_addr.lock().is_some() {
            let p = dir.join("endpoints.json");
            let text = serde_json::to_vec_pretty(&self.endpoints())
                .map_err(|e| Error::Invalid(e.to_string()))?;
            kubeconfig::write_atomic(&p, &text).map_err(io(&p))?;
        }
        Ok(())
    }

    /// Stops every server and background task.
    pub fn shutdown(&self) {
        let instances = std::mem::take(&mut *self.inner.instances.lock());
        for i in instances.values() {
            i.stop();
        }
        self.inner.host.shutdown();
        if let Some(shared) = self.inner.shared.get() {
            shared.stop();
        }
        for t in self.inner.tasks.lock().drain(..) {
            t.abort();
        }
    }
}
