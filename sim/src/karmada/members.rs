//! The member clusters' own API objects: one store per member cluster, written by the
//! execution controller from Works, as the member's kube-apiserver would hold them.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::resources::{Flavor, ResourceDef};
use crate::store::{Store, StoreConfig};
use kairship_wire::status::{ApiError, ApiResult};

/// Small stores: members only hold what Works put there.
fn member_store_config() -> StoreConfig {
    StoreConfig {
        history_limit: 1_000,
        watch_buffer: 256,
        ..StoreConfig::default()
    }
}

#[derive(Default)]
pub struct Members {
    stores: Mutex<BTreeMap<String, Arc<Store>>>,
}

impl Members {
    /// The store of member `cluster`, made on first use.
    pub fn store(&self, cluster: &str) -> ApiResult<Arc<Store>> {
        let mut stores = self.stores.lock();
        if let Some(s) = stores.get(cluster) {
            return Ok(s.clone());
        }
        let s = Arc::new(Store::new(Flavor::Member, member_store_config())?);
        stores.insert(cluster.to_string(), s.clone());
        Ok(s)
    }

    pub fn names(&self) -> Vec<String> {
        self.stores.lock().keys().cloned().collect()
    }

    /// The members' resourceVersions summed: it moves with any write to any of them. Read
    /// under the lock, so it never makes the store of a member just removed again.
    pub fn versions(&self) -> u64 {
        self.stores
            .lock()
            .values()
            .fold(0, |sum, s| sum.wrapping_add(s.current_rv()))
    }

    /// Forgets a member (its Cluster object is gone).
    pub fn remove(&self, cluster: &str) {
        self.stores.lock().remove(cluster);
    }
}

/// The resource serving `apiVersion`/`kind` in `store`.
pub fn def_for(store: &Store, api_version: &str, kind: &str) -> ApiResult<Arc<ResourceDef>> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    store
        .registry()
        .all()
        .find(|d| d.group == group && d.kind == kind && d.versions.iter().any(|v| v == version))
        .cloned()
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "no matches for kind {kind:?} in version {api_version:?}"
            ))
        })
}

/// Creates `obj`, or replaces its spec and metadata when they differ; `true` if written.
pub fn upsert(store: &Store, def: &ResourceDef, obj: Value) -> ApiResult<bool> {
    let ns = obj["metadata"]["namespace"].as_str().map(String::from);
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match store.get(def, ns.as_deref(), &name) {
        Err(e) if e.code == 404 => {
            store.create(def, ns.as_deref(), obj)?;
            Ok(true)
        }
        Err(e) => Err(e),
        Ok(current) => {
            if same_content(&current.value, &obj) {
                return Ok(false);
            }
            let mut next = obj;
            next["metadata"]["resourceVersion"] = current.rv.to_string().into();
            store.update(def, ns.as_deref(), &name, next, false)?;
            Ok(true)
        }
    }
}

/// Equal outside status and server-set metadata.
pub fn same_content(current: &Value, desired: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("status");
            o.remove("apiVersion");
            o.remove("kind");
        }
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "resourceVersion",
                "uid",
                "generation",
                "creationTimestamp",
                "managedFields",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "finalizers",
            ] {
                m.remove(k);
            }
            for k in ["labels", "annotations"] {
                if m.get(k)
                    .is_some_and(|l| l.as_object().is_some_and(|o| o.is_empty()))
                {
                    m.remove(k);
                }
            }
        }
        v
    };
    strip(current) == strip(desired)
}
