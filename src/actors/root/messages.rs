//! Messages of the RootSupervisor.

use ractor::{ActorRef, RpcReplyPort};

use crate::actors::manager::ManagerMsg;
use crate::actors::supervision::ActorSnapshot;

pub enum RootMsg {
    /// The current InstanceManager, for queries routed to it.
    Manager(RpcReplyPort<Option<ActorRef<ManagerMsg>>>),
    /// The root's own snapshot (the manager reports its restarts itself).
    Snapshot(RpcReplyPort<ActorSnapshot>),
    /// Delayed restart of a failed manager.
    RespawnManager,
    LeadershipChanged(bool),
}
