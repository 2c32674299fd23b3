//! RBAC as kube-apiserver's RBAC authorizer evaluates it: pure functions over the role and
//! binding objects, so the decisions are unit-tested without a server.

use std::collections::HashSet;

use serde_json::Value;

use super::{Attributes, Identity};

/// The RBAC objects a decision reads (whole objects, as stored).
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub cluster_roles: Vec<Value>,
    pub cluster_role_bindings: Vec<Value>,
    pub roles: Vec<Value>,
    pub role_bindings: Vec<Value>,
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn has(list: &[&str], want: &str) -> bool {
    list.iter().any(|x| *x == "*" || *x == want)
}

/// Whether one `PolicyRule` covers the request.
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    if !has(&strs(&rule["verbs"]), &a.verb) {
        return false;
    }
    if let Some(path) = &a.non_resource_path {
        return strs(&rule["nonResourceURLs"]).iter().any(|u| {
            *u == "*" || *u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    if !has(&strs(&rule["apiGroups"]), &a.group) {
        return false;
    }
    let resource = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let resources = strs(&rule["resources"]);
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == resource
            // `*/scale` style: any resource's named subresource.
            || (a.subresource.is_some() && r.strip_prefix("*/") == a.subresource.as_deref())
    });
    if !resource_ok {
        return false;
    }
    let names = strs(&rule["resourceNames"]);
    names.is_empty() || a.name.as_deref().is_some_and(|n| names.contains(&n))
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    if let Some(ml) = selector["matchLabels"].as_object() {
        if !ml.iter().all(|(k, v)| label(k) == v.as_str()) {
            return false;
        }
    }
    selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values = strs(&e["values"]);
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        })
}

fn name_of(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// A ClusterRole's rules, its own or (with an `aggregationRule`) those of every ClusterRole
/// its selectors match, followed through further aggregations as the aggregation
/// controller's repeated passes would.
pub fn cluster_role_rules<'a>(snap: &'a Snapshot, name: &str) -> Vec<&'a Value> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    collect(snap, name, &mut seen, &mut out);
    out
}

fn collect<'a>(
    snap: &'a Snapshot,
    name: &str,
    seen: &mut HashSet<String>,
    out: &mut Vec<&'a Value>,
) {
    if !seen.insert(name.to_string()) {
        return;
    }
    let Some(role) = snap.cluster_roles.iter().find(|r| name_of(r) == name) else {
        return;
    };
    match role["aggregationRule"]["clusterRoleSelectors"].as_array() {
        Some(selectors) => {
            for other in &snap.cluster_roles {
                let labels = &other["metadata"]["labels"];
                if selectors.iter().any(|s| labels_match(s, labels)) {
                    collect(snap, name_of(other), seen, out);
                }
            }
        }
        None => out.extend(role["rules"].as_array().into_iter().flatten()),
    }
}

fn subject_matches(subject: &Value, who: &Identity, binding_ns: Option<&str>) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => who.user == name,
        Some("Group") => who.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"]
                .as_str()
                .or(binding_ns)
                .unwrap_or_default();
            who.user == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn binds(binding: &Value, who: &Identity, ns: Option<&str>) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| subject_matches(s, who, ns))
}

/// Allowed, with the binding that allowed it (kube-apiserver's reason), or denied.
pub fn decide(snap: &Snapshot, who: &Identity, a: &Attributes) -> Option<String> {
    let allows = |rules: Vec<&Value>| rules.into_iter().any(|r| rule_allows(r, a));
    for b in &snap.cluster_role_bindings {
        if binds(b, who, None)
            && b["roleRef"]["kind"] == "ClusterRole"
            && allows(cluster_role_rules(
                snap,
                b["roleRef"]["name"].as_str().unwrap_or_default(),
            ))
        {
            return Some(format!("allowed by ClusterRoleBinding {:?}", name_of(b)));
        }
    }
    let ns = a.namespace.as_deref()?;
    for b in &snap.role_bindings {
        if b["metadata"]["namespace"].as_str() != Some(ns) || !binds(b, who, Some(ns)) {
            continue;
        }
        let role = b["roleRef"]["name"].as_str().unwrap_or_default();
        let rules = match b["roleRef"]["kind"].as_str() {
            Some("ClusterRole") => cluster_role_rules(snap, role),
            Some("Role") => snap
                .roles
                .iter()
                .find(|r| name_of(r) == role && r["metadata"]["namespace"].as_str() == Some(ns))
                .map(|r| r["rules"].as_array().into_iter().flatten().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if allows(rules) {
            return Some(format!("allowed by RoleBinding {:?} in {ns:?}", name_of(b)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::defaults;
    use serde_json::json;

    fn attrs(verb: &str, group: &str, resource: &str, ns: Option<&str>) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: None,
            namespace: ns.map(String::from),
            name: None,
            non_resource_path: None,
        }
    }

    fn user(name: &str, groups: &[&str]) -> Identity {
        Identity {
            user: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn snapshot_with(bindings: Vec<Value>) -> Snapshot {
        Snapshot {
            cluster_roles: defaults::cluster_roles(),
            cluster_role_bindings: bindings,
            ..Default::default()
        }
    }

    fn crb(name: &str, role: &str, group: &str) -> Value {
        json!({"metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "Group", "name": group}]})
    }

    #[test]
    fn default_view_reads_workloads_but_not_secrets() {
        let snap = snapshot_with(vec![crb("v", "view", "viewers")]);
        let v = user("vera", &["viewers"]);
        assert!(decide(
            &snap,
            &v,
            &attrs("list", "apps", "deployments", Some("default"))
        )
        .is_some());
        assert!(decide(&snap, &v, &attrs("watch", "", "configmaps", Some("x"))).is_some());
        assert!(decide(&snap, &v, &attrs("list", "", "secrets", Some("default"))).is_none());
        assert!(decide(
            &snap,
            &v,
            &attrs("get", "", "secrets", Some("karmada-cluster"))
        )
        .is_none());
        assert!(decide(
            &snap,
            &v,
            &attrs("create", "apps", "deployments", Some("d"))
        )
        .is_none());
    }

    #[test]
    fn edit_aggregates_view_and_writes_but_not_rbac() {
        let snap = snapshot_with(vec![crb("e", "edit", "editors")]);
        let e = user("ed", &["editors"]);
        assert!(decide(
            &snap,
            &e,
            &attrs("create", "apps", "deployments", Some("d"))
        )
        .is_some());
        assert!(decide(&snap, &e, &attrs("list", "apps", "deployments", Some("d"))).is_some());
        assert!(decide(&snap, &e, &attrs("get", "", "secrets", Some("d"))).is_some());
        assert!(decide(
            &snap,
            &e,
            &attrs(
                "create",
                "rbac.authorization.k8s.io",
                "rolebindings",
                Some("d")
            )
        )
        .is_none());
        assert!(decide(
            &snap,
            &e,
            &attrs("create", "rbac.authorization.k8s.io", "clusterroles", None)
        )
        .is_none());
    }

    #[test]
    fn aggregation_follows_labels_added_later() {
        let mut snap = snapshot_with(vec![crb("v", "view", "viewers")]);
        let v = user("vera", &["viewers"]);
        let a = attrs(
            "list",
            "policy.karmada.io",
            "propagationpolicies",
            Some("default"),
        );
        assert!(decide(&snap, &v, &a).is_none());
        snap.cluster_roles.push(json!({"metadata": {"name": "karmada-view",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": ["policy.karmada.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}));
        assert!(decide(&snap, &v, &a).is_some());
    }

    #[test]
    fn role_bindings_are_namespaced_and_resource_names_narrow() {
        let snap = Snapshot {
            roles: vec![json!({"metadata": {"name": "one", "namespace": "a"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["c1"], "verbs": ["get"]}]})],
            role_bindings: vec![json!({"metadata": {"name": "rb", "namespace": "a"},
                "roleRef": {"kind": "Role", "name": "one"}, "subjects": [{"kind": "User", "name": "u"}]})],
            ..Default::default()
        };
        let u = user("u", &[]);
        let mut a = attrs("get", "", "configmaps", Some("a"));
        a.name = Some("c1".into());
        assert!(decide(&snap, &u, &a).is_some());
        a.name = Some("c2".into());
        assert!(decide(&snap, &u, &a).is_none());
        a.name = Some("c1".into());
        a.namespace = Some("b".into());
        assert!(decide(&snap, &u, &a).is_none());
    }

    #[test]
    fn masters_are_bound_to_cluster_admin() {
        let snap = Snapshot {
            cluster_roles: defaults::cluster_roles(),
            cluster_role_bindings: defaults::cluster_role_bindings(),
            ..Default::default()
        };
        let admin = user("admin", &["system:masters"]);
        assert!(decide(&snap, &admin, &attrs("delete", "", "secrets", Some("x"))).is_some());
        let mut nr = attrs("get", "", "", None);
        nr.non_resource_path = Some("/version".into());
        assert!(decide(&snap, &user("anyone", &["system:authenticated"]), &nr).is_some());
    }
}
