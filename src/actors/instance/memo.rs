//! What the cache serves, kept per object version: each cached object's JSON, and each
//! one's Table row, so a LIST from the cache copies bytes instead of serializing
//! thousands of objects per request. One memo per instance, a map per kind; the lock is
//! held only for lookups and inserts, never while serializing.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use kairship_wire::table::Row;
use kube::api::DynamicObject;
use parking_lot::Mutex;

use super::caches::Kind;

/// One kind's values: uid to (resourceVersion, value).
type Kept<T> = HashMap<String, (String, T)>;

/// Values made from objects, kept by kind, uid and resourceVersion.
pub struct VersionMemo<T>(Arc<Mutex<BTreeMap<Kind, Kept<T>>>>);

impl<T> Clone for VersionMemo<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Default for VersionMemo<T> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

fn id(o: &DynamicObject) -> Cow<'_, str> {
    let m = &o.metadata;
    match &m.uid {
        Some(uid) => Cow::Borrowed(uid),
        None => Cow::Owned(format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or("")
        )),
    }
}

fn rv(o: &DynamicObject) -> &str {
    o.metadata.resource_version.as_deref().unwrap_or("")
}

impl<T: Clone> VersionMemo<T> {
    /// `make` of each object, in order, reused while its version holds; `live` is how
    /// many objects of `kind` the cache holds now, used to drop entries of deleted
    /// objects once the kind's map grows past it.
    pub fn get_or_make(
        &self,
        kind: Kind,
        objects: &[&DynamicObject],
        live: usize,
        make: impl Fn(&DynamicObject) -> T,
    ) -> Vec<T> {
        let mut out: Vec<Option<T>> = {
            let memo = self.0.lock();
            let kept = memo.get(&kind);
            objects
                .iter()
                .map(|o| {
                    kept.and_then(|m| m.get(id(o).as_ref()))
                        .filter(|(r, _)| r == rv(o))
                        .map(|(_, v)| v.clone())
                })
                .collect()
        };
        let mut fresh = Vec::new();
        for (slot, o) in out.iter_mut().zip(objects) {
            if slot.is_none() {
                let v = make(o);
                fresh.push((id(o).into_owned(), rv(o).to_string(), v.clone()));
                *slot = Some(v);
            }
        }
        if !fresh.is_empty() {
            let mut memo = self.0.lock();
            let kept = memo.entry(kind).or_default();
            for (id, rv, v) in fresh {
                kept.insert(id, (rv, v));
            }
            if kept.len() > live * 2 + 64 {
                let keep: HashSet<Cow<'_, str>> = objects.iter().map(|o| id(o)).collect();
                kept.retain(|id, _| keep.contains(id.as_str()));
            }
        }
        out.into_iter().flatten().collect()
    }
}

/// Each cached object's JSON.
pub type JsonMemo = VersionMemo<Bytes>;

impl JsonMemo {
    pub fn render(&self, kind: Kind, objects: &[&DynamicObject], live: usize) -> Vec<Bytes> {
        self.get_or_make(kind, objects, live, |o| {
            Bytes::from(serde_json::to_vec(o).unwrap_or_default())
        })
    }
}

/// Each cached object's Table row, printed with its kind's columns (which stay fixed for
/// the actor's life, see `Printers`).
pub type RowMemo = VersionMemo<Arc<Row>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, rv: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "uid": name, "resourceVersion": rv}})).expect("obj")
    }

    #[test]
    fn reuses_until_the_version_changes() {
        let memo = JsonMemo::default();
        let a1 = obj("a", "1");
        let first = memo.render(Kind::Namespace, &[&a1], 1);
        let again = memo.render(Kind::Namespace, &[&a1], 1);
        assert_eq!(first[0].as_ptr(), again[0].as_ptr(), "same bytes reused");
        let a2 = obj("a", "2");
        let changed = memo.render(Kind::Namespace, &[&a2], 1);
        assert!(String::from_utf8_lossy(&changed[0]).contains("\"resourceVersion\":\"2\""));
    }

    #[test]
    fn one_kind_trimmed_leaves_the_others_alone() {
        let memo = JsonMemo::default();
        let many: Vec<DynamicObject> = (0..200).map(|i| obj(&format!("d{i}"), "1")).collect();
        let refs: Vec<&DynamicObject> = many.iter().collect();
        let first = memo.render(Kind::Deployment, &refs, refs.len());
        // A small kind whose memo is trimmed to what it lists now.
        for i in 0..100 {
            let c = obj(&format!("c{i}"), "1");
            memo.render(Kind::Namespace, &[&c], 1);
        }
        let again = memo.render(Kind::Deployment, &refs, refs.len());
        assert!(first
            .iter()
            .zip(&again)
            .all(|(a, b)| a.as_ptr() == b.as_ptr()));
    }
}
