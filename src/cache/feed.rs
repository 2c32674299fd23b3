//! Each cached kind's change feed: the changes the store applied, fanned out to watches
//! that the proxy serves from the cache. No history is kept: a watch is served from here
//! only when it starts at the feed's current resourceVersion (what a LIST from the cache
//! returned); any other start is passed through to the instance, which has the history.
//!
//! A change is shared by every watcher, and so is each form of it a watcher writes: the
//! JSON event line and the Table event line of each event type are encoded once, by the
//! first watcher that needs it (as kube-apiserver's cacher serializes an event once for
//! all its watchers).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kairship_wire::table::Column;
use serde_json::json;
use tokio::sync::broadcast;

use super::object::CachedObject;

pub use kairship_wire::watch::{line, EventType};

/// How far a cache watcher may fall behind before it is cut (and re-watches).
const BACKLOG: usize = 1024;

/// One change to one object, as every watcher of the kind sees it.
pub struct Change {
    pub object: Arc<CachedObject>,
    /// The object as it was before (what watchers knew of it); `None` if it is new.
    pub prev: Option<Arc<CachedObject>>,
    pub deleted: bool,
    json: [OnceLock<Bytes>; 3],
    /// Per event type: without column definitions, then with them (a watch's first).
    table: [OnceLock<Bytes>; 6],
}

impl Change {
    pub fn new(object: Arc<CachedObject>, prev: Option<Arc<CachedObject>>, deleted: bool) -> Self {
        Self {
            object,
            prev,
            deleted,
            json: Default::default(),
            table: Default::default(),
        }
    }

    /// The JSON event line of this change as `kind`.
    pub fn json_line(&self, kind: EventType) -> Bytes {
        self.json[kind.index()]
            .get_or_init(|| line(kind.as_str(), self.object.json()))
            .clone()
    }

    /// The Table event line of this change as `kind`, printed with `columns` (the kind's,
    /// fixed for the cache's life).
    pub fn table_line(&self, kind: EventType, columns: &[Column], with_columns: bool) -> Bytes {
        self.table[kind.index() * 2 + usize::from(with_columns)]
            .get_or_init(|| table_line(kind, &self.object, columns, with_columns))
            .clone()
    }
}

/// A watch event whose object is a one-row Table, as kube-apiserver sends to kubectl.
pub fn table_line(
    kind: EventType,
    object: &CachedObject,
    columns: &[Column],
    with_columns: bool,
) -> Bytes {
    let meta = json!({"resourceVersion": object.resource_version().to_string()});
    let table = kairship_wire::table::write(
        columns,
        &[object.row_and_metadata(columns)],
        with_columns,
        meta,
    );
    line(kind.as_str(), &table)
}

#[derive(Clone, Debug)]
pub enum FeedEvent {
    Change(Arc<Change>),
    /// The cache relisted: deletions may have been missed, so cache watches must end.
    Reset,
}

impl std::fmt::Debug for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Change")
            .field("object", &self.object)
            .field("deleted", &self.deleted)
            .finish()
    }
}

#[derive(Clone)]
pub struct Feed {
    tx: broadcast::Sender<FeedEvent>,
    last_rv: Arc<AtomicU64>,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(BACKLOG).0,
            last_rv: Arc::default(),
        }
    }
}

impl Feed {
    /// Called by the store with every change it applied, under its write lock.
    pub(crate) fn publish(
        &self,
        object: &Arc<CachedObject>,
        prev: Option<&Arc<CachedObject>>,
        deleted: bool,
    ) {
        self.last_rv
            .fetch_max(object.resource_version(), Ordering::Relaxed);
        // Nothing is made for a kind nobody watches through the cache.
        if self.tx.receiver_count() > 0 {
            let change = Change::new(object.clone(), prev.cloned(), deleted);
            // The last receiver may have gone since the check: nothing to do then.
            let _ = self.tx.send(FeedEvent::Change(Arc::new(change)));
        }
    }

    /// A relist completed with `newest` the highest version it listed.
    pub(crate) fn relisted(&self, newest: u64) {
        self.last_rv.fetch_max(newest, Ordering::Relaxed);
        let _ = self.tx.send(FeedEvent::Reset);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<FeedEvent> {
        self.tx.subscribe()
    }

    /// The newest resourceVersion the cache reflects for this kind (deletions included,
    /// which leave no object behind).
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
