//! The supervision tree: root (leader election), instance manager, and one instance actor
//! per Karmada instance. Each actor's folder holds its messages beside it.

pub mod instance;
pub mod manager;
pub mod root;
pub mod supervision;
pub mod tree;
