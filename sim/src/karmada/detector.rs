//! The resource detector: which (Cluster)PropagationPolicy claims a resource template,
//! and the ResourceBinding it leads to, named and labelled as Karmada does.

use serde_json::{json, Value};

use super::selector::label_selector_matches;

/// How specifically a resource selector matches a template (Karmada's implicit priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Implicit {
    /// apiVersion and kind only.
    All = 1,
    LabelSelector = 2,
    Name = 3,
}

pub const PP_NAME: &str = "propagationpolicy.karmada.io/name";
pub const PP_NAMESPACE: &str = "propagationpolicy.karmada.io/namespace";
pub const PP_ID: &str = "propagationpolicy.karmada.io/permanent-id";
pub const CPP_NAME: &str = "clusterpropagationpolicy.karmada.io/name";
pub const CPP_ID: &str = "clusterpropagationpolicy.karmada.io/permanent-id";
pub const RB_ID: &str = "resourcebinding.karmada.io/permanent-id";
pub const CRB_ID: &str = "clusterresourcebinding.karmada.io/permanent-id";

/// How one `resourceSelectors` entry matches `template`, if it does.
pub fn selector_match(sel: &Value, template: &Value) -> Option<Implicit> {
    if sel["apiVersion"].as_str() != template["apiVersion"].as_str()
        || sel["kind"].as_str() != template["kind"].as_str()
    {
        return None;
    }
    let meta = &template["metadata"];
    if let Some(ns) = sel["namespace"].as_str().filter(|s| !s.is_empty()) {
        if meta["namespace"].as_str() != Some(ns) {
            return None;
        }
    }
    if let Some(name) = sel["name"].as_str().filter(|s| !s.is_empty()) {
        // A name wins over a label selector: Karmada ignores the selector then.
        return (meta["name"].as_str() == Some(name)).then_some(Implicit::Name);
    }
    if sel.get("labelSelector").is_some_and(|l| !l.is_null()) {
        let empty = json!({});
        let labels = meta.get("labels").unwrap_or(&empty);
        return label_selector_matches(&sel["labelSelector"], labels)
            .then_some(Implicit::LabelSelector);
    }
    Some(Implicit::All)
}

/// The best match among a policy's selectors.
pub fn policy_match(policy: &Value, template: &Value) -> Option<Implicit> {
    policy["spec"]["resourceSelectors"]
        .as_array()?
        .iter()
        .filter_map(|s| selector_match(s, template))
        .max()
}

/// The policy that claims `template`: highest explicit `spec.priority`, then implicit
/// priority, then the alphabetically first name.
pub fn pick<'a>(policies: &'a [Value], template: &Value) -> Option<&'a Value> {
    policies
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| policy_match(p, template).map(|m| (p, m)))
        .min_by(|(a, ma), (b, mb)| {
            let prio = |p: &Value| p["spec"]["priority"].as_i64().unwrap_or(0);
            prio(b).cmp(&prio(a)).then(mb.cmp(ma)).then(
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str()),
            )
        })
        .map(|(p, _)| p)
}

/// Karmada's binding name: `<name>-<kind>`, lowercased, with the `:` that RBAC names may
/// hold (`system:...`, `kairship:view`) made `.`, since a binding's name must be a DNS
/// subdomain (Karmada's `names.GenerateBindingName`).
pub fn binding_name(name: &str, kind: &str) -> String {
    format!("{}-{kind}", name.replace(':', ".")).to_lowercase()
}

/// Replicas a template asks for, as the default resource interpreter reads them.
pub fn replicas(template: &Value) -> i64 {
    match template["kind"].as_str() {
        Some("Deployment") | Some("StatefulSet") => {
            template["spec"]["replicas"].as_i64().unwrap_or(1)
        }
        Some("Job") => template["spec"]["parallelism"].as_i64().unwrap_or(1),
        _ => 0,
    }
}

/// The per-replica resource request: the sum of the pod template's container requests.
pub fn replica_requirements(template: &Value) -> Option<Value> {
    let containers = template
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    let mut sums: std::collections::BTreeMap<String, f64> = Default::default();
    for c in containers {
        if let Some(reqs) = c.pointer("/resources/requests").and_then(Value::as_object) {
            for (k, v) in reqs {
                if let Some(q) = v.as_str().and_then(super::scheduler::parse_quantity) {
                    *sums.entry(k.clone()).or_default() += q;
                }
            }
        }
    }
    if sums.is_empty() {
        return None;
    }
    let request: serde_json::Map<String, Value> = sums
        .into_iter()
        .map(|(k, v)| {
            let q = if k == "cpu" {
                format!("{}m", (v * 1000.0).round() as i64)
            } else {
                format!("{}", v.round() as i64)
            };
            (k, q.into())
        })
        .collect();
    Some(json!({"resourceRequest": request}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(name: &str, priority: Option<i64>, sel: Value) -> Value {
        let mut p = json!({"metadata": {"name": name}, "spec": {"resourceSelectors": [sel]}});
        if let Some(pr) = priority {
            p["spec"]["priority"] = pr.into();
        }
        p
    }

    fn nginx() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}}})
    }

    #[test]
    fn selector_matching() {
        let t = nginx();
        let sel = |v: Value| selector_match(&v, &t);
        assert_eq!(
            sel(json!({"apiVersion": "apps/v1", "kind": "Deployment"})),
            Some(Implicit::All)
        );
        assert_eq!(
            sel(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"})),
            Some(Implicit::Name)
        );
        assert_eq!(
            sel(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}})
            ),
            Some(Implicit::LabelSelector)
        );
        assert_eq!(
            sel(json!({"apiVersion": "apps/v1", "kind": "StatefulSet"})),
            None
        );
        assert_eq!(sel(json!({"apiVersion": "v1", "kind": "Deployment"})), None);
        assert_eq!(
            sel(json!({"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other"})),
            None
        );
        // A name that does not match is no match, whatever the label selector says.
        assert_eq!(
            sel(
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "x", "labelSelector": {"matchLabels": {"app": "nginx"}}})
            ),
            None
        );
    }

    #[test]
    fn explicit_then_implicit_priority_then_name() {
        let t = nginx();
        let kind_only = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        let by_name = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"});
        let by_label = json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "nginx"}}});
        let ps = vec![
            policy("a-all", None, kind_only.clone()),
            policy("b-label", None, by_label.clone()),
            policy("c-name", None, by_name.clone()),
        ];
        assert_eq!(
            pick(&ps, &t).expect("a value")["metadata"]["name"],
            "c-name"
        );
        let ps = vec![
            policy("a-all", Some(5), kind_only.clone()),
            policy("c-name", None, by_name),
        ];
        assert_eq!(pick(&ps, &t).expect("a value")["metadata"]["name"], "a-all");
        let ps = vec![
            policy("z", None, by_label.clone()),
            policy("m", None, by_label),
        ];
        assert_eq!(pick(&ps, &t).expect("a value")["metadata"]["name"], "m");
        assert!(pick(&[], &t).is_none());
    }

    #[test]
    fn names_and_replicas() {
        assert_eq!(binding_name("nginx", "Deployment"), "nginx-deployment");
        assert_eq!(
            binding_name("kairship:view", "ClusterRoleBinding"),
            "kairship.view-clusterrolebinding"
        );
        assert_eq!(
            replicas(&json!({"kind": "Deployment", "spec": {"replicas": 4}})),
            4
        );
        assert_eq!(replicas(&json!({"kind": "Deployment", "spec": {}})), 1);
        assert_eq!(replicas(&json!({"kind": "ConfigMap"})), 0);
        let t = json!({"spec": {"template": {"spec": {"containers": [
            {"resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}},
            {"resources": {"requests": {"cpu": "1"}}},
        ]}}}});
        let r = replica_requirements(&t).expect("a value");
        assert_eq!(r["resourceRequest"]["cpu"], "1250m");
        assert_eq!(
            r["resourceRequest"]["memory"],
            (64 * 1024 * 1024).to_string()
        );
    }
}
