//! Each cached object's JSON, kept by uid and resourceVersion, so serving a LIST from the
//! cache copies bytes instead of serializing thousands of objects per request. One memo
//! per instance; its lock is held only for lookups and inserts, never while serializing.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kube::api::DynamicObject;
use parking_lot::Mutex;

#[derive(Clone, Default)]
pub struct JsonMemo(Arc<Mutex<HashMap<String, (String, Bytes)>>>);

fn key(o: &DynamicObject) -> (String, String) {
    let m = &o.metadata;
    let id = m.uid.clone().unwrap_or_else(|| {
        format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or(""),
            m.name.as_deref().unwrap_or("")
        )
    });
    (id, m.resource_version.clone().unwrap_or_default())
}

impl JsonMemo {
    /// The JSON of each object, in order; `live` is how many objects the cache holds now,
    /// used to drop entries of deleted objects once the memo grows past it.
    pub fn render(&self, objects: &[&DynamicObject], live: usize) -> Vec<Bytes> {
        let keys: Vec<(String, String)> = objects.iter().map(|o| key(o)).collect();
        let mut out: Vec<Option<Bytes>> = {
            let memo = self.0.lock();
            keys.iter()
                .map(|(id, rv)| {
                    memo.get(id)
                        .filter(|(r, _)| r == rv)
                        .map(|(_, b)| b.clone())
                })
                .collect()
        };
        let mut fresh = Vec::new();
        for (i, slot) in out.iter_mut().enumerate() {
            if slot.is_none() {
                let b = Bytes::from(serde_json::to_vec(objects[i]).unwrap_or_default());
                fresh.push((keys[i].clone(), b.clone()));
                *slot = Some(b);
            }
        }
        if !fresh.is_empty() {
            let mut memo = self.0.lock();
            for ((id, rv), b) in fresh {
                memo.insert(id, (rv, b));
            }
            if memo.len() > live * 2 + 64 {
                let keep: std::collections::HashSet<&String> =
                    keys.iter().map(|(id, _)| id).collect();
                memo.retain(|id, _| keep.contains(id));
            }
        }
        out.into_iter().map(Option::unwrap_or_default).collect()
    }
}

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
        let first = memo.render(&[&a1], 1);
        let again = memo.render(&[&a1], 1);
        assert_eq!(first[0].as_ptr(), again[0].as_ptr(), "same bytes reused");
        let a2 = obj("a", "2");
        let changed = memo.render(&[&a2], 1);
        assert!(String::from_utf8_lossy(&changed[0]).contains("\"resourceVersion\":\"2\""));
    }
}
