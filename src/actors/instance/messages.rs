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

pub enum InstanceMsg {
    /// Try to build the instance client (first at start, then with backoff).
    Connect,
    Connected(Box<Connected>),
    ConnectFailed(ConnectError),
    CachesSynced,
    /// Periodic: stats, probe, status sync.
    Tick,
    Probed(Result<String, String>),
    StatusWritten(Result<Box<crate::crd::InstanceStatus>, String>),
    Registered(Result<(), String>),
    /// The latest view, for the API and the tests.
    View(RpcReplyPort<InstanceView>),
    /// Chaos: panic inside the handler, to exercise supervision.
    Panic,
}
