//! Karmada's control plane for one simulated instance: the resource detector, scheduler,
//! binding and execution controllers, override manager, status aggregation and failover,
//! working on the instance's store as the real controllers work on karmada-apiserver, and
//! one object store per member cluster ([`members`]).
//!
//! It is level-triggered: every change in the instance's store or its members' stores runs
//! one reconcile pass over everything; passes only write what differs, so they settle. A
//! pass that leaves work waiting on the clock (a ready delay, a toleration running out)
//! asks for another at the next resync; an idle instance with nothing waiting runs none,
//! which is what lets one process simulate a thousand of them.

pub mod binding;
pub mod detector;
pub mod events;
pub mod execution;
pub mod failover;
pub mod graceful_eviction;
pub mod members;
pub mod nodes;
pub mod overrides;
pub mod pods;
pub mod scheduler;
pub use kairship_wire::label_selector as selector;
pub mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn, Instrument};

use crate::resources::ResourceDef;
use crate::server::ApiServer;
use crate::store::{Filter, Obj, Store};
use kairship_wire::status::{ApiError, ApiResult};

pub use members::Members;

/// Timings of the simulated control plane (short in tests).
#[derive(Debug, Clone)]
pub struct KarmadaConfig {
    /// How long a member workload takes to become ready after it is applied.
    pub ready_delay: Duration,
    /// The longest time between passes when nothing changes.
    pub resync: Duration,
}

impl Default for KarmadaConfig {
    fn default() -> Self {
        Self {
            ready_delay: Duration::from_secs(2),
            resync: Duration::from_millis(500),
        }
    }
}

/// Kinds the detector propagates (namespaced resource templates).
pub const TEMPLATE_KINDS: &[(&str, &str, &str)] = &[
    ("apps", "v1", "deployments"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1", "daemonsets"),
    ("batch", "v1", "jobs"),
    ("", "v1", "services"),
    ("", "v1", "configmaps"),
    ("", "v1", "secrets"),
    ("", "v1", "serviceaccounts"),
    ("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"),
];

/// Cluster-scoped kinds the detector propagates (ClusterPropagationPolicies only; their
/// bindings are ClusterResourceBindings).
pub const CLUSTER_TEMPLATE_KINDS: &[(&str, &str, &str)] = &[
    ("", "v1", "namespaces"),
    ("rbac.authorization.k8s.io", "v1", "clusterroles"),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
];

/// The binding kinds: namespaced templates get ResourceBindings, cluster-scoped ones
/// ClusterResourceBindings (same group and version).
pub const BINDING_PLURALS: [&str; 2] = ["resourcebindings", "clusterresourcebindings"];

/// Namespaces the detector leaves alone, as Karmada skips its own and kube's.
pub fn skipped_namespace(ns: &str) -> bool {
    ns.starts_with("karmada-") || ns.starts_with("kube-")
}

pub struct Controller {
    pub instance: String,
    pub server: Arc<ApiServer>,
    pub members: Arc<Members>,
    pub config: KarmadaConfig,
    pub(crate) ready: status::ReadyClock,
    /// Set by a pass that saw work waiting on the clock, so the next resync runs one.
    pub(crate) timed: AtomicBool,
}

impl Controller {
    pub fn new(server: Arc<ApiServer>, members: Arc<Members>, config: KarmadaConfig) -> Self {
        Self {
            instance: server.name.clone(),
            server,
            members,
            config,
            ready: Default::default(),
            timed: AtomicBool::new(false),
        }
    }

    pub fn store(&self) -> &Store {
        &self.server.store
    }

    pub fn def(&self, group: &str, version: &str, plural: &str) -> ApiResult<Arc<ResourceDef>> {
        self.store()
            .lookup(group, version, plural)
            .ok_or_else(|| ApiError::internal(format!("{plural}.{group} is not served")))
    }

    /// Every object of a kind, shared with the store (read them as `Value`s).
    pub fn list(&self, group: &str, version: &str, plural: &str) -> ApiResult<Vec<Obj>> {
        let def = self.def(group, version, plural)?;
        Ok(self
            .store()
            .list(&def, &Filter::default(), None, None)?
            .items)
    }

    /// Records that some of this pass's work waits on the clock, not on a change.
    pub(crate) fn wait_for_clock(&self) {
        self.timed.store(true, Ordering::Relaxed);
    }

    /// What a pass reads, as one number that grows with any write: the instance store's
    /// resourceVersion plus every member store's.
    fn inputs(&self) -> u64 {
        self.store()
            .current_rv()
            .wrapping_add(self.members.versions())
    }

    /// One reconcile pass over the whole instance.
    pub fn pass(&self) -> ApiResult<()> {
        failover::run(self)?;
        nodes::run(self)?;
        binding::run(self)?;
        graceful_eviction::run(self)?;
        execution::run(self)?;
        status::run(self)?;
        pods::run(self)?;
        Ok(())
    }

    /// Runs passes on every store change and at least every `resync`, until aborted.
    pub async fn run(self: Arc<Self>) {
        let span = tracing::info_span!("karmada", instance = %self.instance);
        async move {
            let mut live = self.store().subscribe();
            // The inputs the last pass started from: a pass that wrote sees them moved and
            // runs again, until one writes nothing.
            let mut passed_at = None;
            loop {
                let inputs = self.inputs();
                if passed_at != Some(inputs) || self.timed.swap(false, Ordering::Relaxed) {
                    passed_at = Some(inputs);
                    if let Err(e) = self.pass() {
                        warn!(error = %e, "karmada reconcile pass failed");
                        // A failed pass may have left work undone that no write will wake.
                        self.wait_for_clock();
                    }
                }
                // Wait for a change or the resync, then let a burst of writes settle.
                let changed = tokio::time::timeout(self.config.resync, live.recv()).await;
                if matches!(changed, Ok(Err(crate::store::LiveError::Closed))) {
                    debug!("store closed; karmada controllers stop");
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                while let Ok(Some(_)) = live.try_recv() {}
                // Cut for falling behind: it was told of a change, so a pass follows; a
                // new subscription keeps it woken by the next.
                if matches!(live.try_recv(), Err(crate::store::LiveError::Lagged(_))) {
                    live = self.store().subscribe();
                }
            }
        }
        .instrument(span)
        .await
    }
}
