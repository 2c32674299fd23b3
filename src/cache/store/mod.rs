//! One kind's cached objects, in the order a LIST returns them (namespace, then name), fed
//! by the kind's watch and read by the API. Each object is held once (`CachedObject`);
//! the map's keys share its name and an interned namespace. Changes are published to the
//! kind's feed under the same lock that applies them, so a watch that starts from a
//! snapshot sees every later change exactly once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube::runtime::watcher;
use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};

use super::budget::Meter;
use super::feed::{Feed, FeedEvent};
use super::object::CachedObject;
use super::raw::RawObject;

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

/// Label key -> value -> the objects carrying it, in LIST order.
type LabelIndex = HashMap<Box<str>, HashMap<Box<str>, Vec<Arc<CachedObject>>>>;

#[derive(Default)]
struct State {
    objects: Objects,
    /// A relist in progress: served from `objects` until it completes.
    relist: Option<Objects>,
    /// Namespace names, shared by every object in them.
    namespaces: HashSet<Arc<str>>,
    /// A label-selected LIST reads the objects it selects instead of every object (8 bytes
    /// per object and label).
    by_label: LabelIndex,
}

struct Inner {
    state: RwLock<State>,
    feed: Feed,
    ready: watch::Sender<bool>,
    /// The instance does not serve the kind (a kind newer than its Karmada): the store
    /// counts as listed, and its reads go to the instance, which answers for itself.
    absent: std::sync::atomic::AtomicBool,
    /// The instance's cache budget, shared by its stores; none in tests of one store.
    meter: Option<(Arc<Meter>, &'static str)>,
}

/// A kind's objects (cheap to clone: a handle).
#[derive(Clone)]
pub struct ObjectStore(Arc<Inner>);

impl Default for ObjectStore {
    fn default() -> Self {
        Self::build(None)
    }
}

/// What the budget counts of an object: its JSON, the bulk of what is kept of it.
fn weight(o: &CachedObject) -> i64 {
    i64::try_from(o.json().len()).unwrap_or(i64::MAX)
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
    fn build(meter: Option<(Arc<Meter>, &'static str)>) -> Self {
        Self(Arc::new(Inner {
            state: RwLock::default(),
            feed: Feed::default(),
            ready: watch::channel(false).0,
            absent: Default::default(),
            meter,
        }))
    }

    /// A store of `kind` (its name, for the budget's words) counted against `meter`.
    pub fn metered(meter: Arc<Meter>, kind: &'static str) -> Self {
        Self::build(Some((meter, kind)))
    }

    /// Whether the budget takes `object`, counting it (`replaced`: the object it replaces,
    /// whose weight it frees).
    fn admit(&self, object: &CachedObject, replaced: Option<&CachedObject>) -> bool {
        let Some((meter, kind)) = &self.0.meter else {
            return true;
        };
        let what = || match object.namespace() {
            Some(ns) => format!("{kind} {ns}/{}", object.name()),
            None => format!("{kind} {}", object.name()),
        };
        if !meter.admits(object.json().len(), what) {
            return false;
        }
        let freed = replaced.map_or(0, weight);
        meter.add(i64::from(replaced.is_none()), weight(object) - freed);
        true
    }

    fn release(&self, objects: i64, bytes: i64) {
        if let Some((meter, _)) = &self.0.meter {
            meter.add(-objects, -bytes);
        }
    }

    /// Over the instance's budget: nothing is kept, and the store says it has listed, so
    /// nothing waits for it.
    fn over_budget(&self, state: &mut State) -> bool {
        if !self.0.meter.as_ref().is_some_and(|(m, _)| m.over()) {
            return false;
        }
        if !state.objects.is_empty() || state.relist.is_some() {
            let held: i64 = state.objects.values().map(|o| weight(o)).sum();
            let relisted: i64 = state
                .relist
                .iter()
                .flat_map(|r| r.values())
                .map(|o| weight(o))
                .sum();
            let count = state.objects.len() + state.relist.as_ref().map_or(0, |r| r.len());
            self.release(i64::try_from(count).unwrap_or(i64::MAX), held + relisted);
            *state = State::default();
        }
        self.0.ready.send_replace(true);
        true
    }

    /// The instance answered 404 to the kind's list: it does not serve it.
    pub fn mark_absent(&self) {
        self.0
            .absent
            .store(true, std::sync::atomic::Ordering::Release);
        self.0.ready.send_replace(true);
    }

    /// Whether the instance does not serve the kind, as last seen.
    pub fn absent(&self) -> bool {
        self.0.absent.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Drops every object if the instance is over its budget (its watches are stopped).
    pub fn drop_if_over_budget(&self) {
        let mut state = self.0.state.write();
        self.over_budget(&mut state);
    }

    /// Applies one event of the kind's watch (objects carry apiVersion and kind).
    pub fn apply(&self, event: watcher::Event<RawObject>) {
        self.0
            .absent
            .store(false, std::sync::atomic::Ordering::Release);
        let mut state = self.0.state.write();
        if self.over_budget(&mut state) {
            return;
        }
        match event {
            watcher::Event::Init => {
                if let Some(abandoned) = state.relist.replace(Objects::new()) {
                    let bytes = abandoned.values().map(|o| weight(o)).sum();
                    self.release(i64::try_from(abandoned.len()).unwrap_or(i64::MAX), bytes);
                }
            }
            watcher::Event::InitApply(o) => {
                let object = state.cached(o);
                let key = Key::of(&object);
                let replaced = state.relist.as_ref().and_then(|r| r.get(&key).cloned());
                if state.relist.is_some() && self.admit(&object, replaced.as_deref()) {
                    if let Some(relist) = state.relist.as_mut() {
                        relist.insert(key, object);
                    }
                }
            }
            watcher::Event::InitDone => {
                if let Some(listed) = state.relist.take() {
                    let old = std::mem::replace(&mut state.objects, listed);
                    let bytes = old.values().map(|o| weight(o)).sum();
                    self.release(i64::try_from(old.len()).unwrap_or(i64::MAX), bytes);
                    state.reindex();
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
                let object = state.cached(o);
                let key = Key::of(&object);
                if !self.admit(&object, state.objects.get(&key).map(|p| p.as_ref())) {
                    // Not kept: the budget drops every store's objects on their next event.
                    drop(state);
                    return;
                }
                let prev = state.objects.insert(key, object.clone());
                if let Some(prev) = &prev {
                    state.unindex(prev);
                }
                state.index(&object);
                self.0.feed.publish(&object, prev.as_ref(), false);
            }
            watcher::Event::Delete(o) => {
                let object = state.cached(o);
                let prev = state.objects.remove(&Key::of(&object));
                if let Some(prev) = &prev {
                    state.unindex(prev);
                    self.release(1, weight(prev));
                }
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
    /// and the version they are all at. `label` (a label every wanted object has) narrows
    /// the pass to the objects carrying it. One pass under the read lock: a selective LIST
    /// touches only its candidates and clones only what it returns.
    pub fn select(
        &self,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
        label: Option<(&str, &str)>,
        mut wanted: impl FnMut(&CachedObject) -> bool,
    ) -> Selected {
        let state = self.0.state.read();
        // The namespace of cluster-scoped objects is None, which sorts first, as "" would.
        let after = after.map(|(ns, name)| ((!ns.is_empty()).then_some(ns), name));
        let candidates: Box<dyn Iterator<Item = &Arc<CachedObject>>> = match (label, after) {
            (Some((k, v)), after) => {
                let tagged = state
                    .by_label
                    .get(k)
                    .and_then(|values| values.get(v))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let start = after.map_or(0, |a| tagged.partition_point(|o| list_key(o) <= a));
                Box::new(tagged[start..].iter())
            }
            (None, None) => Box::new(state.objects.values()),
            (None, Some((ns, name))) => {
                let key = Key {
                    namespace: ns.map(Arc::from),
                    name: Arc::from(name),
                };
                Box::new(
                    state
                        .objects
                        .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
                        .map(|(_, o)| o),
                )
            }
        };
        let mut out = Selected {
            objects: Vec::new(),
            remaining: 0,
            // Read under the lock that publishes: no object newer than it is in the map.
            version: self.0.feed.last_rv(),
        };
        for o in candidates.filter(|o| wanted(o)) {
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

/// An object's place in LIST order.
fn list_key(o: &CachedObject) -> (Option<&str>, &str) {
    (o.namespace(), o.name())
}

impl State {
    fn index(&mut self, o: &Arc<CachedObject>) {
        for (k, v) in o.labels() {
            let tagged = self
                .by_label
                .entry(k.into())
                .or_default()
                .entry(v.into())
                .or_default();
            let at = tagged.partition_point(|t| list_key(t) < list_key(o));
            tagged.insert(at, o.clone());
        }
    }

    fn unindex(&mut self, o: &CachedObject) {
        for (k, v) in o.labels() {
            let Some(values) = self.by_label.get_mut(k) else {
                continue;
            };
            if let Some(tagged) = values.get_mut(v) {
                let at = tagged.partition_point(|t| list_key(t) < list_key(o));
                if tagged.get(at).is_some_and(|t| list_key(t) == list_key(o)) {
                    tagged.remove(at);
                }
                if tagged.is_empty() {
                    values.remove(v);
                }
            }
            if values.is_empty() {
                self.by_label.remove(k);
            }
        }
    }

    /// The index of every object, after a relist replaced them (in LIST order, so each
    /// object is appended).
    fn reindex(&mut self) {
        let mut by_label = LabelIndex::new();
        for o in self.objects.values() {
            for (k, v) in o.labels() {
                by_label
                    .entry(k.into())
                    .or_default()
                    .entry(v.into())
                    .or_default()
                    .push(o.clone());
            }
        }
        for values in by_label.values_mut() {
            for tagged in values.values_mut() {
                tagged.shrink_to_fit();
            }
        }
        self.by_label = by_label;
    }

    fn cached(&mut self, o: RawObject) -> Arc<CachedObject> {
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
mod tests;
