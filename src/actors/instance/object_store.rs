//! One kind's cached objects, in the order a LIST returns them (namespace, then name), fed
//! by the kind's watch and read by the API. Each object is held once (`CachedObject`);
//! the map's keys share its name and an interned namespace. Changes are published to the
//! kind's feed under the same lock that applies them, so a watch that starts from a
//! snapshot sees every later change exactly once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kube::api::DynamicObject;
use kube::runtime::watcher;
use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};

use super::cached_object::CachedObject;
use super::feed::{Feed, FeedEvent};

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    namespace: Option<Arc<str>>,
    name: Arc<str>,
}

impl Key {
    fn of(o: &CachedObject) -> Self {
        Self {
            namespace: o.namespace_arc().cloned(),
            name: o.name_arc().clone(),
        }
    }
}

type Objects = BTreeMap<Key, Arc<CachedObject>>;

#[derive(Default)]
struct State {
    objects: Objects,
    /// A relist in progress: served from `objects` until it completes.
    relist: Option<Objects>,
    /// Namespace names, shared by every object in them.
    namespaces: HashSet<Arc<str>>,
}

struct Inner {
    state: RwLock<State>,
    feed: Feed,
    ready: watch::Sender<bool>,
}

/// A kind's objects (cheap to clone: a handle).
#[derive(Clone)]
pub struct ObjectStore(Arc<Inner>);

impl Default for ObjectStore {
    fn default() -> Self {
        Self(Arc::new(Inner {
            state: RwLock::default(),
            feed: Feed::default(),
            ready: watch::channel(false).0,
        }))
    }
}

/// What [`ObjectStore::select`] found.
pub struct Selected {
    pub objects: Vec<Arc<CachedObject>>,
    /// Accepted objects past the limit.
    pub remaining: usize,
    pub version: u64,
}

/// A watch's start: the objects now, the feed from right after them, and their version.
pub struct Subscription {
    pub objects: Vec<Arc<CachedObject>>,
    pub changes: broadcast::Receiver<FeedEvent>,
    pub version: u64,
}

impl ObjectStore {
    /// Applies one event of the kind's watch (objects carry apiVersion and kind).
    pub fn apply(&self, event: watcher::Event<DynamicObject>) {
        let mut state = self.0.state.write();
        match event {
            watcher::Event::Init => state.relist = Some(Objects::new()),
            watcher::Event::InitApply(o) => {
                let object = state.cached(&o);
                if let Some(relist) = state.relist.as_mut() {
                    relist.insert(Key::of(&object), object);
                }
            }
            watcher::Event::InitDone => {
                if let Some(listed) = state.relist.take() {
                    state.objects = listed;
                }
                let newest = state
                    .objects
                    .values()
                    .map(|o| o.resource_version())
                    .max()
                    .unwrap_or(0);
                // Namespaces no object uses any more are forgotten at each relist.
                let used: HashSet<Arc<str>> = state
                    .objects
                    .keys()
                    .filter_map(|k| k.namespace.clone())
                    .collect();
                state.namespaces = used;
                self.0.feed.relisted(newest);
                self.0.ready.send_replace(true);
            }
            watcher::Event::Apply(o) => {
                let object = state.cached(&o);
                let prev = state.objects.insert(Key::of(&object), object.clone());
                self.0.feed.publish(&object, prev.as_ref(), false);
            }
            watcher::Event::Delete(o) => {
                let object = state.cached(&o);
                let prev = state.objects.remove(&Key::of(&object));
                self.0.feed.publish(&object, prev.as_ref(), true);
            }
        }
    }

    /// Every object, in LIST order (a snapshot: the lock is not held while it is read).
    pub fn state(&self) -> Vec<Arc<CachedObject>> {
        self.0.state.read().objects.values().cloned().collect()
    }

    /// The objects after `after` (a LIST position: namespace, empty for cluster-scoped
    /// kinds, and name) that `wanted` accepts, up to `limit`, with how many more it accepts
    /// and the version they are all at. One pass under the read lock: a selective LIST
    /// touches each object once and clones only what it returns.
    pub fn select(
        &self,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
        mut wanted: impl FnMut(&CachedObject) -> bool,
    ) -> Selected {
        let state = self.0.state.read();
        let range = match after {
            None => state.objects.range(..),
            Some((ns, name)) => {
                let key = Key {
                    namespace: (!ns.is_empty()).then(|| Arc::from(ns)),
                    name: Arc::from(name),
                };
                state
                    .objects
                    .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            }
        };
        let mut out = Selected {
            objects: Vec::new(),
            remaining: 0,
            // Read under the lock that publishes: no object newer than it is in the map.
            version: self.0.feed.last_rv(),
        };
        for o in range.map(|(_, o)| o).filter(|o| wanted(o)) {
            if limit.is_some_and(|l| out.objects.len() >= l) {
                out.remaining += 1;
            } else {
                out.objects.push(o.clone());
            }
        }
        out
    }

    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<CachedObject>> {
        let key = Key {
            namespace: namespace.map(Arc::from),
            name: Arc::from(name),
        };
        self.0.state.read().objects.get(&key).cloned()
    }

    pub fn len(&self) -> usize {
        self.0.state.read().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The namespaces holding objects of the kind, in order.
    pub fn namespaces(&self) -> Vec<String> {
        let state = self.0.state.read();
        let mut out: Vec<String> = Vec::new();
        // Keys are ordered by namespace first.
        for ns in state.objects.keys().filter_map(|k| k.namespace.as_deref()) {
            if out.last().map(String::as_str) != Some(ns) {
                out.push(ns.to_string());
            }
        }
        out
    }

    pub fn feed(&self) -> &Feed {
        &self.0.feed
    }

    /// The objects now and every change after them, with nothing between the two.
    pub fn subscribe(&self) -> Subscription {
        let state = self.0.state.read();
        Subscription {
            changes: self.0.feed.subscribe(),
            version: self.0.feed.last_rv(),
            objects: state.objects.values().cloned().collect(),
        }
    }

    /// Resolves once the first list completed.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.0.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Bytes held for the objects (their own, not the map's), for the memory figures.
    pub fn kept_bytes(&self) -> usize {
        let state = self.0.state.read();
        state.objects.values().map(|o| o.kept_bytes()).sum()
    }
}

impl State {
    fn cached(&mut self, o: &DynamicObject) -> Arc<CachedObject> {
        let namespace = o.metadata.namespace.as_deref().map(|ns| {
            if let Some(shared) = self.namespaces.get(ns) {
                return shared.clone();
            }
            let shared: Arc<str> = Arc::from(ns);
            self.namespaces.insert(shared.clone());
            shared
        });
        Arc::new(CachedObject::new(o, namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::instance::feed::EventType;

    fn obj(ns: &str, name: &str, rv: u64) -> DynamicObject {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string()}}))
        .expect("object")
    }

    #[test]
    fn relists_replace_the_objects_and_reset_watchers() {
        let store = ObjectStore::default();
        store.apply(watcher::Event::Init);
        store.apply(watcher::Event::InitApply(obj("b", "x", 5)));
        store.apply(watcher::Event::InitApply(obj("a", "y", 3)));
        assert!(
            store.is_empty(),
            "served from the old objects until the list completes"
        );
        store.apply(watcher::Event::InitDone);
        let names: Vec<_> = store
            .state()
            .iter()
            .map(|o| (o.namespace().map(String::from), o.name().to_string()))
            .collect();
        assert_eq!(
            names,
            [
                (Some("a".to_string()), "y".to_string()),
                (Some("b".to_string()), "x".to_string())
            ]
        );
        assert_eq!(store.feed().last_rv(), 5);
        let mut sub = store.subscribe();
        store.apply(watcher::Event::Init);
        store.apply(watcher::Event::InitDone);
        assert!(store.is_empty());
        assert!(matches!(sub.changes.try_recv(), Ok(FeedEvent::Reset)));
    }

    #[test]
    fn changes_carry_what_watchers_knew_and_share_their_lines() {
        let store = ObjectStore::default();
        store.apply(watcher::Event::Init);
        store.apply(watcher::Event::InitDone);
        let mut sub = store.subscribe();
        store.apply(watcher::Event::Apply(obj("a", "x", 7)));
        store.apply(watcher::Event::Apply(obj("a", "x", 9)));
        store.apply(watcher::Event::Delete(obj("a", "x", 11)));
        let Ok(FeedEvent::Change(added)) = sub.changes.try_recv() else {
            panic!("a change")
        };
        assert!(added.prev.is_none() && !added.deleted);
        let Ok(FeedEvent::Change(modified)) = sub.changes.try_recv() else {
            panic!("a change")
        };
        assert_eq!(
            modified.prev.as_ref().map(|p| p.resource_version()),
            Some(7)
        );
        let a = modified.json_line(EventType::Modified);
        let b = modified.json_line(EventType::Modified);
        assert_eq!(a.as_ptr(), b.as_ptr(), "encoded once, shared");
        assert!(a.starts_with(b"{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"v1\""));
        let Ok(FeedEvent::Change(deleted)) = sub.changes.try_recv() else {
            panic!("a change")
        };
        assert!(deleted.deleted);
        assert_eq!(store.feed().last_rv(), 11);
        assert!(store.is_empty());
    }

    #[test]
    fn namespaces_are_shared_between_objects() {
        let store = ObjectStore::default();
        store.apply(watcher::Event::Init);
        store.apply(watcher::Event::InitApply(obj("prod", "a", 1)));
        store.apply(watcher::Event::InitApply(obj("prod", "b", 2)));
        store.apply(watcher::Event::InitDone);
        let objects = store.state();
        let (a, b) = (&objects[0], &objects[1]);
        assert!(std::ptr::eq(
            a.namespace().expect("ns").as_ptr(),
            b.namespace().expect("ns").as_ptr()
        ));
        assert_eq!(store.namespaces(), ["prod"]);
        assert!(store.get(Some("prod"), "b").is_some());
        assert!(store.get(None, "b").is_none());
    }
}
