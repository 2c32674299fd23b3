//! The Karmada version of a managed instance, kept in the `Karmada` object's spec the way
//! karmada-operator reads it (each component's `imageTag`), and merging spec updates so
//! fields the API does not model survive an UpdateInstance.

use serde_json::{json, Map, Value};

use crate::error::ApiError;

/// Components whose image tag carries the Karmada version. Not karmadaAPIServer: its
/// image is kube-apiserver, tagged with a Kubernetes version.
pub const COMPONENTS: &[&str] = &[
    "karmadaAggregatedAPIServer",
    "karmadaControllerManager",
    "karmadaScheduler",
    "karmadaWebhook",
];

/// `vMAJOR.MINOR.PATCH` (with an optional pre-release suffix).
pub fn check_version(field: &str, v: &str) -> Result<(), ApiError> {
    let core = v.strip_prefix('v').unwrap_or_default();
    let core = core.split_once('-').map_or(core, |(c, _)| c);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            format!("{v:?} is not a Karmada version like v1.12.0"),
        ))
    }
}

/// The spec fragment that sets every component's image tag to `version`.
pub fn for_version(version: &str) -> Value {
    let components: Map<String, Value> = COMPONENTS
        .iter()
        .map(|c| (c.to_string(), json!({"imageTag": version})))
        .collect();
    json!({"components": components})
}

/// The version a Karmada spec asks for, if any.
pub fn version_of(spec: &Value) -> Option<String> {
    ["karmadaControllerManager", "karmadaScheduler"]
        .iter()
        .find_map(|c| spec.pointer(&format!("/components/{c}/imageTag"))?.as_str())
        .map(String::from)
}

/// JSON merge (RFC 7386 without deletions): `patch` over `base`.
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Whether everything `want` sets is already in `have`.
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| contains(hv, v))),
        (h, w) => h == w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_merge_and_containment() {
        assert!(check_version("v", "v1.13.0").is_ok());
        assert!(check_version("v", "v1.13.0-rc.1").is_ok());
        for bad in ["1.13.0", "v1.13", "latest", "v1.x.0", ""] {
            assert!(check_version("v", bad).is_err(), "{bad}");
        }
        let mut spec = json!({"components": {"etcd": {"local": {}}, "karmadaScheduler": {"replicas": 2}, "karmadaAPIServer": {"imageTag": "v1.31.3"}}, "hostCluster": {}});
        merge(&mut spec, &for_version("v1.13.0"));
        assert_eq!(
            spec["components"]["karmadaScheduler"],
            json!({"replicas": 2, "imageTag": "v1.13.0"})
        );
        assert_eq!(
            spec["components"]["karmadaAPIServer"]["imageTag"], "v1.31.3",
            "the kube-apiserver image keeps its Kubernetes version"
        );
        assert_eq!(spec["components"]["etcd"], json!({"local": {}}));
        assert_eq!(version_of(&spec).as_deref(), Some("v1.13.0"));
        assert!(contains(&spec, &for_version("v1.13.0")));
        assert!(!contains(&spec, &for_version("v1.14.0")));
        assert_eq!(version_of(&json!({})), None);
    }
}
