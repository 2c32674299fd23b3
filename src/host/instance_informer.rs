//! The one watch of Instance objects in a process, shared by the instance manager (which
//! starts and stops an actor per Instance) and the API (which finds instances by name):
//! a kube reflector store for lookups, and its events fanned out to subscribers. A
//! subscriber that starts late or falls behind catches up from the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use tokio::sync::broadcast;
use tracing::warn;

use crate::crd::Instance;

/// What subscribers hear.
#[derive(Debug, Clone)]
pub enum InstanceEvent {
    Applied(Arc<Instance>),
    Deleted(String),
    /// A list completed: these are every Instance there is (the others are gone).
    Listed(Vec<String>),
}

/// Events buffered per subscriber; one that falls further behind resynchronizes from the
/// store.
const BACKLOG: usize = 4096;

#[derive(Clone)]
pub struct InstanceInformer {
    store: Store<Instance>,
    events: broadcast::Sender<InstanceEvent>,
    listed: Arc<AtomicBool>,
    _task: Arc<AbortOnDrop>,
}

/// A task that ends with the last clone of what holds it.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl InstanceInformer {
    /// Starts watching the host's Instances (relisting with backoff on errors).
    pub fn start(host: &kube::Client) -> Self {
        let api: Api<Instance> = Api::all(host.clone());
        let (store, writer) = reflector::store();
        let (events, _) = broadcast::channel(BACKLOG);
        let listed = Arc::new(AtomicBool::new(false));
        let (tx, done) = (events.clone(), listed.clone());
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut seen: Vec<String> = Vec::new();
            while let Some(ev) = stream.next().await {
                let event = match ev {
                    Ok(watcher::Event::Apply(i)) => InstanceEvent::Applied(Arc::new(i)),
                    Ok(watcher::Event::InitApply(i)) => {
                        seen.push(i.metadata.name.clone().unwrap_or_default());
                        InstanceEvent::Applied(Arc::new(i))
                    }
                    Ok(watcher::Event::Delete(i)) => {
                        InstanceEvent::Deleted(i.metadata.name.unwrap_or_default())
                    }
                    Ok(watcher::Event::Init) => {
                        seen.clear();
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
                        done.store(true, Ordering::Relaxed);
                        InstanceEvent::Listed(std::mem::take(&mut seen))
                    }
                    Err(e) => {
                        warn!(error = %e, "watching Instances failed; retrying with backoff");
                        continue;
                    }
                };
                // No subscriber yet is fine: a late one starts from the store.
                let _ = tx.send(event);
            }
        });
        Self {
            store,
            events,
            listed,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The Instances now (empty until the first list).
    pub fn store(&self) -> &Store<Instance> {
        &self.store
    }

    /// Whether the first list completed.
    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::Relaxed)
    }

    /// Every event from now on, and (when the first list already completed) what the
    /// store holds as if it had just been listed, so a subscriber misses nothing.
    pub fn subscribe(&self) -> Subscription {
        let events = self.events.subscribe();
        let catch_up = self.is_listed().then(|| self.snapshot());
        Subscription {
            events,
            catch_up,
            informer: self.clone(),
        }
    }

    fn snapshot(&self) -> Vec<InstanceEvent> {
        let all = self.store.state();
        let names = all
            .iter()
            .map(|i| i.metadata.name.clone().unwrap_or_default())
            .collect();
        all.into_iter()
            .map(InstanceEvent::Applied)
            .chain(std::iter::once(InstanceEvent::Listed(names)))
            .collect()
    }
}

pub struct Subscription {
    events: broadcast::Receiver<InstanceEvent>,
    catch_up: Option<Vec<InstanceEvent>>,
    informer: InstanceInformer,
}

impl Subscription {
    /// The next events (several when catching up); `None` once the informer is gone.
    pub async fn next(&mut self) -> Option<Vec<InstanceEvent>> {
        if let Some(batch) = self.catch_up.take() {
            return Some(batch);
        }
        match self.events.recv().await {
            Ok(e) => Some(vec![e]),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                warn!(
                    missed,
                    "fell behind the Instance watch; resynchronizing from its store"
                );
                Some(self.informer.snapshot())
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}
