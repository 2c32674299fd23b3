//! Backups kept as files under a directory (`--backup-dir`), where the chart mounts a
//! PersistentVolume: `<dir>/<instance>/<backup>.json` holds the record and
//! `<dir>/<instance>/<backup>.jsonl.gz` the data. Each file is written beside its place
//! and renamed into it, so a reader never sees half of one. The directory must exist (a
//! volume that is not mounted is a missing destination, never silently the container's
//! own disk); instances' folders are made as needed. Every call is bounded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::{BackupError, Record};

const RECORD: &str = "json";
const DATA: &str = "jsonl.gz";

#[derive(Clone)]
pub struct Directory {
    dir: PathBuf,
    /// Compressed bytes all backups there may hold together.
    capacity: u64,
    timeout: Duration,
}

impl Directory {
    pub fn new(dir: PathBuf, capacity: u64, timeout: Duration) -> Self {
        Self {
            dir,
            capacity,
            timeout,
        }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(super) fn destination(&self) -> String {
        format!("directory {:?}", self.dir.display().to_string())
    }

    /// `fut`, bounded, its error naming `what`.
    async fn io<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = std::io::Result<T>>,
    ) -> Result<T, BackupError> {
        let storage = |why: String| BackupError::Storage {
            destination: self.destination(),
            why: format!("{what}: {why}"),
        };
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r.map_err(|e| storage(e.to_string())),
            Err(_) => Err(storage(format!("no answer within {:?}", self.timeout))),
        }
    }

    fn file(&self, instance: &str, backup: &str, ext: &str) -> PathBuf {
        self.dir.join(instance).join(format!("{backup}.{ext}"))
    }

    /// Writes `bytes` to `path` through a temporary file renamed into place.
    async fn put(&self, path: &Path, bytes: Vec<u8>) -> Result<(), BackupError> {
        let tmp = path.with_extension("tmp");
        let what = format!("writing {}", path.display());
        self.io(&what, async {
            tokio::fs::write(&tmp, bytes).await?;
            tokio::fs::rename(&tmp, path).await
        })
        .await
    }

    pub async fn create(&self, record: &Record) -> Result<(), BackupError> {
        let what = format!("reading {}", self.dir.display());
        let is_dir = self
            .io(&what, async {
                Ok(tokio::fs::metadata(&self.dir)
                    .await
                    .is_ok_and(|m| m.is_dir()))
            })
            .await?;
        if !is_dir {
            return Err(BackupError::NoDestination {
                destination: format!(
                    "directory {:?} does not exist (--backup-dir: mount a PersistentVolume there)",
                    self.dir.display().to_string()
                ),
            });
        }
        let folder = self.dir.join(&record.instance);
        self.io(
            &format!("making {}", folder.display()),
            tokio::fs::create_dir_all(&folder),
        )
        .await?;
        self.update(record).await
    }

    pub async fn update(&self, record: &Record) -> Result<(), BackupError> {
        let json = serde_json::to_vec(record).map_err(|e| BackupError::Corrupt {
            backup: record.name.clone(),
            why: e.to_string(),
        })?;
        let path = self.file(&record.instance, &record.name, RECORD);
        self.put(&path, json).await
    }

    /// The records of `instance`, as seen now: files that are not a record of it are
    /// passed over.
    pub async fn list(&self, instance: &str) -> Result<Vec<Record>, BackupError> {
        let folder = self.dir.join(instance);
        let what = format!("listing {}", folder.display());
        let names = self
            .io(&what, async {
                let mut names = Vec::new();
                let mut entries = match tokio::fs::read_dir(&folder).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
                    other => other?,
                };
                while let Some(e) = entries.next_entry().await? {
                    names.push(e.file_name().to_string_lossy().into_owned());
                }
                Ok(names)
            })
            .await?;
        let mut records = Vec::new();
        for name in names {
            let Some(backup) = name.strip_suffix(&format!(".{RECORD}")) else {
                continue;
            };
            if !super::is_backup_of(instance, backup) {
                continue;
            }
            if let Some(r) = self.read_record(instance, backup).await? {
                records.push(r);
            }
        }
        Ok(records)
    }

    async fn read_record(
        &self,
        instance: &str,
        backup: &str,
    ) -> Result<Option<Record>, BackupError> {
        let path = self.file(instance, backup, RECORD);
        let what = format!("reading {}", path.display());
        let bytes = self
            .io(&what, async {
                match tokio::fs::read(&path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    other => other.map(Some),
                }
            })
            .await?;
        let now = jiff::Timestamp::now();
        Ok(bytes
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            .filter(|r| r.instance == instance && r.name == backup)
            .map(|r| r.as_seen(now)))
    }

    pub async fn get(&self, instance: &str, backup: &str) -> Result<Record, BackupError> {
        self.read_record(instance, backup)
            .await?
            .ok_or_else(|| BackupError::NotFound {
                instance: instance.to_string(),
                backup: backup.to_string(),
            })
    }

    /// Compressed bytes the data files under the directory hold.
    pub(super) async fn used_bytes(&self) -> Result<u64, BackupError> {
        let what = format!("measuring {}", self.dir.display());
        self.io(&what, async {
            let mut used = 0u64;
            let mut folders = tokio::fs::read_dir(&self.dir).await?;
            while let Some(folder) = folders.next_entry().await? {
                if !folder.file_type().await?.is_dir() {
                    continue;
                }
                let mut files = tokio::fs::read_dir(folder.path()).await?;
                while let Some(f) = files.next_entry().await? {
                    if f.file_name()
                        .to_string_lossy()
                        .ends_with(&format!(".{DATA}"))
                    {
                        used += f.metadata().await?.len();
                    }
                }
            }
            Ok(used)
        })
        .await
    }

    pub async fn write_data(&self, record: &Record, data: &[u8]) -> Result<u32, BackupError> {
        let path = self.file(&record.instance, &record.name, DATA);
        self.put(&path, data.to_vec()).await?;
        Ok(1)
    }

    pub async fn read_data(&self, record: &Record) -> Result<Vec<u8>, BackupError> {
        let path = self.file(&record.instance, &record.name, DATA);
        let what = format!("reading {}", path.display());
        let data = self
            .io(&what, async {
                match tokio::fs::read(&path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    other => other.map(Some),
                }
            })
            .await?;
        data.ok_or_else(|| BackupError::Corrupt {
            backup: record.name.clone(),
            why: format!("its data {} is missing", path.display()),
        })
    }

    pub async fn delete(&self, record: &Record) -> Result<(), BackupError> {
        for ext in [DATA, RECORD] {
            let path = self.file(&record.instance, &record.name, ext);
            let what = format!("deleting {}", path.display());
            self.io(&what, async {
                match tokio::fs::remove_file(&path).await {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    other => other,
                }
            })
            .await?;
        }
        Ok(())
    }
}
