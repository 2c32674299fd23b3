//! Which (Cluster)PropagationPolicy claims a resource template, by Karmada's rules
//! (explicit `spec.priority`, then how specifically a selector matches, then the name), and
//! the labels and annotations in which Karmada records the claim on the template. Shared by
//! the simulator's resource detector and Kairship's workload view (for a template whose
//! claim Karmada has not recorded yet).

use serde_json::{json, Value};

use crate::label_selector::label_selector_matches;

/// How specifically a resource selector matches a template (Karmada's implicit priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Implicit {
    /// apiVersion and kind only.
    All = 1,
    LabelSelector = 2,
    Name = 3,
}

/// The claim's records on a template (annotations for the names, labels for the ids).
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
pub fn pick<'a>(
    policies: impl IntoIterator<Item = &'a Value>,
    template: &Value,
) -> Option<&'a Value> {
    policies
        .into_iter()
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
}
