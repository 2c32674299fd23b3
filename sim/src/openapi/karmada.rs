//! Karmada's own schemas for the Karmada kinds a simulated instance serves, so that
//! `kubectl explain`, field validation, pruning, defaulting and field ownership see what a
//! karmada-apiserver sees. The data is Karmada's CRDs at the real fleet's version
//! (`karmada_schemas.json`, written by `scripts/sim/karmada-schemas.py`); the real tier's
//! differential test fails when it drifts from the module.
//!
//! Parsed, the schemas take a few MiB, so a process holds them once: each instance's CRD
//! object carries a small placeholder naming its schema ([`SHARED`]) instead of a copy,
//! and readers of schemas resolve it here. A CRD a client writes with a schema of its own
//! is used as written.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::Gvk;

/// Names the shared schema (`propagationpolicies.policy.karmada.io/v1alpha1`) a CRD
/// version's placeholder stands for.
pub const SHARED: &str = "x-kairship-shared-schema";

fn raw() -> &'static BTreeMap<String, Value> {
    static RAW: OnceLock<BTreeMap<String, Value>> = OnceLock::new();
    RAW.get_or_init(|| {
        // Embedded at build time and checked by the unit test below: a parse failure is a
        // build defect, so an empty table (every Karmada kind open) is the fallback.
        serde_json::from_str(include_str!("karmada_schemas.json")).unwrap_or_default()
    })
}

fn key(crd: &str, version: &str) -> String {
    format!("{crd}/{version}")
}

/// The schema a new CRD object stores for `crd` at `version`: a placeholder naming the
/// shared one where Karmada has one (open to any field if nothing resolves it).
pub fn stored(crd: &str, version: &str) -> Value {
    let mut s = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    if raw().contains_key(&key(crd, version)) {
        s[SHARED] = key(crd, version).into();
    }
    s
}

/// The published schema a placeholder stands for, built once per kind and version.
pub fn resolve(stored: &Value, gvk: &Gvk) -> Option<Arc<Value>> {
    let name = stored.get(SHARED)?.as_str()?;
    static PUBLISHED: OnceLock<Mutex<HashMap<String, Arc<Value>>>> = OnceLock::new();
    let cache = PUBLISHED.get_or_init(Default::default);
    if let Some(s) = cache.lock().get(name) {
        return Some(s.clone());
    }
    let schema = Arc::new(super::crd::published(raw().get(name)?, gvk));
    cache.lock().insert(name.to_string(), schema.clone());
    Some(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_karmada_version_has_its_schema() {
        let all = raw();
        assert_eq!(all.len(), 10, "{:?}", all.keys().collect::<Vec<_>>());
        let pp = &all["propagationpolicies.policy.karmada.io/v1alpha1"];
        assert!(
            pp["properties"]["spec"]["properties"]["placement"]["properties"]
                .get("clusterAffinity")
                .is_some()
        );
        let gvk = Gvk {
            group: "policy.karmada.io".into(),
            version: "v1alpha1".into(),
            kind: "PropagationPolicy".into(),
        };
        let placeholder = stored("propagationpolicies.policy.karmada.io", "v1alpha1");
        let published = resolve(&placeholder, &gvk).expect("resolved");
        assert_eq!(
            published["x-kubernetes-group-version-kind"][0]["kind"],
            "PropagationPolicy"
        );
        // One copy per process.
        assert!(Arc::ptr_eq(
            &published,
            &resolve(&placeholder, &gvk).expect("again")
        ));
        assert!(stored("widgets.example.com", "v1").get(SHARED).is_none());
    }
}
