//! Readable differences between a resource template and the manifest Karmada sent to one
//! member cluster (its Work): what the override policies changed there. Karmada's own
//! bookkeeping (its labels and annotations, server metadata, status) and the divided
//! replica count are left out.

use serde_json::Value;

/// Overrides Karmada records on each manifest.
pub const APPLIED_OVERRIDES: &str = "policy.karmada.io/applied-overrides";
pub const APPLIED_CLUSTER_OVERRIDES: &str = "policy.karmada.io/applied-cluster-overrides";

fn ignored(path: &str) -> bool {
    const SKIP: &[&str] = &[
        "/status",
        "/metadata/uid",
        "/metadata/resourceVersion",
        "/metadata/generation",
        "/metadata/creationTimestamp",
        "/metadata/managedFields",
        "/metadata/ownerReferences",
        "/metadata/finalizers",
        "/spec/replicas",
        "/spec/parallelism",
    ];
    if SKIP
        .iter()
        .any(|s| path == *s || path.starts_with(&format!("{s}/")))
    {
        return true;
    }
    // Karmada's own labels and annotations (…karmada.io/…).
    ["/metadata/labels/", "/metadata/annotations/"]
        .iter()
        .any(|p| {
            path.strip_prefix(p)
                .is_some_and(|k| k.contains("karmada.io~1"))
        })
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn walk(path: &str, before: Option<&Value>, after: Option<&Value>, out: &mut Vec<String>) {
    if ignored(path) {
        return;
    }
    // A map present on one side only: compare key by key, so bookkeeping keys stay out.
    let empty = Value::Object(Default::default());
    let (before, after) = match (before, after) {
        (None, Some(b @ Value::Object(_))) => (Some(&empty), Some(b)),
        (Some(a @ Value::Object(_)), None) => (Some(a), Some(&empty)),
        other => other,
    };
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                walk(&p, a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}/{i}"), Some(x), Some(y), out);
            }
        }
        (Some(a), Some(b)) if a == b => {}
        (Some(a), Some(b)) => out.push(format!("~ {path}: {} -> {}", short(a), short(b))),
        (None, Some(b)) => out.push(format!("+ {path}: {}", short(b))),
        (Some(a), None) => out.push(format!("- {path}: {}", short(a))),
        (None, None) => {}
    }
}

/// One line per change from `template` to `manifest`, in path order.
pub fn changes(template: &Value, manifest: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk("", Some(template), Some(manifest), &mut out);
    out
}

/// Names of the policies Karmada recorded as applied on `manifest`.
pub fn applied_policies(manifest: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (key, kind) in [
        (APPLIED_CLUSTER_OVERRIDES, "ClusterOverridePolicy"),
        (APPLIED_OVERRIDES, "OverridePolicy"),
    ] {
        let recorded = manifest
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok());
        for item in recorded
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = item.get("policyName").and_then(Value::as_str) {
                let entry = format!("{kind}/{name}");
                if !out.contains(&entry) {
                    out.push(entry);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shows_override_changes_only() {
        let template = json!({"metadata": {"name": "nginx", "uid": "1", "labels": {"app": "nginx", "propagationpolicy.karmada.io/permanent-id": "x"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"image": "nginx", "args": ["-a"]}]}}}, "status": {"readyReplicas": 2}});
        let manifest = json!({"metadata": {"name": "nginx", "labels": {"app": "nginx", "env": "dev", "work.karmada.io/permanent-id": "y"},
            "annotations": {"policy.karmada.io/applied-overrides": "[{\"policyName\":\"nginx-op\",\"overriders\":{}}]"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "reg.io/nginx:1", "args": []}]}}}});
        let got = changes(&template, &manifest);
        assert_eq!(
            got,
            vec![
                "+ /metadata/labels/env: dev",
                "~ /spec/template/spec/containers/0/args: [\"-a\"] -> []",
                "~ /spec/template/spec/containers/0/image: nginx -> reg.io/nginx:1",
            ]
        );
        assert_eq!(applied_policies(&manifest), vec!["OverridePolicy/nginx-op"]);
        assert!(changes(&template, &template).is_empty());
    }
}
