//! Backups kept as Secrets in the host's backup namespace (`--backup-namespace`,
//! Kairship's own by default), which every replica reads, the host's RBAC guards and its
//! etcd keeps. Each backup is one Secret holding its record (type `kairship.io/backup`,
//! labelled with its instance) and the compressed data in parts of at most `PART_BYTES`
//! (type `kairship.io/backup-data`), each owned by the first so nothing outlives it.
//! Names are built here from the instance and the time, never taken from a request:
//! Kairship reads, writes and deletes no other Secret through this store.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::super::{BackupError, Record};
use crate::host::error::{bounded, gone_is_fine, HostError};

const RECORD_TYPE: &str = "kairship.io/backup";
const DATA_TYPE: &str = "kairship.io/backup-data";
/// The label naming the instance a backup is of.
pub const OF_LABEL: &str = "kairship.io/backup-of";
const PART_LABEL: &str = "kairship.io/backup";
const RECORD_ANNOTATION: &str = "kairship.io/backup-record";
const DATA_KEY: &str = "objects.jsonl.gz";
/// A Secret holds at most 1 MiB; its parts stay well under.
pub const PART_BYTES: usize = 700 * 1024;

#[derive(Clone)]
pub struct Secrets {
    host: kube::Client,
    namespace: String,
    /// Compressed bytes all backups in the namespace may hold together.
    capacity: u64,
    timeout: Duration,
}

impl Secrets {
    pub fn new(host: kube::Client, namespace: String, capacity: u64, timeout: Duration) -> Self {
        Self {
            host,
            namespace,
            capacity,
            timeout,
        }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Where the backups are, for errors.
    pub(super) fn destination(&self) -> String {
        format!("namespace {:?}", self.namespace)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.host.clone(), &self.namespace)
    }

    async fn call<T>(
        &self,
        what: impl Into<String>,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, HostError> {
        bounded(what, self.timeout, fut).await
    }

    /// Writes a new backup's record; a missing namespace is a missing destination.
    pub async fn create(&self, record: &Record) -> Result<(), BackupError> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(record.name.clone()),
                labels: Some(labels(OF_LABEL, &record.instance)),
                annotations: Some(annotation(record)?),
                ..Default::default()
            },
            type_: Some(RECORD_TYPE.into()),
            ..Default::default()
        };
        let what = format!("backup Secret {}/{}", self.namespace, record.name);
        let r = self
            .call(what, self.secrets().create(&PostParams::default(), &secret))
            .await;
        match r {
            Err(e) if e.code() == Some(404) => Err(BackupError::NoDestination {
                destination: format!(
                    "namespace {:?} does not exist in the host (--backup-namespace)",
                    self.namespace
                ),
            }),
            other => other.map(|_| ()).map_err(BackupError::Host),
        }
    }

    /// Writes a backup's record as it stands now.
    pub async fn update(&self, record: &Record) -> Result<(), BackupError> {
        let patch = json!({"metadata": {"annotations": annotation(record)?}});
        let what = format!("backup Secret {}/{}", self.namespace, record.name);
        self.call(
            what,
            self.secrets()
                .patch(&record.name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await?;
        Ok(())
    }

    /// The backups of `instance`, as seen now.
    pub async fn list(&self, instance: &str) -> Result<Vec<Record>, BackupError> {
        let lp = ListParams::default().labels(&format!("{OF_LABEL}={instance}"));
        let what = format!("backups of {instance} in namespace {}", self.namespace);
        let list = match self.call(what, self.secrets().list(&lp)).await {
            Err(e) if e.code() == Some(404) => return Ok(Vec::new()),
            other => other?,
        };
        let now = jiff::Timestamp::now();
        Ok(list
            .items
            .iter()
            .filter_map(|s| record_of(s, instance))
            .map(|r| r.as_seen(now))
            .collect())
    }

    /// One backup of `instance` (a name of a backup's form): a Secret of another instance,
    /// or not a backup, is not found.
    pub async fn get(&self, instance: &str, backup: &str) -> Result<Record, BackupError> {
        let not_found = || BackupError::NotFound {
            instance: instance.to_string(),
            backup: backup.to_string(),
        };
        let what = format!("backup Secret {}/{backup}", self.namespace);
        let secret = self
            .call(what, self.secrets().get_opt(backup))
            .await?
            .ok_or_else(not_found)?;
        record_of(&secret, instance)
            .map(|r| r.as_seen(jiff::Timestamp::now()))
            .ok_or_else(not_found)
    }

    /// Compressed bytes every backup in the namespace holds.
    pub(super) async fn used_bytes(&self) -> Result<u64, BackupError> {
        let lp = ListParams::default().labels(OF_LABEL);
        let what = format!("backups in namespace {}", self.namespace);
        let list = self.call(what, self.secrets().list(&lp)).await?;
        Ok(list
            .items
            .iter()
            .filter(|s| s.type_.as_deref() == Some(RECORD_TYPE))
            .filter_map(parse)
            .map(|r| r.size_bytes)
            .sum())
    }

    /// Stores `data` for `record` in parts owned by the record's Secret; returns how many.
    pub async fn write_data(&self, record: &Record, data: &[u8]) -> Result<u32, BackupError> {
        let what = format!("backup Secret {}/{}", self.namespace, record.name);
        let owner = self.call(&what, self.secrets().get(&record.name)).await?;
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "Secret".into(),
            name: record.name.clone(),
            uid: owner.metadata.uid.unwrap_or_default(),
            ..Default::default()
        };
        let mut parts = 0u32;
        for chunk in data.chunks(PART_BYTES) {
            let name = part_name(&record.name, parts);
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(labels(PART_LABEL, &record.name)),
                    owner_references: Some(vec![owner.clone()]),
                    ..Default::default()
                },
                type_: Some(DATA_TYPE.into()),
                data: Some(BTreeMap::from([(
                    DATA_KEY.to_string(),
                    ByteString(chunk.to_vec()),
                )])),
                ..Default::default()
            };
            let what = format!("backup Secret {}/{name}", self.namespace);
            self.call(what, self.secrets().create(&PostParams::default(), &secret))
                .await?;
            parts += 1;
        }
        Ok(parts)
    }

    /// The data of a completed backup, its parts joined.
    pub async fn read_data(&self, record: &Record) -> Result<Vec<u8>, BackupError> {
        let mut data = Vec::new();
        for i in 0..record.parts {
            let name = part_name(&record.name, i);
            let what = format!("backup Secret {}/{name}", self.namespace);
            let secret = self.call(what, self.secrets().get_opt(&name)).await?;
            let part = secret
                .filter(|s| s.type_.as_deref() == Some(DATA_TYPE))
                .and_then(|s| s.data)
                .and_then(|mut d| d.remove(DATA_KEY))
                .ok_or_else(|| BackupError::Corrupt {
                    backup: record.name.clone(),
                    why: format!("its part {name} is missing"),
                })?;
            data.extend_from_slice(&part.0);
        }
        Ok(data)
    }

    /// Deletes a backup: its parts, then its record.
    pub async fn delete(&self, record: &Record) -> Result<(), BackupError> {
        let lp = ListParams::default().labels(&format!("{PART_LABEL}={}", record.name));
        let what = format!("parts of backup {}", record.name);
        let parts = self.call(what, self.secrets().list(&lp)).await?;
        for part in parts.items {
            let name = part.metadata.name.unwrap_or_default();
            if part.type_.as_deref() != Some(DATA_TYPE) {
                continue;
            }
            let what = format!("backup Secret {}/{name}", self.namespace);
            gone_is_fine(
                self.call(what, self.secrets().delete(&name, &DeleteParams::default()))
                    .await
                    .map(|_| ()),
            )?;
        }
        let what = format!("backup Secret {}/{}", self.namespace, record.name);
        gone_is_fine(
            self.call(
                what,
                self.secrets()
                    .delete(&record.name, &DeleteParams::default()),
            )
            .await
            .map(|_| ()),
        )?;
        Ok(())
    }
}

fn part_name(backup: &str, i: u32) -> String {
    format!("{backup}-{i}")
}

fn labels(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (key.to_string(), value.to_string()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "kairship".to_string(),
        ),
    ])
}

fn annotation(record: &Record) -> Result<BTreeMap<String, String>, BackupError> {
    let json = serde_json::to_string(record).map_err(|e| BackupError::Corrupt {
        backup: record.name.clone(),
        why: e.to_string(),
    })?;
    Ok(BTreeMap::from([(RECORD_ANNOTATION.to_string(), json)]))
}

fn parse(secret: &Secret) -> Option<Record> {
    let json = secret
        .metadata
        .annotations
        .as_ref()?
        .get(RECORD_ANNOTATION)?;
    serde_json::from_str(json).ok()
}

/// The record a Secret holds, if it is a backup record of `instance`.
fn record_of(secret: &Secret, instance: &str) -> Option<Record> {
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OF_LABEL))
        .is_some_and(|i| i == instance);
    if !labelled || secret.type_.as_deref() != Some(RECORD_TYPE) {
        return None;
    }
    parse(secret)
        .filter(|r| r.instance == instance && Some(&r.name) == secret.metadata.name.as_ref())
}
