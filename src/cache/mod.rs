//! The cache layer: what Kairship keeps of each instance's objects and how the API reads
//! it. An instance actor owns its [`caches::Caches`] (one watch per cached kind, feeding a
//! [`store::ObjectStore`] of [`object::CachedObject`]s, kept as received ([`raw`]), within its
//! [`budget`]); the API reads through the [`InstanceReader`] the actor publishes, which
//! answers from the stores, asks the instance for access decisions ([`access`]) and
//! printer columns ([`printers`]), reads its own writes ([`write_marks`]) and counts what
//! the proxy answered ([`traffic`]).
//!
//! A new cached kind is a `Kind` in `caches.rs` (its resource and how it is printed).

pub mod access;
pub mod budget;
pub mod caches;
pub mod feed;
pub mod object;
pub mod printers;
pub mod raw;
pub mod reader;
pub mod store;
pub mod traffic;
pub mod watch_health;
pub mod write_marks;

pub use reader::InstanceReader;
