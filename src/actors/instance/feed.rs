//! Each cached kind's change feed: the events the reflector applied to the store, fanned
//! out to watches that the proxy serves from the cache. No history is kept: a watch is
//! served from here only when it starts at the feed's current resourceVersion (what a LIST
//! from the cache returned); any other start is passed through to the instance, which has
//! the history.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher;
use tokio::sync::broadcast;

/// How far a cache watcher may fall behind before it is cut (and re-watches).
const BACKLOG: usize = 1024;

#[derive(Clone, Debug)]
pub enum FeedEvent {
    Applied(Arc<DynamicObject>),
    Deleted(Arc<DynamicObject>),
    /// The cache relisted: deletions may have been missed, so cache watches must end.
    Reset,
}

#[derive(Clone)]
pub struct Feed {
    tx: broadcast::Sender<FeedEvent>,
    last_rv: Arc<AtomicU64>,
    /// The highest version seen during a relist, applied when it completes.
    relist_rv: Arc<AtomicU64>,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(BACKLOG).0,
            last_rv: Arc::default(),
            relist_rv: Arc::default(),
        }
    }
}

pub fn rv_of(o: &DynamicObject) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

impl Feed {
    /// Called with every event after the reflector applied it to the store.
    pub fn publish(&self, event: &watcher::Event<DynamicObject>) {
        // Copies are made only for someone watching through the cache.
        let watched = self.tx.receiver_count() > 0;
        let ev = match event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) if !watched => {
                self.last_rv.fetch_max(rv_of(o), Ordering::Relaxed);
                return;
            }
            watcher::Event::Apply(o) => FeedEvent::Applied(Arc::new(o.clone())),
            watcher::Event::Delete(o) => FeedEvent::Deleted(Arc::new(o.clone())),
            watcher::Event::Init => {
                self.relist_rv.store(0, Ordering::Relaxed);
                return;
            }
            watcher::Event::InitApply(o) => {
                self.relist_rv.fetch_max(rv_of(o), Ordering::Relaxed);
                return;
            }
            watcher::Event::InitDone => {
                self.last_rv
                    .fetch_max(self.relist_rv.load(Ordering::Relaxed), Ordering::Relaxed);
                let _ = self.tx.send(FeedEvent::Reset);
                return;
            }
        };
        if let FeedEvent::Applied(o) | FeedEvent::Deleted(o) = &ev {
            self.last_rv.fetch_max(rv_of(o), Ordering::Relaxed);
        }
        // The last receiver may have gone since the check: nothing to do then.
        let _ = self.tx.send(ev);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<FeedEvent> {
        self.tx.subscribe()
    }

    /// The newest resourceVersion the cache reflects for this kind.
    pub fn last_rv(&self) -> u64 {
        self.last_rv.load(Ordering::Relaxed)
    }

    /// Reads the version later without keeping the feed (and its sender) alive, so a
    /// watcher's stream still ends when the cache goes away.
    pub fn version(&self) -> Version {
        Version(self.last_rv.clone())
    }
}

pub struct Version(Arc<AtomicU64>);

impl Version {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, rv: u64) -> DynamicObject {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "resourceVersion": rv.to_string()}}))
        .expect("object")
    }

    #[test]
    fn versions_advance_and_relists_reset_watchers() {
        let feed = Feed::default();
        let mut rx = feed.subscribe();
        feed.publish(&watcher::Event::Init);
        feed.publish(&watcher::Event::InitApply(obj("a", 5)));
        feed.publish(&watcher::Event::InitDone);
        assert_eq!(feed.last_rv(), 5);
        assert!(matches!(rx.try_recv(), Ok(FeedEvent::Reset)));
        feed.publish(&watcher::Event::Apply(obj("b", 9)));
        feed.publish(&watcher::Event::Delete(obj("a", 11)));
        assert_eq!(feed.last_rv(), 11);
        assert!(matches!(rx.try_recv(), Ok(FeedEvent::Applied(o)) if rv_of(&o) == 9));
        assert!(matches!(rx.try_recv(), Ok(FeedEvent::Deleted(o)) if rv_of(&o) == 11));
        // Unwatched, the version still advances (a later watch starts from it).
        drop(rx);
        feed.publish(&watcher::Event::Apply(obj("c", 14)));
        assert_eq!(feed.last_rv(), 14);
    }
}
