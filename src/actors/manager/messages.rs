//! Messages of the InstanceManager.

use ractor::{ActorRef, RpcReplyPort};

use crate::actors::instance::InstanceMsg;
use crate::actors::supervision::ActorSnapshot;
use crate::crd::Instance;

pub enum ManagerMsg {
    /// An Instance was added or changed (from the host watch).
    Apply(Box<Instance>),
    /// An Instance is gone from the host.
    Deleted(String),
    /// A relist finished: these are all the Instances that exist.
    Resync(Vec<String>),
    /// This replica gained or lost the lease.
    LeadershipChanged(bool),
    /// The live replicas changed (sharded fleets): instances may move.
    MembersChanged,
    /// A handoff record write on an Instance finished (sharded fleets).
    Recorded(String, Result<(), String>),
    /// Delayed restart of a failed child.
    Respawn(String),
    /// Leader-only cleanup of a deleted Instance finished (or failed).
    CleanedUp(String, Result<(), crate::host::error::HostError>),
    Snapshot(RpcReplyPort<Vec<ActorSnapshot>>),
    /// Restart one instance actor on request (SRE action); forgives past failures.
    /// Restart an instance's actor; with the Instance's restart annotation value, a restart
    /// that annotation already caused here is not repeated.
    Restart(String, Option<String>, RpcReplyPort<Result<(), String>>),
    /// The live actor of an instance, for request routing.
    Lookup(String, RpcReplyPort<Option<ActorRef<InstanceMsg>>>),
    /// Chaos: make an instance actor panic (test and chaos builds only).
    #[cfg(feature = "testbed")]
    InjectPanic(String, RpcReplyPort<bool>),
    /// Chaos: make the manager itself panic (the root restarts it).
    #[cfg(feature = "testbed")]
    Crash,
}
