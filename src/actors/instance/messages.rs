//! Messages of the InstanceActor.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::connect::{ConnectError, Connected};
use crate::crd::InstanceStatus;

/// What an instance actor reports about itself.
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub name: String,
    pub status: InstanceStatus,
    pub last_error: Option<String>,
    /// How each of its controllers stands on this replica.
    pub controllers: Vec<crate::controllers::ControllerView>,
}

/// How a status write ended, and the Instance's resourceVersion it leaves behind (the
/// precondition of the next write), when known.
pub struct StatusWrite {
    pub result: Result<Box<crate::crd::InstanceStatus>, crate::host::error::HostError>,
    pub resource_version: Option<String>,
}

pub enum InstanceMsg {
    /// Try to build the instance client (first at start, then with backoff).
    Connect,
    /// Connected, with the actor's starting turn when it took one (released once its
    /// caches are filled).
    Connected(Box<Connected>, Option<tokio::sync::OwnedSemaphorePermit>),
    ConnectFailed(ConnectError),
    CachesSynced,
    /// Periodic: stats, probe, status sync.
    Tick,
    /// A probe's answer: the instance's Kubernetes version.
    Probed(Result<String, ProbeError>),
    StatusWritten(StatusWrite),
    /// How a controller's work ended (`controllers::Runner`).
    Reconciled(crate::controllers::Done),
    /// The latest view, for the API and the tests.
    View(RpcReplyPort<InstanceView>),
    /// Chaos: panic inside the handler, to exercise supervision (test and chaos builds
    /// only: a product binary carries no panic button).
    #[cfg(feature = "testbed")]
    Panic,
}

/// Why a reachability probe (`GET /version`) found no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("probe failed: {0}")]
    Failed(#[from] kube::Error),
    #[error("probe timed out after {0:?}")]
    TimedOut(Duration),
}
