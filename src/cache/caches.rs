//! The "virtual cluster" read side of one instance: a reflector cache per kind, owned by
//! the instance actor and dropped with it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::Api;
use kube::discovery::ApiResource;
use kube::runtime::{watcher, WatchStreamExt};
use tokio::task::JoinHandle;

use super::budget::{CacheBudget, Meter};
use super::raw::RawObject;
use super::store::ObjectStore;
use super::watch_health::WatchHealth;

/// A kind the instance actor caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Cluster,
    PropagationPolicy,
    OverridePolicy,
    ClusterPropagationPolicy,
    ClusterOverridePolicy,
    /// Karmada v1.14 and later (failover taints); an older instance simply has none.
    ClusterTaintPolicy,
    ResourceBinding,
    Namespace,
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
}

impl Kind {
    pub const ALL: [Kind; 12] = [
        Kind::Cluster,
        Kind::PropagationPolicy,
        Kind::OverridePolicy,
        Kind::ClusterPropagationPolicy,
        Kind::ClusterOverridePolicy,
        Kind::ClusterTaintPolicy,
        Kind::ResourceBinding,
        Kind::Namespace,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::Job,
    ];

    pub const WORKLOADS: [Kind; 4] = [
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::Job,
    ];

    /// The kind named `name` (as in `kind:`), among `among`.
    pub fn from_name(name: &str, among: &[Kind]) -> Option<Kind> {
        among.iter().copied().find(|k| k.resource().kind == name)
    }

    pub const POLICIES: [Kind; 5] = [
        Kind::PropagationPolicy,
        Kind::ClusterPropagationPolicy,
        Kind::OverridePolicy,
        Kind::ClusterOverridePolicy,
        Kind::ClusterTaintPolicy,
    ];

    /// A kind only newer instances serve: its absence is no fault of the instance.
    pub fn optional(self) -> bool {
        matches!(self, Kind::ClusterTaintPolicy)
    }

    /// Served from a CustomResourceDefinition on the instance (Karmada's policies and
    /// bindings), not built into kube-apiserver or aggregated.
    pub fn is_crd(self) -> bool {
        matches!(
            self,
            Kind::PropagationPolicy
                | Kind::OverridePolicy
                | Kind::ClusterPropagationPolicy
                | Kind::ClusterOverridePolicy
                | Kind::ClusterTaintPolicy
                | Kind::ResourceBinding
        )
    }

    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::Cluster
                | Kind::ClusterPropagationPolicy
                | Kind::ClusterOverridePolicy
                | Kind::ClusterTaintPolicy
                | Kind::Namespace
        )
    }

    /// The kind's name, as `kind:` says it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cluster => "Cluster",
            Kind::PropagationPolicy => "PropagationPolicy",
            Kind::OverridePolicy => "OverridePolicy",
            Kind::ClusterPropagationPolicy => "ClusterPropagationPolicy",
            Kind::ClusterOverridePolicy => "ClusterOverridePolicy",
            Kind::ClusterTaintPolicy => "ClusterTaintPolicy",
            Kind::ResourceBinding => "ResourceBinding",
            Kind::Namespace => "Namespace",
            Kind::Deployment => "Deployment",
            Kind::StatefulSet => "StatefulSet",
            Kind::DaemonSet => "DaemonSet",
            Kind::Job => "Job",
        }
    }

    pub fn resource(self) -> ApiResource {
        let (group, version, kind, plural) = match self {
            Kind::Cluster => ("cluster.karmada.io", "v1alpha1", "Cluster", "clusters"),
            Kind::PropagationPolicy => (
                "policy.karmada.io",
                "v1alpha1",
                "PropagationPolicy",
                "propagationpolicies",
            ),
            Kind::OverridePolicy => (
                "policy.karmada.io",
                "v1alpha1",
                "OverridePolicy",
                "overridepolicies",
            ),
            Kind::ClusterPropagationPolicy => (
                "policy.karmada.io",
                "v1alpha1",
                "ClusterPropagationPolicy",
                "clusterpropagationpolicies",
            ),
            Kind::ClusterOverridePolicy => (
                "policy.karmada.io",
                "v1alpha1",
                "ClusterOverridePolicy",
                "clusteroverridepolicies",
            ),
            Kind::ClusterTaintPolicy => (
                "policy.karmada.io",
                "v1alpha1",
                "ClusterTaintPolicy",
                "clustertaintpolicies",
            ),
            Kind::ResourceBinding => (
                "work.karmada.io",
                "v1alpha2",
                "ResourceBinding",
                "resourcebindings",
            ),
            Kind::Namespace => ("", "v1", "Namespace", "namespaces"),
            Kind::Deployment => ("apps", "v1", "Deployment", "deployments"),
            Kind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
            Kind::DaemonSet => ("apps", "v1", "DaemonSet", "daemonsets"),
            Kind::Job => ("batch", "v1", "Job", "jobs"),
        };
        debug_assert_eq!(kind, self.name());
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version,
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

/// The object stores of one instance, and the watch tasks that feed them.
pub struct Caches {
    pub stores: BTreeMap<Kind, ObjectStore>,
    /// Watch errors, each followed by a retry (resume or relist), across every kind.
    pub watch_restarts: Arc<AtomicU64>,
    /// Whether each kind's watch is failing: the API reads a failing kind from the
    /// instance, and the actor reports one that keeps failing.
    pub health: BTreeMap<Kind, Arc<WatchHealth>>,
    /// What the stores keep, against the instance's cache budget.
    pub meter: Arc<Meter>,
    tasks: Vec<JoinHandle<()>>,
}

impl Caches {
    /// Starts one watcher per kind, each with kube-runtime's default backoff (telling its
    /// `WatchHealth` when it retries), so a failing watch retries on its own without
    /// touching the others.
    pub fn start(client: &kube::Client, instance: &str, budget: CacheBudget) -> Self {
        let meter = Arc::new(Meter::new(budget));
        let mut stores = BTreeMap::new();
        let mut tasks = Vec::new();
        let watch_restarts = Arc::new(AtomicU64::new(0));
        let mut health_of = BTreeMap::new();
        for kind in Kind::ALL {
            let ar = kind.resource();
            let api: Api<RawObject> = Api::all_with(client.clone(), &ar);
            let types = kube::api::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            };
            let health = Arc::new(WatchHealth::default());
            health_of.insert(kind, health.clone());
            let store = ObjectStore::metered(meter.clone(), kind.name());
            // kube-apiserver leaves apiVersion and kind out of list items; objects served
            // from the cache one by one must carry them, as the instance's own GET does.
            let stream = watcher(api, watcher::Config::default())
                .backoff(health.backoff())
                .modify(move |o| {
                    if o.types.is_none() {
                        o.types = Some(types.clone());
                    }
                });
            let span = tracing::debug_span!("cache", instance = %instance, kind = ?kind);
            let restarts = watch_restarts.clone();
            let writer = store.clone();
            tasks.push(tokio::spawn(tracing::Instrument::instrument(
                async move {
                    stream
                        .for_each(|ev| {
                            match ev {
                                Ok(ev) => {
                                    // `Init` opens every (re)list before the list is
                                    // asked for, so only what follows it is a success.
                                    if !matches!(ev, watcher::Event::Init) {
                                        health.succeeded();
                                    }
                                    writer.apply(ev)
                                }
                                Err(e) => {
                                    restarts.fetch_add(1, Ordering::Relaxed);
                                    health.failed(e.to_string());
                                    if kind.optional() && not_served(&e) {
                                        writer.mark_absent();
                                    }
                                    tracing::debug!(error = %e, "watch error; retrying with backoff");
                                }
                            }
                            async {}
                        })
                        .await
                },
                span,
            )));
            stores.insert(kind, store);
        }
        Self {
            stores,
            watch_restarts,
            health: health_of,
            meter,
            tasks,
        }
    }

    /// Calls `wake` once the instance goes over its budget (the task ends with the caches).
    pub fn on_breach(&mut self, wake: impl FnOnce() + Send + 'static) {
        let meter = self.meter.clone();
        self.tasks.push(tokio::spawn(async move {
            meter.breached().await;
            wake();
        }));
    }

    /// Over the instance's budget: stops every watch and drops every object; true if so.
    pub fn stop_if_over_budget(&mut self) -> bool {
        if !self.meter.over() {
            return false;
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        for s in self.stores.values() {
            s.drop_if_over_budget();
        }
        true
    }

    /// Why the instance is over its cache budget, first (at once: no grace), else the
    /// first kind whose watch has failed without a success in between for at least
    /// `grace`, counting from `not_before` at the earliest (when the instance last began
    /// answering: watches failing while it was down are the probes' to report), in words.
    pub fn failing_for(&self, grace: Duration, not_before: Instant) -> Option<String> {
        if let Some(why) = self.meter.why() {
            return Some(why);
        }
        self.health.iter().find_map(|(kind, health)| {
            if self.stores.get(kind).is_some_and(ObjectStore::absent) {
                return None;
            }
            let error = health.failing_for(grace, not_before)?;
            let r = kind.resource();
            let dot = if r.group.is_empty() { "" } else { "." };
            // No duration in the words: the status would change on every tick.
            Some(format!(
                "the watch of {}{dot}{} keeps failing: {error}",
                r.plural, r.group
            ))
        })
    }

    pub fn store(&self, kind: Kind) -> Option<&ObjectStore> {
        self.stores.get(&kind)
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.stores.get(&kind).map_or(0, |s| s.len())
    }

    /// Resolves once every store has completed its first list.
    pub fn ready(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let stores: Vec<ObjectStore> = self.stores.values().cloned().collect();
        async move {
            for s in stores {
                s.wait_until_ready().await;
            }
        }
    }
}

/// A list answered 404: the instance does not serve the kind.
fn not_served(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s))
            | watcher::Error::WatchStartFailed(kube::Error::Api(s)) if s.code == 404
    )
}

impl Drop for Caches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
