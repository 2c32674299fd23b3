//! What an instance actor publishes for the API to serve its instance (`InstanceReader`):
//! its caches, the client for calls made as the caller, whether it can serve now, and its
//! concurrency limit. Built by the actor only; read through methods, so what the API may
//! reach of an instance is this file.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::access::AccessReviews;
use super::caches::Kind;
use super::printers::Printers;
use super::store::ObjectStore;
use super::watch_health::WatchHealth;
use super::write_marks::WriteMarks;

#[derive(Clone)]
pub struct InstanceReader {
    pub(crate) name: String,
    pub(crate) client: Option<kube::Client>,
    /// HTTP/1.1, for upgraded connections (exec, attach, port-forward).
    pub(crate) upgrades: Option<kube::Client>,
    pub(crate) stores: BTreeMap<Kind, ObjectStore>,
    pub(crate) access: AccessReviews,
    pub(crate) writes: WriteMarks,
    /// `Err(why)` when requests must fail fast with UNAVAILABLE.
    pub(crate) health: Result<(), String>,
    pub(crate) limiter: Arc<tokio::sync::Semaphore>,
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    /// The caches' budget (live): over it, nothing is served from them.
    pub(crate) meter: Option<Arc<super::budget::Meter>>,
    pub(crate) call_timeout: Duration,
    pub(crate) printers: Printers,
    /// Whether each cached kind's watch is failing (live).
    pub(crate) watch_health: BTreeMap<Kind, Arc<WatchHealth>>,
    /// Watch restarts of the caches since the actor started (live).
    pub(crate) watch_restarts: Arc<AtomicU64>,
    /// The endpoint and CA the instance is reached with, once connected.
    pub(crate) trust: Option<Arc<crate::certificates::Inputs>>,
    /// What the proxy answered for the instance (live).
    pub(crate) traffic: Arc<super::traffic::Traffic>,
}

impl InstanceReader {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the proxy answered for the instance since its actor started.
    pub fn traffic(&self) -> &super::traffic::Traffic {
        &self.traffic
    }

    /// The instance's client, once connected: the API acts with it only as the caller.
    pub fn client(&self) -> Option<&kube::Client> {
        self.client.as_ref()
    }

    /// The instance's client for upgraded connections, once connected: as the caller only.
    pub fn upgrades(&self) -> Option<&kube::Client> {
        self.upgrades.as_ref()
    }

    /// A cached kind's objects and change feed.
    pub fn store(&self, kind: Kind) -> Option<&ObjectStore> {
        self.stores.get(&kind)
    }

    /// Access decisions for reads served from the caches.
    pub fn access(&self) -> &AccessReviews {
        &self.access
    }

    /// Versions written through the API, for read-your-writes from the cache.
    pub fn writes(&self) -> &WriteMarks {
        &self.writes
    }

    /// `Err(why)` when requests must fail fast with UNAVAILABLE.
    pub fn health(&self) -> Result<(), &str> {
        self.health.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// Bounds the API's concurrent requests to this instance.
    pub fn limiter(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.limiter
    }

    /// Why the caches serve nothing, if the instance is over its cache budget.
    pub fn over_budget(&self) -> Option<String> {
        self.meter.as_ref().and_then(|m| m.why())
    }

    /// Bounds the streams (pass-through watches) the API holds open on this instance.
    pub fn streams(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.streams
    }

    /// Bound of one call made for a request the caches cannot answer alone.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Table columns per cached kind, for `kubectl get` served from the cache.
    pub fn printers(&self) -> &Printers {
        &self.printers
    }

    /// Whether the watch feeding `kind`'s cache keeps failing (its reads go to the
    /// instance then).
    pub fn watch_failing(&self, kind: Kind) -> bool {
        self.watch_health.get(&kind).is_some_and(|h| h.failing())
    }

    /// The endpoint and CA certificates the instance is reached with, once connected.
    pub fn trust(&self) -> Option<&crate::certificates::Inputs> {
        self.trust.as_deref()
    }

    /// Watch restarts of the caches since the actor started.
    pub fn watch_restarts(&self) -> u64 {
        self.watch_restarts.load(Ordering::Relaxed)
    }
}
