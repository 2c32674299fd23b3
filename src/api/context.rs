//! What every surface of the API shares (`ApiContext`): the tree, authentication,
//! metrics, the shutdown drain, bounded calls to the host, and the Instance objects (the
//! process's one watch of them, shared with the instance manager), by which a request
//! finds its instance's actor. Nothing here waits on
//! one instance on behalf of another.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use crate::actors::tree::TreeHandle;
use crate::auth::{Auth, Caller, Role};
use crate::crd::Instance;
use crate::error::{check_name, ApiError};
use crate::host::instance_informer::InstanceInformer;

#[derive(Clone)]
pub struct ApiContext {
    pub tree: TreeHandle,
    pub auth: Arc<Auth>,
    /// One registry for every surface of this process.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The process's Instance watch, shared with the instance manager.
    instances: InstanceInformer,
    /// Where the serving process is in its shutdown (`/readyz`, watches ending).
    pub drain: crate::api::drain::Drain,
    /// How requests for instances other replicas own reach them (sharded fleets).
    pub forwarder: Option<Arc<crate::api::forward::Forwarder>>,
    /// The wakes of hibernated instances this replica asked for.
    pub(crate) wakes: Arc<Wakes>,
    /// What the kubeconfigs this process hands out name (`api::kubeconfigs`).
    pub kubeconfigs: Arc<crate::api::kubeconfigs::Issuer>,
}

impl ApiContext {
    /// One call to the host cluster for a request, bounded by
    /// `Settings::host_call_timeout`.
    pub async fn host_call<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ApiError> {
        let after = self.tree.settings().host_call_timeout;
        Ok(crate::host::error::bounded(what, after, fut).await?)
    }

    /// Without authentication or authorization (tests, benchmarks' baseline).
    pub fn new(tree: TreeHandle) -> Self {
        Self::with_auth(tree, Auth::disabled())
    }

    pub fn with_auth(tree: TreeHandle, auth: Arc<Auth>) -> Self {
        let instances = tree.instances().clone();
        Self {
            tree,
            auth,
            metrics: crate::metrics::Metrics::new(),
            instances,
            drain: crate::api::drain::Drain::never(),
            forwarder: None,
            wakes: Default::default(),
            kubeconfigs: Default::default(),
        }
    }

    /// The kubeconfigs this context hands out name what `issuer` says.
    pub fn with_kubeconfigs(mut self, issuer: crate::api::kubeconfigs::Issuer) -> Self {
        self.kubeconfigs = Arc::new(issuer);
        self
    }

    /// Requests for instances other replicas own are passed to them with `forwarder`.
    pub fn with_forwarder(mut self, forwarder: Arc<crate::api::forward::Forwarder>) -> Self {
        self.forwarder = Some(forwarder);
        self
    }

    /// This context's requests follow `drain` (the server's graceful shutdown).
    pub fn with_drain(mut self, drain: crate::api::drain::Drain) -> Self {
        self.drain = drain;
        self
    }

    pub async fn ready(&self) {
        let _ = self.instances.store().wait_until_ready().await;
        self.auth.ready().await;
    }

    /// Whether reads can be answered: the Instance cache and the bindings are listed.
    pub fn is_ready(&self) -> bool {
        self.instances.is_listed() && self.auth.is_listed()
    }

    /// Checks the instance name, then that `caller` holds `need` on it.
    pub fn authorize(
        &self,
        caller: &Caller,
        need: Role,
        instance: &str,
        action: &str,
    ) -> Result<(), ApiError> {
        check_name("instance", instance)?;
        self.auth.authorize(caller, need, instance, action)
    }

    /// All Instances, from the cache.
    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.instances.store().state()
    }

    pub fn instance(&self, name: &str) -> Result<Arc<Instance>, ApiError> {
        self.instances
            .store()
            .get(&ObjectRef::new(name))
            .ok_or_else(|| ApiError::NotFound(format!("instance {name:?} not found")))
    }
}

/// A wake asked for within this long is not asked for again by this replica.
const ASK_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The wakes of hibernated instances this replica asked for, by instance
/// (`api::request::wake`).
#[derive(Default)]
pub struct Wakes {
    asked: parking_lot::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

impl Wakes {
    /// Whether this request is the one to ask (none did within [`ASK_AGAIN_AFTER`]).
    pub(crate) fn first(&self, name: &str) -> bool {
        let mut asked = self.asked.lock();
        asked.retain(|_, at| at.elapsed() < ASK_AGAIN_AFTER);
        match asked.contains_key(name) {
            true => false,
            false => {
                asked.insert(name.to_string(), std::time::Instant::now());
                true
            }
        }
    }

    /// Drops the mark of a wake whose asking failed.
    pub(crate) fn forget(&self, name: &str) {
        self.asked.lock().remove(name);
    }
}
