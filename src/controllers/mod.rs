//! Per-instance controllers: what each instance actor runs besides keeping its connection,
//! caches, probes, stats and status (those are the actor's own). Each controller is one
//! file here, listed once in [`table`], and switched off with `--controllers=*,-name`.
//!
//! A controller is level-triggered: at every tick of its instance it looks at what the
//! instance and the host show ([`Scope`], the instance's [`Observed`]) and either starts
//! one piece of work or does nothing. The [`Runner`] keeps at most one piece of work in
//! flight per controller, aborts it when the actor stops or (for leader-only controllers)
//! when leadership is lost, remembers when each last succeeded, and applies one error
//! policy: exponential backoff from one second up to the controller's `RETRY_MAX`.

pub mod certificates;
pub mod class_drift;
pub mod clusterpedia;
pub mod components;
mod erased;
pub mod guardrails;
pub mod member_access;
pub mod namespace_roles;
pub mod phase_events;
pub mod registration;
pub mod renewal;
pub mod rollout_steps;
mod runner;
pub mod scheduled_backups;
pub mod table;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::crd::Instance;
use crate::host::kubeconfig::KubeconfigSource;
use crate::status::Observed;
pub use runner::{ControllerView, Done, Runner};
pub use table::{Selection, SelectionError, TABLE};

/// What a controller's work resolves to: what it found, or why it failed (the error
/// policy retries it with backoff).
pub type Work<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'static>>;

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

    /// Looks at the instance now: work to start, or `None` when nothing is due. Called at
    /// every tick while none of this controller's work is in flight and no retry waits.
    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &mut Observed,
    ) -> Option<Work<Self::Found>>;

    /// Takes in what successful work found.
    fn record(&mut self, found: Self::Found, observed: &mut Observed);
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
    /// The Secret its kubeconfig was read from at the last connect.
    pub kubeconfig_source: Option<&'a KubeconfigSource>,
    /// What its certificates are read from, once connected.
    pub certificate_inputs: Option<&'a crate::certificates::Inputs>,
    /// What the proxy answered for the instance since its actor started.
    pub traffic: &'a crate::cache::traffic::Traffic,
    pub(crate) runs: &'a [runner::Times],
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

    /// When the controller `name` last finished work without error.
    pub fn succeeded_at(&self, name: &str) -> Option<Instant> {
        self.times(name).and_then(|t| t.ok)
    }

    /// When the controller `name` last finished work, with or without error.
    pub fn finished_at(&self, name: &str) -> Option<Instant> {
        self.times(name).and_then(|t| t.finished)
    }

    /// Whether the controller `name` has not succeeded within `every`.
    pub fn due(&self, name: &str, every: Duration) -> bool {
        self.succeeded_at(name).is_none_or(|t| t.elapsed() >= every)
    }

    fn times(&self, name: &str) -> Option<&runner::Times> {
        self.runs.iter().find(|t| t.name == name)
    }
}
