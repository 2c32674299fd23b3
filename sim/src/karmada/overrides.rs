//! OverridePolicies and ClusterOverridePolicies applied to the manifest sent to one
//! cluster, in Karmada's order (cluster-wide policies first, then namespaced; each group by
//! implicit priority then name, so later ones win): plaintext JSON patches, image,
//! command, args, labels and annotations overriders.

use serde_json::{Map, Value};

use super::detector::policy_match;
use super::scheduler::{affinity_ok, ClusterInfo};

/// Applies every rule of `cluster_policies` then `policies` that selects `template` and
/// targets `cluster`; returns the names of the policies that changed something.
pub fn apply(
    manifest: &mut Value,
    template: &Value,
    cluster: &ClusterInfo,
    cluster_policies: &[&Value],
    policies: &[&Value],
) -> Vec<String> {
    let mut applied = Vec::new();
    for group in [cluster_policies, policies] {
        let mut chosen: Vec<(super::detector::Match, String, &Value)> = group
            .iter()
            .filter_map(|p| {
                let m = policy_match(p, template)?;
                let name = p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                Some((m, name, *p))
            })
            .collect();
        chosen.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, name, policy) in chosen {
            let before = manifest.clone();
            for rule in policy["spec"]["overrideRules"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let target = &rule["targetCluster"];
                if target.is_null() || affinity_ok(target, cluster) {
                    overriders(manifest, &rule["overriders"]);
                }
            }
            if *manifest != before {
                applied.push(name);
            }
        }
    }
    applied
}

fn overriders(m: &mut Value, o: &Value) {
    let list = |k: &str| o[k].as_array().cloned().unwrap_or_default();
    for p in list("plaintext") {
        plaintext(m, &p);
    }
    for i in list("imageOverrider") {
        image(m, &i);
    }
    for c in list("commandOverrider") {
        container_list(m, &c, "command");
    }
    for a in list("argsOverrider") {
        container_list(m, &a, "args");
    }
    for l in list("labelsOverrider") {
        map_overrider(m, "labels", &l);
    }
    for a in list("annotationsOverrider") {
        map_overrider(m, "annotations", &a);
    }
}

fn plaintext(m: &mut Value, p: &Value) {
    let path = p["path"].as_str().unwrap_or_default();
    let op = match p["operator"].as_str() {
        Some("add") => "add",
        Some("remove") => "remove",
        Some("replace") => "replace",
        _ => return,
    };
    let mut patch = serde_json::json!({"op": op, "path": path});
    if op != "remove" {
        patch["value"] = p["value"].clone();
    }
    if let Ok(patch) = serde_json::from_value::<json_patch::Patch>(Value::Array(vec![patch])) {
        let mut next = m.clone();
        // Karmada skips a patch that does not apply rather than failing the Work.
        if json_patch::patch(&mut next, &patch).is_ok() {
            *m = next;
        }
    }
}

/// `[registry/]repository[:tag]`, split as Karmada's image overrider sees it.
fn split_image(image: &str) -> (String, String, String) {
    let (rest, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
        _ => (image.to_string(), String::new()),
    };
    match rest.split_once('/') {
        Some((first, repo))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), repo.to_string(), tag)
        }
        _ => (String::new(), rest, tag),
    }
}

fn join_image(registry: &str, repo: &str, tag: &str) -> String {
    let mut s = String::new();
    if !registry.is_empty() {
        s.push_str(registry);
        s.push('/');
    }
    s.push_str(repo);
    if !tag.is_empty() {
        s.push(':');
        s.push_str(tag);
    }
    s
}

fn containers(m: &mut Value) -> Vec<&mut Value> {
    let spec = if m.pointer("/spec/template/spec").is_some() {
        "/spec/template/spec"
    } else if m.pointer("/spec/jobTemplate/spec/template/spec").is_some() {
        "/spec/jobTemplate/spec/template/spec"
    } else {
        "/spec"
    };
    match m.pointer_mut(spec).and_then(Value::as_object_mut) {
        Some(pod) => pod
            .iter_mut()
            .filter(|(k, _)| *k == "containers" || *k == "initContainers")
            .filter_map(|(_, v)| v.as_array_mut())
            .flat_map(|a| a.iter_mut())
            .collect(),
        None => Vec::new(),
    }
}

fn image(m: &mut Value, o: &Value) {
    let value = o["value"].as_str().unwrap_or_default();
    let op = o["operator"].as_str().unwrap_or_default();
    let component = o["component"].as_str().unwrap_or_default();
    let edit = |img: &str| -> String {
        let (mut reg, mut repo, mut tag) = split_image(img);
        let field = match component {
            "Registry" => &mut reg,
            "Repository" => &mut repo,
            "Tag" => &mut tag,
            _ => return img.to_string(),
        };
        match op {
            "add" if component == "Registry" => *field = format!("{field}{value}"),
            "add" => *field = format!("{field}{value}"),
            "replace" => *field = value.to_string(),
            "remove" => field.clear(),
            _ => {}
        }
        join_image(&reg, &repo, &tag)
    };
    if let Some(path) = o["predicate"]["path"].as_str() {
        if let Some(v) = m.pointer_mut(path) {
            if let Some(img) = v.as_str().map(String::from) {
                *v = Value::String(edit(&img));
            }
        }
        return;
    }
    for c in containers(m) {
        if let Some(img) = c["image"].as_str().map(String::from) {
            c["image"] = Value::String(edit(&img));
        }
    }
}

fn container_list(m: &mut Value, o: &Value, field: &str) {
    let name = o["containerName"].as_str().unwrap_or_default();
    let values: Vec<Value> = o["value"].as_array().cloned().unwrap_or_default();
    for c in containers(m) {
        if c["name"].as_str() != Some(name) {
            continue;
        }
        let mut list = c[field].as_array().cloned().unwrap_or_default();
        match o["operator"].as_str() {
            Some("add") => list.extend(values.iter().cloned()),
            Some("remove") => list.retain(|v| !values.contains(v)),
            _ => {}
        }
        c[field] = Value::Array(list);
    }
}

fn map_overrider(m: &mut Value, field: &str, o: &Value) {
    let Some(meta) = m["metadata"].as_object_mut() else {
        return;
    };
    let map = meta
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !map.is_object() {
        *map = Value::Object(Map::new());
    }
    let Some(map) = map.as_object_mut() else {
        return;
    };
    for (k, v) in o["value"].as_object().into_iter().flatten() {
        match o["operator"].as_str() {
            Some("add") => {
                map.insert(k.clone(), v.clone());
            }
            Some("replace") if map.contains_key(k) => {
                map.insert(k.clone(), v.clone());
            }
            Some("remove") => {
                map.remove(k);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str) -> ClusterInfo {
        ClusterInfo {
            name: name.into(),
            ready: true,
            labels: json!({}),
            provider: String::new(),
            region: String::new(),
            zone: String::new(),
            taints: vec![],
            available: 10,
        }
    }

    fn nginx() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx", "bar": "x"}},
               "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx", "args": ["-a"]}]}}}})
    }

    #[test]
    fn the_sample_override_policy_changes_labels_on_member2_and_annotations_on_member1() {
        let op = json!({"metadata": {"name": "nginx-op", "namespace": "default"}, "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
            "overrideRules": [
                {"targetCluster": {"clusterNames": ["member2"]}, "overriders": {"labelsOverrider": [
                    {"operator": "add", "value": {"env": "skoala-dev"}},
                    {"operator": "remove", "value": {"for": "for"}},
                    {"operator": "replace", "value": {"bar": "test"}}]}},
                {"targetCluster": {"clusterNames": ["member1"]}, "overriders": {"annotationsOverrider": [
                    {"operator": "add", "value": {"env": "skoala-stage"}},
                    {"operator": "replace", "value": {"emma": "sophia"}}]}}]}});
        let t = nginx();
        let mut m2 = t.clone();
        assert_eq!(
            apply(&mut m2, &t, &cluster("member2"), &[], &[&op]),
            vec!["nginx-op"]
        );
        assert_eq!(
            m2["metadata"]["labels"],
            json!({"app": "nginx", "bar": "test", "env": "skoala-dev"})
        );
        let mut m1 = t.clone();
        apply(&mut m1, &t, &cluster("member1"), &[], &[&op]);
        assert_eq!(
            m1["metadata"]["annotations"],
            json!({"env": "skoala-stage"})
        );
        assert_eq!(m1["metadata"]["labels"], t["metadata"]["labels"]);
        let mut m3 = t.clone();
        assert!(apply(&mut m3, &t, &cluster("member3"), &[], &[&op]).is_empty());
    }

    #[test]
    fn image_command_args_and_plaintext() {
        let op = json!({"metadata": {"name": "o"}, "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "overrideRules": [{"overriders": {
                "imageOverrider": [{"component": "Registry", "operator": "replace", "value": "registry.eu.example"},
                                   {"component": "Tag", "operator": "replace", "value": "1.27"}],
                "argsOverrider": [{"containerName": "nginx", "operator": "add", "value": ["-b"]}],
                "commandOverrider": [{"containerName": "nginx", "operator": "add", "value": ["/run"]}],
                "plaintext": [{"path": "/spec/replicas", "operator": "replace", "value": 7}]}}]}});
        let mut t = nginx();
        t["spec"]["replicas"] = json!(1);
        let mut m = t.clone();
        apply(&mut m, &t, &cluster("member1"), &[&op], &[]);
        let c = &m["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "registry.eu.example/nginx:1.27");
        assert_eq!(c["args"], json!(["-a", "-b"]));
        assert_eq!(c["command"], json!(["/run"]));
        assert_eq!(m["spec"]["replicas"], 7);
        assert_eq!(
            split_image("docker.io/library/nginx:1.2"),
            ("docker.io".into(), "library/nginx".into(), "1.2".into())
        );
        assert_eq!(
            split_image("localhost:5000/app"),
            ("localhost:5000".into(), "app".into(), String::new())
        );
    }
}
