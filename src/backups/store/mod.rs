//! Where backups are kept, a setting: Secrets in the host's backup namespace (the default,
//! `secrets`), or a directory (`--backup-dir`, `directory`), where the chart mounts a
//! PersistentVolume. Both hold the same records and data, and every replica reads them
//! (a directory shared by replicas needs a ReadWriteMany volume). Names are built from the
//! instance and the time, never taken from a request: a name a request gives is only
//! looked up once it has a backup's form for that instance.

mod directory;
mod secrets;

use std::path::PathBuf;
use std::time::Duration;

pub use directory::Directory;
pub use secrets::{Secrets, OF_LABEL, PART_BYTES};

use super::{BackupError, Record};

pub const PREFIX: &str = "kairship-backup-";

#[derive(Clone)]
pub enum Store {
    Secrets(Secrets),
    Directory(Directory),
}

impl Store {
    /// Secrets in `namespace` of the host.
    pub fn secrets(
        host: kube::Client,
        namespace: String,
        capacity: u64,
        timeout: Duration,
    ) -> Self {
        Self::Secrets(Secrets::new(host, namespace, capacity, timeout))
    }

    /// Files under `dir`.
    pub fn directory(dir: PathBuf, capacity: u64, timeout: Duration) -> Self {
        Self::Directory(Directory::new(dir, capacity, timeout))
    }

    /// Writes a new backup's record; a missing destination says so.
    pub async fn create(&self, record: &Record) -> Result<(), BackupError> {
        match self {
            Self::Secrets(s) => s.create(record).await,
            Self::Directory(d) => d.create(record).await,
        }
    }

    /// Writes a backup's record as it stands now.
    pub async fn update(&self, record: &Record) -> Result<(), BackupError> {
        match self {
            Self::Secrets(s) => s.update(record).await,
            Self::Directory(d) => d.update(record).await,
        }
    }

    /// The backups of `instance`, newest first.
    pub async fn list(&self, instance: &str) -> Result<Vec<Record>, BackupError> {
        let mut records = match self {
            Self::Secrets(s) => s.list(instance).await?,
            Self::Directory(d) => d.list(instance).await?,
        };
        records.sort_by(|a, b| b.started.cmp(&a.started).then(b.name.cmp(&a.name)));
        Ok(records)
    }

    /// One backup of `instance`: anything else (another instance's, not a backup) is not
    /// found.
    pub async fn get(&self, instance: &str, backup: &str) -> Result<Record, BackupError> {
        if !is_backup_of(instance, backup) {
            return Err(BackupError::NotFound {
                instance: instance.to_string(),
                backup: backup.to_string(),
            });
        }
        match self {
            Self::Secrets(s) => s.get(instance, backup).await,
            Self::Directory(d) => d.get(instance, backup).await,
        }
    }

    /// Stores `data` for `record` (refused when the destination would overflow); returns
    /// in how many parts.
    pub async fn write_data(&self, record: &Record, data: &[u8]) -> Result<u32, BackupError> {
        let (used, destination, capacity) = match self {
            Self::Secrets(s) => (s.used_bytes().await?, s.destination(), s.capacity()),
            Self::Directory(d) => (d.used_bytes().await?, d.destination(), d.capacity()),
        };
        let need = data.len() as u64;
        if used.saturating_add(need) > capacity {
            return Err(BackupError::Full {
                destination,
                used,
                need,
                capacity,
            });
        }
        match self {
            Self::Secrets(s) => s.write_data(record, data).await,
            Self::Directory(d) => d.write_data(record, data).await,
        }
    }

    /// The data of a completed backup, checked against the size written.
    pub async fn read_data(&self, record: &Record) -> Result<Vec<u8>, BackupError> {
        let data = match self {
            Self::Secrets(s) => s.read_data(record).await?,
            Self::Directory(d) => d.read_data(record).await?,
        };
        if data.len() as u64 != record.size_bytes {
            return Err(BackupError::Corrupt {
                backup: record.name.clone(),
                why: format!(
                    "it holds {} bytes, {} were written",
                    data.len(),
                    record.size_bytes
                ),
            });
        }
        Ok(data)
    }

    /// Deletes a backup: its data, then its record.
    pub async fn delete(&self, record: &Record) -> Result<(), BackupError> {
        match self {
            Self::Secrets(s) => s.delete(record).await,
            Self::Directory(d) => d.delete(record).await,
        }
    }

    /// Keeps the newest `keep` finished backups of `instance`, deleting the rest; returns
    /// the names deleted. A running backup is never deleted.
    pub async fn prune(&self, instance: &str, keep: u32) -> Result<Vec<String>, BackupError> {
        let records = self.list(instance).await?;
        let mut deleted = Vec::new();
        for r in records
            .iter()
            .filter(|r| r.phase != super::Phase::Running)
            .skip(keep as usize)
        {
            self.delete(r).await?;
            deleted.push(r.name.clone());
        }
        Ok(deleted)
    }
}

/// Whether `backup` has the form of a backup of `instance`: the prefix, the instance, then
/// only what a timestamp holds (so it can name neither another object nor a path).
pub fn is_backup_of(instance: &str, backup: &str) -> bool {
    backup
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_prefix(instance))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|stamp| {
            !stamp.is_empty() && stamp.chars().all(|c| c.is_ascii_digit() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_backups_form_for_that_instance_is_looked_up() {
        assert!(is_backup_of(
            "team-a",
            "kairship-backup-team-a-20261126-101010-123"
        ));
        for other in [
            "kairship-backup-team-b-20261126-101010-123",
            "kairship-backup-team-a-",
            "kairship-backup-team-a-2026/../../etc",
            "kairship-backup-team-a-x",
            "team-a-kubeconfig",
        ] {
            assert!(!is_backup_of("team-a", other), "{other}");
        }
    }
}
