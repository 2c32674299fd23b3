//! Messages of the RootSupervisor.

use ractor::{ActorRef, RpcReplyPort};

use crate::actors::manager::ManagerMsg;
use crate::actors::supervision::ActorSnapshot;

pub struct RootSnapshot {
    pub root: ActorSnapshot,
    /// The manager cannot count its own restarts: each one is a fresh actor.
    pub manager_restarts: u32,
    pub manager_last_error: Option<String>,
}

pub enum RootMsg {
    /// The current InstanceManager, for queries routed to it.
    Manager(RpcReplyPort<Option<ActorRef<ManagerMsg>>>),
    /// The root's own snapshot, with what it knows of the manager's failures.
    Snapshot(RpcReplyPort<RootSnapshot>),
    /// Delayed restart of a failed manager.
    RespawnManager,
    LeadershipChanged(bool),
}
