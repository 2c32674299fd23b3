//! Taking a backup: every resource the instance serves that `archive` keeps, listed page by
//! page through its karmada-apiserver, compressed and stored. It runs in a task of its own
//! once its record is written, writing its progress to the record every `HEARTBEAT`; any
//! failure (a resource that cannot be listed, the destination full) fails the backup
//! with the reason, never a partial backup marked Completed.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{verbs, Discovery, Scope};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument;

use super::archive::{self, Entry, Resource};
use super::record::HEARTBEAT;
use super::{BackupError, Phase, Record, Store};

/// Objects listed per page.
const PAGE: u32 = 500;

/// A backup to take.
pub struct Request {
    pub instance: String,
    pub karmada_version: String,
    /// The caller, or Kairship for the schedule.
    pub requested_by: String,
    pub scheduled: bool,
    /// Backups of the instance to keep once this one completes (`None`: all).
    pub keep: Option<u32>,
}

/// What was read.
struct Taken {
    data: Vec<u8>,
    objects: u64,
    resources: BTreeMap<String, u64>,
}

/// Starts a backup of the instance `client` reaches (acting as whoever asked): its
/// record is written before this returns, then the backup runs on.
pub async fn start(
    store: Store,
    client: kube::Client,
    req: Request,
    call_timeout: Duration,
) -> Result<Record, BackupError> {
    if let Some(running) = store
        .list(&req.instance)
        .await?
        .into_iter()
        .find(|r| r.phase == Phase::Running)
    {
        return Err(BackupError::Running {
            instance: req.instance,
            backup: running.name,
        });
    }
    let mut record = Record::start(
        &req.instance,
        jiff::Timestamp::now(),
        &req.requested_by,
        req.scheduled,
    );
    record.karmada_version = req.karmada_version.clone();
    store.create(&record).await?;
    let span = tracing::info_span!("backup", instance = %req.instance, backup = %record.name);
    let started = record.clone();
    tokio::spawn(
        async move {
            let keep = req.keep;
            let done = run(&store, &client, record, call_timeout).await;
            tracing::info!(phase = ?done.phase, message = %done.message, "backup finished");
            if let (Phase::Completed, Some(keep)) = (done.phase, keep) {
                match store.prune(&done.instance, keep).await {
                    Ok(gone) if !gone.is_empty() => {
                        tracing::info!(?gone, keep, "older backups deleted")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("deleting older backups: {e}"),
                }
            }
        }
        .instrument(span),
    );
    Ok(started)
}

/// Reads, stores and finishes `record`; returns it as last written.
async fn run(
    store: &Store,
    client: &kube::Client,
    mut record: Record,
    timeout: Duration,
) -> Record {
    let (progress, seen) = watch::channel(String::from("discovering resources"));
    let work = read_all(client, timeout, progress);
    tokio::pin!(work);
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.tick().await;
    let taken = loop {
        tokio::select! {
            r = &mut work => break r,
            _ = beat.tick() => {
                record.message = seen.borrow().clone();
                record.heartbeat = jiff::Timestamp::now().to_string();
                if let Err(e) = store.update(&record).await {
                    tracing::warn!("writing the backup's progress: {e}");
                }
            }
        }
    };
    let stored = match taken {
        Ok(t) => store
            .write_data(&record, &t.data)
            .await
            .map(|parts| (t, parts)),
        Err(e) => Err(e),
    };
    let now = jiff::Timestamp::now().to_string();
    record.heartbeat = now.clone();
    record.completed = now;
    match stored {
        Ok((t, parts)) => {
            record.phase = Phase::Completed;
            record.message = format!(
                "{} objects of {} resources, {} bytes compressed",
                t.objects,
                t.resources.len(),
                t.data.len()
            );
            record.size_bytes = t.data.len() as u64;
            record.objects = t.objects;
            record.resources = t.resources;
            record.parts = parts;
        }
        Err(e) => {
            record.phase = Phase::Failed;
            record.message = e.to_string();
        }
    }
    // A failed final write leaves the record Running; it reads as abandoned later.
    if let Err(e) = store.update(&record).await {
        tracing::warn!("writing the backup's outcome: {e}");
    }
    record
}

async fn read_all(
    client: &kube::Client,
    timeout: Duration,
    progress: watch::Sender<String>,
) -> Result<Taken, BackupError> {
    let failed = |why: String| BackupError::Instance(why);
    let discovery = tokio::time::timeout(timeout * 3, Discovery::new(client.clone()).run())
        .await
        .map_err(|_| {
            failed(format!(
                "discovering its resources took over {:?}",
                timeout * 3
            ))
        })?
        .map_err(|e| failed(format!("discovering its resources: {e}")))?;
    let resources: Vec<Resource> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .filter(|(_, caps)| caps.supports_operation(verbs::LIST))
        .filter(|(_, caps)| caps.supports_operation(verbs::CREATE))
        .map(|(ar, caps)| Resource::of(&ar, caps.scope == Scope::Namespaced))
        .filter(Resource::backed_up)
        .collect();
    let mut writer = archive::Writer::default();
    let (mut objects, mut counts) = (0u64, BTreeMap::new());
    for (i, resource) in resources.iter().enumerate() {
        progress.send_replace(format!(
            "read {i} of {} resources ({objects} objects); reading {}",
            resources.len(),
            resource.key()
        ));
        let ar = resource.api_resource();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = tokio::time::timeout(timeout, api.list(&lp))
                .await
                .map_err(|_| failed(format!("listing {} took over {timeout:?}", resource.key())))?
                .map_err(|e| failed(format!("listing {}: {e}", resource.key())))?;
            for item in page.items {
                let mut object = serde_json::to_value(&item)
                    .map_err(|e| failed(format!("encoding a {}: {e}", resource.kind)))?;
                object["apiVersion"] = Value::String(ar.api_version.clone());
                object["kind"] = Value::String(ar.kind.clone());
                if !archive::keeps(resource, &object) {
                    continue;
                }
                let entry = Entry {
                    resource: resource.clone(),
                    object: archive::portable(object),
                };
                writer
                    .push(&entry)
                    .map_err(|e| failed(format!("compressing: {e}")))?;
                objects += 1;
                *counts.entry(resource.key()).or_insert(0u64) += 1;
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
    }
    let data = writer
        .finish()
        .map_err(|e| failed(format!("compressing: {e}")))?;
    Ok(Taken {
        data,
        objects,
        resources: counts,
    })
}
