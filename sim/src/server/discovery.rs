//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`, `/version`.

use serde_json::{json, Value};

use crate::resources::Registry;

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    reg.groups().get(name).map(|vs| {
        let mut d = group_doc(name, vs);
        d["kind"] = "APIGroup".into();
        d["apiVersion"] = "v1".into();
        d
    })
}

/// The `APIResourceList` of one group/version, or `None` when nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for d in reg
        .all()
        .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
    {
        let mut r = json!({
            "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind,
            "verbs": if crate::resources::is_review(d) { &["create"][..] } else { VERBS },
        });
        // kube-apiserver leaves empty lists out (omitempty).
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if super::scale::served(d) {
            resources.push(json!({
                "name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
        if d.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
                "kind": d.kind, "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// The Kubernetes minor version the simulator reports: the real fleet's, whose schemas
/// it serves.
pub const MINOR: &str = "35";

pub fn version() -> Value {
    json!({
        "major": "1", "minor": MINOR, "gitVersion": format!("v1.{MINOR}.3"), "gitCommit": "kairship-sim",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0",
        "compiler": "gc", "platform": "linux/amd64",
    })
}
