//! Backups of instances: every object of an instance's API a restore needs, read through
//! its karmada-apiserver (`archive`), kept compressed in Secrets of the host's backup
//! namespace or in a directory on a PersistentVolume (`store`), taken on request or on the Instance's schedule by the leader
//! (`schedule`), and restored into the same or another instance (`restore`). A logical
//! backup rather than an etcd snapshot: it needs nothing but the instance's API, so it
//! works for External and Managed instances alike, restores across Karmada versions and
//! into a new instance, and leaves every object that exists as it is.

pub mod archive;
pub mod record;
pub mod restore;
pub mod schedule;
pub mod store;
pub mod take;

pub use record::{Phase, Record};
pub use store::Store;

use crate::host::error::HostError;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("the backup destination is missing: {destination}")]
    NoDestination { destination: String },
    #[error(
        "the backup destination is full: backups in {destination} hold {used} bytes, \
         this one needs {need} more and at most {capacity} may be kept (--backup-max-bytes); \
         delete backups or keep fewer"
    )]
    Full {
        destination: String,
        used: u64,
        need: u64,
        capacity: u64,
    },
    #[error("backup {backup:?} of instance {instance:?} not found")]
    NotFound { instance: String, backup: String },
    #[error("backup {backup:?} is {phase:?}, not Completed: only a completed backup restores")]
    NotCompleted { backup: String, phase: Phase },
    #[error("a backup of instance {instance:?} is already running: {backup}")]
    Running { instance: String, backup: String },
    /// The instance could not be read whole.
    #[error("reading the instance: {0}")]
    Instance(String),
    #[error("backup {backup:?} cannot be read: {why}")]
    Corrupt { backup: String, why: String },
    /// The destination directory failed a read or write.
    #[error("the backup destination {destination} failed: {why}")]
    Storage { destination: String, why: String },
}
