//! Object metadata helpers: names, uids, timestamps, generation.

use rand::Rng;
use serde_json::{Map, Value};

use kairship_wire::status::{ApiError, ApiResult, Target};

/// RFC 3339 with second precision, as Kubernetes writes `metav1.Time`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn new_uid() -> String {
    let b: [u8; 16] = rand::rng().random();
    let h = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    // Version 4, variant 1, so it reads like the UUIDs Kubernetes hands out.
    let v = format!("4{}", &h(6..8)[1..]);
    let var = format!("{:x}{}", 0x8 | (b[8] >> 4 & 0x3), &h(8..10)[1..]);
    format!("{}-{}-{}-{}-{}", h(0..4), h(4..6), v, var, h(10..16))
}

/// Five lowercase alphanumerics, the suffix kube-apiserver appends to `generateName`.
pub fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHA[rng.random_range(0..ALPHA.len())] as char)
        .collect()
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Validates `metadata.name`: an RFC 1123 label for namespaces, a subdomain otherwise.
/// kube-apiserver's `ValidatePathSegmentName`: anything but `.`, `..`, `/` and `%`.
pub fn validate_path_segment(t: Target<'_>, name: &str) -> ApiResult<()> {
    let why = match name {
        "." | ".." => Some(format!("may not be '{name}'")),
        _ if name.contains('/') => Some("may not contain '/'".to_string()),
        _ if name.contains('%') => Some("may not contain '%'".to_string()),
        _ => None,
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ApiError::invalid(
            t,
            "metadata.name",
            format!("Invalid value: {name:?}: {why}"),
        )),
    }
}

pub fn validate_name(t: Target<'_>, name: &str, label_only: bool) -> ApiResult<()> {
    let ok = if label_only {
        is_label(name)
    } else {
        name.len() <= 253 && name.split('.').all(is_label)
    };
    if ok {
        return Ok(());
    }
    let what = if label_only {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
    } else {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    };
    Err(ApiError::invalid(
        t,
        "metadata.name",
        format!("Invalid value: {name:?}: {what}"),
    ))
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        // Just made sure it is an object.
        _ => unreachable!("metadata is an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(key)).and_then(Value::as_str)
}

pub fn finalizers(obj: &Value) -> usize {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// Whether kube-apiserver keeps `metadata.generation` for this kind: workloads, Pods,
/// CRDs and every custom (or aggregated Karmada) kind, not plain data such as ConfigMaps.
pub fn tracks_generation(def: &crate::resources::ResourceDef) -> bool {
    def.crd.is_some()
        || matches!(
            (def.group.as_str(), def.plural.as_str()),
            ("apps", _)
                | ("batch", "jobs")
                | ("", "pods" | "replicationcontrollers")
                | ("apiextensions.k8s.io", _)
                | ("cluster.karmada.io", _)
        )
}

/// Whether two objects differ outside `metadata` and `status` (what bumps generation).
pub fn spec_changed(old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let keys = o
        .keys()
        .chain(n.keys())
        .filter(|k| !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind"));
    keys.into_iter().any(|k| o.get(k) != n.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: Target<'static> = Target {
        group: "",
        kind: "ConfigMap",
        plural: "configmaps",
        name: "x",
    };

    #[test]
    fn names() {
        assert!(validate_name(T, "a-b.c", false).is_ok());
        assert!(validate_name(T, "Bad_Name", false).is_err());
        assert!(validate_name(T, "a.b", true).is_err());
        assert!(validate_name(T, &"a".repeat(64), true).is_err());
        assert!(validate_name(T, "-a", false).is_err());
    }

    #[test]
    fn uid_shape() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn generation_ignores_metadata_and_status() {
        let a = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"r": 1}, "status": {"x": 1}});
        let b = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"r": 1}, "status": {"x": 2}});
        assert!(!spec_changed(&a, &b));
        assert!(spec_changed(&a, &json!({"spec": {"r": 2}})));
    }
}
