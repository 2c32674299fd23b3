//! Restoring a backup into an instance, as the caller: its objects created in `archive`'s
//! order, each resource's wave in parallel (bounded), an object that exists left as it is
//! (a restore never overwrites), and what the instance cannot take yet (a custom kind
//! whose CRD was just created, a namespace still being made) retried a few times with
//! backoff. Each failure is reported with the instance's reason; the others go on.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};

use super::archive::{self, Entry};

/// Creates in flight at once.
const CONCURRENCY: usize = 8;
/// Waits before each retry of what the instance could not find yet.
const RETRIES: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];
/// Failures reported by name.
const MAX_FAILURES_NAMED: usize = 50;

#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub created: u64,
    pub existing: u64,
    pub failed: u64,
    pub failures: Vec<String>,
    pub resources: BTreeMap<String, u64>,
}

enum Written {
    Created,
    Existing,
    /// The instance does not serve the kind or the namespace yet: worth a retry.
    NotYet(String),
    Failed(String),
}

pub async fn restore(client: &kube::Client, entries: Vec<Entry>, timeout: Duration) -> Outcome {
    let mut waves: BTreeMap<u8, Vec<Entry>> = BTreeMap::new();
    for e in entries {
        waves.entry(e.resource.rank()).or_default().push(e);
    }
    let mut out = Outcome::default();
    for (_, mut wave) in waves {
        for wait in std::iter::once(None).chain(RETRIES.iter().map(Some)) {
            if let Some(wait) = wait {
                if wave.is_empty() {
                    break;
                }
                tokio::time::sleep(*wait).await;
            }
            let results: Vec<(Entry, Written)> = futures::stream::iter(wave)
                .map(|e| async move {
                    let w = create(client, &e, timeout).await;
                    (e, w)
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            wave = Vec::new();
            for (e, w) in results {
                match w {
                    Written::Created => {
                        out.created += 1;
                        *out.resources.entry(e.resource.key()).or_insert(0) += 1;
                    }
                    Written::Existing => out.existing += 1,
                    Written::NotYet(_) if wait != RETRIES.last() => wave.push(e),
                    Written::NotYet(why) | Written::Failed(why) => out.fail(&e, why),
                }
            }
        }
    }
    out
}

impl Outcome {
    fn fail(&mut self, e: &Entry, why: String) {
        self.failed += 1;
        if self.failures.len() < MAX_FAILURES_NAMED {
            self.failures
                .push(format!("{} {}: {why}", e.resource.key(), name_of(e)));
        }
    }
}

fn name_of(e: &Entry) -> String {
    let meta = &e.object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    match meta["namespace"].as_str() {
        Some(ns) if e.resource.namespaced => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

async fn create(client: &kube::Client, e: &Entry, timeout: Duration) -> Written {
    let object: DynamicObject = match serde_json::from_value(archive::portable(e.object.clone())) {
        Ok(o) => o,
        Err(err) => return Written::Failed(format!("not an object: {err}")),
    };
    let ar = e.resource.api_resource();
    let api: Api<DynamicObject> = match (e.resource.namespaced, &object.metadata.namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        (true, None) => return Written::Failed("no namespace".into()),
        (false, _) => Api::all_with(client.clone(), &ar),
    };
    match tokio::time::timeout(timeout, api.create(&PostParams::default(), &object)).await {
        Err(_) => Written::Failed(format!("the instance did not answer within {timeout:?}")),
        Ok(Ok(_)) => Written::Created,
        Ok(Err(kube::Error::Api(s))) if s.code == 409 => Written::Existing,
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Written::NotYet(s.message),
        Ok(Err(kube::Error::Api(s))) => Written::Failed(s.message),
        Ok(Err(err)) => Written::Failed(err.to_string()),
    }
}
