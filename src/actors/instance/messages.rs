//! Messages of the InstanceActor.

use ractor::RpcReplyPort;

use super::connect::{ConnectError, Connected};
use crate::crd::InstanceStatus;

/// What an instance actor reports about itself.
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub name: String,
    pub status: InstanceStatus,
    pub last_error: Option<String>,
}

/// What the API needs to serve one instance: cache handles (cheap clones), the client for
/// writes, whether the instance can serve now, and its concurrency limit.
#[derive(Clone)]
pub struct InstanceReader {
    pub name: String,
    pub client: Option<kube::Client>,
    /// Each cached kind's objects, with its change feed (for watches served from the cache).
    pub stores: std::collections::BTreeMap<super::caches::Kind, super::object_store::ObjectStore>,
    /// Access decisions for reads served from the caches.
    pub access: super::access::AccessReviews,
    /// Versions written through the proxy, for read-your-writes from the cache.
    pub writes: super::write_marks::WriteMarks,
    /// `Err(why)` when requests must fail fast with UNAVAILABLE.
    pub health: Result<(), String>,
    pub limiter: std::sync::Arc<tokio::sync::Semaphore>,
    /// Bound of one call made for a request the caches cannot answer alone.
    pub call_timeout: std::time::Duration,
    /// Table columns per cached kind, for `kubectl get` served from the cache.
    pub printers: super::printers::Printers,
    /// Whether each cached kind's watch is failing (live): such a kind is read from the
    /// instance.
    pub watch_health: std::collections::BTreeMap<
        super::caches::Kind,
        std::sync::Arc<super::watch_health::WatchHealth>,
    >,
    /// Watch restarts of the caches since the actor started (live).
    pub watch_restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// How a status write ended, and the Instance's resourceVersion it leaves behind (the
/// precondition of the next write), when known.
pub struct StatusWrite {
    pub result: Result<Box<crate::crd::InstanceStatus>, crate::actors::host_error::HostError>,
    pub resource_version: Option<String>,
}

pub enum InstanceMsg {
    /// Try to build the instance client (first at start, then with backoff).
    Connect,
    Connected(Box<Connected>),
    ConnectFailed(ConnectError),
    CachesSynced,
    /// Periodic: stats, probe, status sync.
    Tick,
    /// A probe's answer: the instance's Kubernetes version.
    Probed(Result<String, super::probe::ProbeError>),
    StatusWritten(StatusWrite),
    Registered(Result<(), crate::actors::host_error::HostError>),
    /// The PediaCluster was made what it should be, and what Clusterpedia reports of it.
    Clusterpedia(Result<super::clusterpedia::Reported, crate::actors::host_error::HostError>),
    /// Kairship's roles on the members could not be applied (or removed): try again.
    MemberAccessFailed(super::member_access::MemberAccessError),
    /// The latest view, for the API and the tests.
    View(RpcReplyPort<InstanceView>),
    /// Chaos: panic inside the handler, to exercise supervision.
    Panic,
}
