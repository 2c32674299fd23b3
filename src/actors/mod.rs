//! The supervision tree: root (leader election), instance manager, and one instance actor
//! per Karmada instance. Each actor's folder holds its messages beside it.

pub mod context;
pub mod host_error;
pub mod host_scope;
pub mod instance;
pub mod instance_informer;
pub mod leader;
pub mod manager;
pub mod root;
pub mod routes;
pub mod shards;
pub mod supervision;
pub mod tree;
pub mod watched;
