//! The watch history as a store keeps it: each past event's objects as JSON only, so a
//! superseded version costs its bytes, not its tree; a watch resuming from a version
//! rebuilds them.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::{Event, EventType, Obj, StoredObject};

/// An event as the history keeps it: its objects' JSON only, shared with the stored
/// objects while they are current. A superseded version then costs its bytes, not its
/// tree (about ten times more); the rare watch resuming from a version rebuilds them.
pub(super) struct Past {
    pub(super) at: Instant,
    pub(super) rv: u64,
    pub(super) resource: Arc<str>,
    kind: EventType,
    object: Bytes,
    prev: Option<(Bytes, u64)>,
}

impl Past {
    pub(super) fn of(at: Instant, ev: &Event) -> Self {
        Self {
            at,
            rv: ev.rv,
            resource: ev.resource.clone(),
            kind: ev.kind,
            object: ev.object.json.clone(),
            prev: ev.prev.as_ref().map(|p| (p.json.clone(), p.rv)),
        }
    }

    /// The event again, or `None` if its JSON no longer parses (it was written by us).
    pub(super) fn revive(&self) -> Option<Arc<Event>> {
        let obj = |json: &Bytes, rv: u64| -> Option<Obj> {
            let value = serde_json::from_slice(json).ok()?;
            Some(Arc::new(StoredObject {
                value,
                json: json.clone(),
                rv,
            }))
        };
        let prev = match &self.prev {
            Some((json, rv)) => Some(obj(json, *rv)?),
            None => None,
        };
        Some(Arc::new(Event {
            rv: self.rv,
            resource: self.resource.clone(),
            kind: self.kind,
            object: obj(&self.object, self.rv)?,
            prev,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Filter, Store, StoreConfig, WatchFrom};
    use crate::resources::Flavor;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn history_keeps_only_the_window() {
        let config = StoreConfig {
            history_window: Duration::from_millis(50),
            ..StoreConfig::default()
        };
        let store = Store::new(Flavor::Member, config).expect("a store");
        let def = store.resource("", "v1", "configmaps").expect("configmaps");
        let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let before = store.current_rv();
        store.create(&def, Some("default"), cm("a")).expect("a");
        let after_a = store.current_rv();
        std::thread::sleep(Duration::from_millis(80));
        store.create(&def, Some("default"), cm("b")).expect("b");
        let too_old = store.watch(&def, &Filter::default(), WatchFrom::Version(before));
        assert_eq!(too_old.err().map(|e| e.code), Some(410));
        let recent = store
            .watch(&def, &Filter::default(), WatchFrom::Version(after_a))
            .expect("within the window");
        let names: Vec<&str> = recent.initial.iter().map(|e| e.object.name()).collect();
        assert_eq!(names, ["b"]);
    }
}
