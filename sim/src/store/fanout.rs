//! A store's live events, fanned out to each watcher through a queue of its own.
//!
//! tokio's broadcast channel allocates its whole ring up front: 4,096 slots were 131 KiB
//! per simulated instance, over half of an idle one's heap, whether anything watched it or
//! not. Here a store with no watchers holds an empty list, and each watcher's queue grows
//! with what it has not read yet, up to the store's watch buffer; a watcher further
//! behind than that is cut (told it lagged once it has read what it was sent), as
//! kube-apiserver ends a watch too slow for its cache.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::Event;

struct Watcher {
    tx: mpsc::Sender<Arc<Event>>,
    missed: Arc<AtomicU64>,
}

pub(super) struct Fanout {
    watchers: Mutex<Vec<Watcher>>,
    capacity: usize,
}

/// Why [`Live::recv`] returned no event.
#[derive(Debug, PartialEq, Eq)]
pub enum LiveError {
    /// Cut for falling behind; the count is at least 1.
    Lagged(u64),
    /// The store is gone.
    Closed,
}

/// One watcher's end.
pub struct Live {
    rx: mpsc::Receiver<Arc<Event>>,
    missed: Arc<AtomicU64>,
}

impl Fanout {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            watchers: Mutex::new(Vec::new()),
            capacity: capacity.max(16),
        }
    }

    pub(super) fn subscribe(&self) -> Live {
        let (tx, rx) = mpsc::channel(self.capacity);
        let missed = Arc::new(AtomicU64::new(0));
        self.watchers.lock().push(Watcher {
            tx,
            missed: missed.clone(),
        });
        Live { rx, missed }
    }

    /// Queues `ev` for every watcher, dropping those gone and cutting those full.
    pub(super) fn send(&self, ev: &Arc<Event>) {
        self.watchers
            .lock()
            .retain(|w| match w.tx.try_send(ev.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.missed.store(1, Ordering::Relaxed);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
    }
}

impl Live {
    /// The next event, in the order the store committed them.
    pub async fn recv(&mut self) -> Result<Arc<Event>, LiveError> {
        match self.rx.recv().await {
            Some(ev) => Ok(ev),
            None => Err(self.ended()),
        }
    }

    /// The next event already queued, if any (`Ok(None)`: none yet).
    pub fn try_recv(&mut self) -> Result<Option<Arc<Event>>, LiveError> {
        match self.rx.try_recv() {
            Ok(ev) => Ok(Some(ev)),
            Err(mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(self.ended()),
        }
    }

    fn ended(&self) -> LiveError {
        match self.missed.load(Ordering::Relaxed) {
            0 => LiveError::Closed,
            n => LiveError::Lagged(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventType, StoredObject};
    use serde_json::json;

    fn event(rv: u64) -> Arc<Event> {
        let v = json!({"metadata": {"name": "a", "namespace": "d"}});
        Arc::new(Event {
            kind: EventType::Added,
            resource: Arc::from("deployments.apps"),
            object: StoredObject::new(v, rv).expect("object"),
            prev: None,
            rv,
        })
    }

    #[tokio::test]
    async fn each_watcher_gets_every_event_in_order() {
        let f = Fanout::new(16);
        let (mut a, mut b) = (f.subscribe(), f.subscribe());
        for rv in 1..=3 {
            f.send(&event(rv));
        }
        for live in [&mut a, &mut b] {
            for rv in 1..=3 {
                assert_eq!(live.recv().await.expect("event").rv, rv);
            }
            assert!(matches!(live.try_recv(), Ok(None)));
        }
    }

    #[tokio::test]
    async fn a_watcher_behind_by_more_than_the_buffer_is_cut_after_what_it_was_sent() {
        let f = Fanout::new(16);
        let mut slow = f.subscribe();
        let mut fast = f.subscribe();
        for rv in 1..=20 {
            f.send(&event(rv));
            assert_eq!(fast.recv().await.expect("event").rv, rv);
        }
        for rv in 1..=16 {
            assert_eq!(slow.recv().await.expect("queued event").rv, rv);
        }
        assert_eq!(slow.recv().await.map(|e| e.rv), Err(LiveError::Lagged(1)));
        assert_eq!(f.watchers.lock().len(), 1, "the cut watcher is forgotten");
    }

    #[tokio::test]
    async fn a_dropped_store_closes_its_watches_and_a_dropped_watch_is_forgotten() {
        let f = Fanout::new(16);
        let gone = f.subscribe();
        let mut live = f.subscribe();
        drop(gone);
        f.send(&event(1));
        assert_eq!(f.watchers.lock().len(), 1);
        drop(f);
        assert_eq!(live.recv().await.expect("queued").rv, 1);
        assert_eq!(live.recv().await.map(|e| e.rv), Err(LiveError::Closed));
    }
}
