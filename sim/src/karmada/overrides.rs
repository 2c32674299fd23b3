//! OverridePolicies and ClusterOverridePolicies applied to a manifest for one member
//! cluster, in Karmada's order: cluster-scoped policies first, then namespaced ones, each
//! from the least to the most specific match (then by name), so the most specific wins;
//! within a rule: image, command, args, labels, annotations, then plaintext patches.

use serde_json::{json, Map, Value};

use super::detector::{policy_match, Implicit};
use crate::store::AsValue;

/// Recorded on the manifest like Karmada's `policy.karmada.io/applied-overrides`.
pub const APPLIED_OVERRIDES: &str = "policy.karmada.io/applied-overrides";
pub const APPLIED_CLUSTER_OVERRIDES: &str = "policy.karmada.io/applied-cluster-overrides";

#[derive(Debug, thiserror::Error)]
#[error("override policy {policy}: {message}")]
pub struct OverrideError {
    pub policy: String,
    pub message: String,
}

/// Override policies that select `template`, in the order they apply.
pub fn applicable<'a>(policies: &'a [impl AsValue], template: &Value) -> Vec<&'a Value> {
    let mut hits: Vec<(&Value, Implicit)> = policies
        .iter()
        .map(AsValue::as_value)
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["metadata"]["namespace"]
                .as_str()
                .is_none_or(|ns| Some(ns) == template["metadata"]["namespace"].as_str())
        })
        .filter_map(|p| {
            let empty = p["spec"]["resourceSelectors"]
                .as_array()
                .is_none_or(|a| a.is_empty());
            if empty {
                Some((p, Implicit::All))
            } else {
                policy_match(p, template).map(|m| (p, m))
            }
        })
        .collect();
    hits.sort_by(|(a, ma), (b, mb)| {
        ma.cmp(mb).then(
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str()),
        )
    });
    hits.into_iter().map(|(p, _)| p).collect()
}

fn target_matches(target: &Value, cluster: &Value) -> bool {
    if target.is_null() || target.as_object().is_some_and(Map::is_empty) {
        return true;
    }
    let name = cluster["metadata"]["name"].as_str().unwrap_or_default();
    let names: Vec<&str> = target["clusterNames"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !names.is_empty() && !names.contains(&name) {
        return false;
    }
    if target["exclude"]
        .as_array()
        .is_some_and(|a| a.iter().any(|e| e.as_str() == Some(name)))
    {
        return false;
    }
    let empty = json!({});
    if let Some(sel) = target.get("labelSelector").filter(|s| !s.is_null()) {
        if !super::selector::label_selector_matches(
            sel,
            cluster["metadata"].get("labels").unwrap_or(&empty),
        ) {
            return false;
        }
    }
    if let Some(sel) = target.get("fieldSelector").filter(|s| !s.is_null()) {
        if !super::selector::field_selector_matches(sel, cluster) {
            return false;
        }
    }
    true
}

/// The overriders of every rule of `policy` that targets `cluster`.
fn rules_for<'a>(policy: &'a Value, cluster: &Value) -> Vec<&'a Value> {
    let spec = &policy["spec"];
    let mut out: Vec<&Value> = spec["overrideRules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| target_matches(&r["targetCluster"], cluster))
        .map(|r| &r["overriders"])
        .collect();
    // The deprecated top-level form: one targetCluster and one overriders.
    if !spec["overriders"].is_null() && target_matches(&spec["targetCluster"], cluster) {
        out.push(&spec["overriders"]);
    }
    out
}

/// Image parts as Karmada's image overrider sees them.
struct Image {
    registry: String,
    repository: String,
    tag: String,
}

impl Image {
    fn parse(s: &str) -> Self {
        let (rest, _digest) = s.split_once('@').unwrap_or((s, ""));
        let (registry, path) = match rest.split_once('/') {
            Some((first, path))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), path.to_string())
            }
            _ => (String::new(), rest.to_string()),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) => (r.to_string(), t.to_string()),
            None => (path, String::new()),
        };
        Self {
            registry,
            repository,
            tag,
        }
    }

    fn render(&self) -> String {
        let mut s = String::new();
        if !self.registry.is_empty() {
            s.push_str(&self.registry);
            s.push('/');
        }
        s.push_str(&self.repository);
        if !self.tag.is_empty() {
            s.push(':');
            s.push_str(&self.tag);
        }
        s
    }
}

fn override_image(image: &str, o: &Value) -> String {
    let mut img = Image::parse(image);
    let value = o["value"].as_str().unwrap_or_default();
    let part = match o["component"].as_str() {
        Some("Registry") => &mut img.registry,
        Some("Repository") => &mut img.repository,
        _ => &mut img.tag,
    };
    match o["operator"].as_str() {
        Some("add") => part.push_str(value),
        Some("remove") => part.clear(),
        _ => *part = value.to_string(),
    }
    img.render()
}

fn containers_mut(manifest: &mut Value) -> Vec<&mut Value> {
    let path = if manifest["kind"] == "Pod" {
        "/spec/containers"
    } else {
        "/spec/template/spec/containers"
    };
    manifest
        .pointer_mut(path)
        .and_then(Value::as_array_mut)
        .map(|a| a.iter_mut().collect())
        .unwrap_or_default()
}

fn apply_image(manifest: &mut Value, o: &Value) {
    if let Some(path) = o["predicate"]["path"].as_str().filter(|p| !p.is_empty()) {
        if let Some(slot) = manifest.pointer_mut(path) {
            if let Some(img) = slot.as_str().map(|s| override_image(s, o)) {
                *slot = img.into();
            }
        }
        return;
    }
    for c in containers_mut(manifest) {
        if let Some(img) = c["image"].as_str().map(|s| override_image(s, o)) {
            c["image"] = img.into();
        }
    }
}

fn apply_list(manifest: &mut Value, o: &Value, field: &str) {
    let name = o["containerName"].as_str().unwrap_or_default();
    let values: Vec<Value> = o["value"].as_array().cloned().unwrap_or_default();
    for c in containers_mut(manifest) {
        if c["name"].as_str() != Some(name) {
            continue;
        }
        let mut list = c[field].as_array().cloned().unwrap_or_default();
        match o["operator"].as_str() {
            Some("remove") => list.retain(|v| !values.contains(v)),
            _ => list.extend(values.iter().cloned()),
        }
        c[field] = Value::Array(list);
    }
}

fn apply_map(manifest: &mut Value, o: &Value, field: &str) {
    let Some(values) = o["value"].as_object() else {
        return;
    };
    let meta = &mut manifest["metadata"];
    if !meta[field].is_object() {
        meta[field] = json!({});
    }
    let Some(map) = meta[field].as_object_mut() else {
        return;
    };
    for (k, v) in values {
        match o["operator"].as_str() {
            Some("add") => {
                map.insert(k.clone(), v.clone());
            }
            Some("remove") => {
                map.remove(k);
            }
            // replace only touches keys that are there
            _ => {
                if map.contains_key(k) {
                    map.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn apply_overriders(manifest: &mut Value, ov: &Value) -> Result<(), String> {
    let each = |key: &str| ov[key].as_array().cloned().unwrap_or_default();
    for o in each("imageOverrider") {
        apply_image(manifest, &o);
    }
    for o in each("commandOverrider") {
        apply_list(manifest, &o, "command");
    }
    for o in each("argsOverrider") {
        apply_list(manifest, &o, "args");
    }
    for o in each("labelsOverrider") {
        apply_map(manifest, &o, "labels");
    }
    for o in each("annotationsOverrider") {
        apply_map(manifest, &o, "annotations");
    }
    let ops: Vec<Value> = each("plaintext")
        .into_iter()
        .map(|p| {
            let mut op = json!({"op": p["operator"], "path": p["path"]});
            if p["operator"] != "remove" {
                op["value"] = p["value"].clone();
            }
            op
        })
        .collect();
    if !ops.is_empty() {
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())?;
        json_patch::patch(manifest, &patch).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Applies cluster then namespaced override policies (each already in order) for one
/// cluster, and records what applied in the manifest's annotations.
pub fn apply(
    manifest: &mut Value,
    cluster: &Value,
    cluster_policies: &[&Value],
    policies: &[&Value],
) -> Result<(), OverrideError> {
    for (list, note) in [
        (cluster_policies, APPLIED_CLUSTER_OVERRIDES),
        (policies, APPLIED_OVERRIDES),
    ] {
        let mut applied = Vec::new();
        for p in list {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            for ov in rules_for(p, cluster) {
                apply_overriders(manifest, ov).map_err(|message| OverrideError {
                    policy: name.to_string(),
                    message,
                })?;
                applied.push(json!({"policyName": name, "overriders": ov}));
            }
        }
        if !applied.is_empty() {
            if !manifest["metadata"]["annotations"].is_object() {
                manifest["metadata"]["annotations"] = json!({});
            }
            manifest["metadata"]["annotations"][note] =
                Value::String(Value::Array(applied).to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {}}, "spec": {}})
    }

    fn nginx() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx", "command": ["nginx"], "args": ["-g", "daemon off;"]}]}}}})
    }

    fn sample_op() -> Value {
        // shared/karmada/samples/nginx-overridepolicy.yaml in JSON form.
        json!({"metadata": {"name": "nginx-op", "namespace": "default"}, "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
            "overrideRules": [
                {"targetCluster": {"clusterNames": ["member2"]}, "overriders": {"labelsOverrider": [
                    {"operator": "add", "value": {"env": "skoala-dev"}},
                    {"operator": "add", "value": {"env-stat": "skoala-stage"}},
                    {"operator": "remove", "value": {"for": "for"}},
                    {"operator": "replace", "value": {"bar": "test"}}]}},
                {"targetCluster": {"clusterNames": ["member1"]}, "overriders": {"annotationsOverrider": [
                    {"operator": "add", "value": {"env": "skoala-stage"}},
                    {"operator": "remove", "value": {"bom": "bom"}},
                    {"operator": "replace", "value": {"emma": "sophia"}}]}}]}})
    }

    #[test]
    fn the_nginx_sample_labels_member2_and_annotates_member1() {
        let op = sample_op();
        let ops = [&op];
        let mut m2 = nginx();
        apply(&mut m2, &cluster("member2"), &[], &ops).expect("a value");
        assert_eq!(
            m2["metadata"]["labels"],
            json!({"app": "nginx", "env": "skoala-dev", "env-stat": "skoala-stage"})
        );
        assert!(m2["metadata"]["annotations"][APPLIED_OVERRIDES]
            .as_str()
            .expect("a value")
            .contains("nginx-op"));
        let mut m1 = nginx();
        apply(&mut m1, &cluster("member1"), &[], &ops).expect("a value");
        assert_eq!(m1["metadata"]["labels"], json!({"app": "nginx"}));
        assert_eq!(m1["metadata"]["annotations"]["env"], "skoala-stage");
        assert!(m1["metadata"]["annotations"].get("emma").is_none());
        let mut m3 = nginx();
        apply(&mut m3, &cluster("member3"), &[], &ops).expect("a value");
        assert_eq!(m3, nginx());
    }

    #[test]
    fn image_command_args_and_plaintext() {
        let op = json!({"metadata": {"name": "op"}, "spec": {"overrideRules": [{"overriders": {
            "imageOverrider": [
                {"component": "Registry", "operator": "replace", "value": "registry.example.com"},
                {"component": "Tag", "operator": "replace", "value": "1.27"}],
            "commandOverrider": [{"containerName": "nginx", "operator": "add", "value": ["-v"]}],
            "argsOverrider": [{"containerName": "nginx", "operator": "remove", "value": ["-g"]}],
            "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 7}]}}]}});
        let mut m = nginx();
        apply(&mut m, &cluster("member1"), &[], &[&op]).expect("a value");
        let c = &m["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "registry.example.com/nginx:1.27");
        assert_eq!(c["command"], json!(["nginx", "-v"]));
        assert_eq!(c["args"], json!(["daemon off;"]));
        assert_eq!(m["spec"]["replicas"], 7);
        let bad = json!({"metadata": {"name": "bad"}, "spec": {"overrideRules": [{"overriders": {
            "plaintext": [{"path": "/spec/nothing/here", "operator": "replace", "value": 1}]}}]}});
        let err = apply(&mut nginx(), &cluster("member1"), &[], &[&bad]).expect_err("an error");
        assert_eq!(err.policy, "bad");
        assert_eq!(
            Image::parse("localhost:5000/a/b:1").registry,
            "localhost:5000"
        );
        assert_eq!(Image::parse("a/b@sha256:x").render(), "a/b");
    }

    #[test]
    fn order_cluster_policies_first_most_specific_last() {
        let t = nginx();
        let kind_only = json!({"metadata": {"name": "a", "namespace": "default"}, "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}});
        let by_name = json!({"metadata": {"name": "b", "namespace": "default"}, "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}]}});
        let elsewhere = json!({"metadata": {"name": "c", "namespace": "other"}, "spec": {}});
        let ps = vec![by_name.clone(), kind_only.clone(), elsewhere];
        let got: Vec<&str> = applicable(&ps, &t)
            .iter()
            .map(|p| p["metadata"]["name"].as_str().expect("a value"))
            .collect();
        assert_eq!(got, vec!["a", "b"]);
        let set = |name: &str, v: &str| {
            json!({"metadata": {"name": name}, "spec": {"overrideRules": [{"overriders": {
            "labelsOverrider": [{"operator": "add", "value": {"who": v}}]}}]}})
        };
        let (cop, op) = (set("cop", "cluster"), set("op", "namespaced"));
        let mut m = nginx();
        apply(&mut m, &cluster("member1"), &[&cop], &[&op]).expect("a value");
        assert_eq!(m["metadata"]["labels"]["who"], "namespaced");
        assert!(m["metadata"]["annotations"][APPLIED_CLUSTER_OVERRIDES].is_string());
    }
}
