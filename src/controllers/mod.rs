//! Per-instance controllers: what each instance actor runs besides keeping its connection,
//! caches, probes, stats and status (those are the actor's own). Each controller is one
//! file here, listed once in [`table`], and switched off with `--controllers=*,-name`.
//!
//! A controller has kube-runtime's shape, fitted to an actor that must never block: at a
//! tick, [`Controller::reconcile`] looks at the instance ([`Scope`], what the actor
//! [`Observed`]) and starts one piece of work or none ([`Next`]); [`Controller::record`]
//! takes in what the work found and returns the [`Action`] that says when to look again.
//! The [`Runner`] calls `reconcile` only once that time has come or what the controller
//! watches changed ([`Controller::watches`]: by default whether the instance is
//! connected and answering, its phase, endpoint and version, and the Instance's
//! generation and annotations). It keeps at most one piece of work in flight per
//! controller, aborts it when the actor stops or (for leader-only controllers) when
//! leadership is lost, and applies one error policy to [`ControllerError`]s: exponential
//! backoff from one second up to the controller's `RETRY_MAX`.
//!
//! What a controller says of the instance goes in its own [`Report`] (conditions, status
//! fields), which the status writer merges: a new controller touches its file and the
//! table.

pub mod certificates;
pub mod class_drift;
pub mod cluster_profiles;
pub mod clusterpedia;
pub mod components;
mod erased;
pub mod guardrails;
pub mod member_access;
pub mod members_ready;
pub mod namespace_roles;
pub mod phase_events;
pub mod registration;
pub mod renewal;
pub mod rollout_steps;
mod runner;
pub mod scheduled_backups;
pub mod table;
#[cfg(test)]
pub(crate) mod testing;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::crd::Instance;
use crate::host::error::{HostError, INSTANCE};
use crate::host::kubeconfig::KubeconfigSource;
pub use crate::status::{Observed, Report};
pub use runner::{ControllerView, Done, Runner};
pub use table::{Selection, SelectionError, TABLE};

/// What a controller's work resolves to: what it found, or why it failed (the error
/// policy retries it with backoff).
pub type Work<T> = Pin<Box<dyn Future<Output = Result<T, ControllerError>> + Send + 'static>>;

/// Why a controller's work failed.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A call to the host cluster or to the instance.
    #[error(transparent)]
    Call(#[from] HostError),
    /// Anything else, in words.
    #[error("{0}")]
    Failed(String),
    #[error("its work panicked")]
    Panicked,
}

impl ControllerError {
    /// A call to the instance, bounded by `after`, as this error when it fails.
    pub async fn instance_call<T>(
        what: &str,
        after: Duration,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, Self> {
        let answer = crate::host::error::bounded_on(INSTANCE, what, after, call).await;
        Ok(answer?)
    }

    /// As [`instance_call`](Self::instance_call), for calls to the host.
    pub async fn host_call<T>(
        what: &str,
        after: Duration,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, Self> {
        let answer =
            crate::host::error::bounded_on(crate::host::error::HOST, what, after, call).await;
        Ok(answer?)
    }
}

/// When a controller looks at its instance again (kube-runtime's `Action`), besides when
/// what it watches changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    after: Option<Duration>,
}

impl Action {
    /// Again after `after` (zero: at the next tick).
    pub fn requeue(after: Duration) -> Self {
        Self { after: Some(after) }
    }

    /// Only when what it watches changes.
    pub fn await_change() -> Self {
        Self { after: None }
    }

    /// When this action, taken at `now`, has it look again (`None`: on a change only).
    pub(crate) fn due_at(&self, now: Instant) -> Option<Instant> {
        self.after.map(|a| now + a)
    }
}

/// What `reconcile` does now.
pub enum Next<T> {
    /// Starts this work; `record` takes in what it found.
    Start(Work<T>),
    /// Nothing to start: the last [`Action`] stands (before any, it looks at every tick).
    Idle,
    /// Nothing to start, and nothing until this.
    Wait(Action),
}

/// One per-instance controller.
pub trait Controller: Send + 'static {
    /// The name `--controllers` knows it by.
    const NAME: &'static str;
    /// Runs on the leader only (it writes what the whole fleet sees); otherwise on every
    /// replica (it judges the instance for that replica's own reads).
    const LEADER_ONLY: bool = true;
    /// After failures, retries wait from one second, doubling, up to this.
    const RETRY_MAX: Duration = Duration::from_secs(60);
    /// What its work reports back.
    type Found: Send + 'static;

    /// Looks at the instance now, and says in `report` what it can without work. Called
    /// when its last action's time came ([`Scope::requeued`]) or what it watches changed,
    /// while none of its work is in flight and no retry waits.
    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        report: &mut Report,
    ) -> Next<Self::Found>;

    /// Takes in what successful work found; says when to look again.
    fn record(&mut self, found: Self::Found, report: &mut Report) -> Action;

    /// Adds to what it watches, beyond the instance's connection, phase, endpoint, version
    /// and the Instance's generation and annotations: a change calls `reconcile`.
    fn watches(&self, _scope: &Scope<'_>, _observed: &Observed, _key: &mut dyn Hasher) {}
}

/// What every controller watches: a change of any of it calls `reconcile`.
pub(crate) fn watched_key(scope: &Scope<'_>, observed: &Observed) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (scope.connected, scope.answering).hash(&mut h);
    observed.lifecycle.phase().hash(&mut h);
    (&observed.endpoint, &observed.karmada_version).hash(&mut h);
    if let Some(latest) = scope.latest() {
        latest.metadata.generation.hash(&mut h);
        latest.metadata.annotations.hash(&mut h);
    }
    h.finish()
}

/// What a controller sees of its instance at one tick.
pub struct Scope<'a> {
    pub name: &'a str,
    /// The Instance the actor was started with (a change of its spec restarts the actor,
    /// except its backup schedule: see [`Scope::latest`]).
    pub instance: &'a Instance,
    pub ctx: &'a Context,
    /// The instance's client, once connected (its kubeconfig is known to work).
    pub client: Option<&'a kube::Client>,
    pub connected: bool,
    /// It answers probes now.
    pub answering: bool,
    /// The instance's namespace cache, once its caches run.
    pub namespaces: Option<&'a crate::cache::store::ObjectStore>,
    /// Its Cluster cache, once its caches run.
    pub clusters: Option<&'a crate::cache::store::ObjectStore>,
    /// The Secret its kubeconfig was read from at the last connect.
    pub kubeconfig_source: Option<&'a KubeconfigSource>,
    /// What its certificates are read from, once connected.
    pub certificate_inputs: Option<&'a crate::certificates::Inputs>,
    /// What the proxy answered for the instance since its actor started.
    pub traffic: &'a crate::cache::traffic::Traffic,
    pub(crate) runs: &'a [runner::Times],
    pub(crate) requeued: bool,
}

impl Scope<'_> {
    /// The Instance as the host shows it now.
    pub fn latest(&self) -> Option<std::sync::Arc<Instance>> {
        self.ctx
            .instances
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(self.name))
    }

    /// A managed instance's operator namespace and Karmada object name.
    pub fn operator(&self) -> Option<(String, String)> {
        self.certificate_inputs.and_then(|i| i.operator.clone())
    }

    /// Whether `reconcile` is called because its last action's time came (else, because
    /// what it watches changed, or at its first look).
    pub fn requeued(&self) -> bool {
        self.requeued
    }

    /// When the controller `name` last finished work without error.
    pub fn succeeded_at(&self, name: &str) -> Option<Instant> {
        self.times(name).and_then(|t| t.ok)
    }

    /// When the controller `name` last finished work, with or without error.
    pub fn finished_at(&self, name: &str) -> Option<Instant> {
        self.times(name).and_then(|t| t.finished)
    }

    fn times(&self, name: &str) -> Option<&runner::Times> {
        self.runs.iter().find(|t| t.name == name)
    }
}
