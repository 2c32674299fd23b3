//! The resource detector's choice of policy, as Karmada documents it: a
//! PropagationPolicy in the template's namespace before any ClusterPropagationPolicy;
//! among candidates, the higher explicit `spec.priority`, then the implicit priority of
//! the selector that matched (name > label selector > kind only), then the name.

use serde_json::Value;

/// How specifically a selector matched a template (Karmada's implicit priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    KindOnly = 1,
    Labels = 2,
    Name = 3,
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or_default()
}

pub fn labels_match(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let ok_labels = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    ok_labels
        && selector["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| {
                let values: Vec<&str> = e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let key = e["key"].as_str().unwrap_or_default();
                match e["operator"].as_str() {
                    Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                    Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
}

/// How one `resourceSelectors` entry matches a template, if it does.
pub fn selector_match(sel: &Value, template: &Value) -> Option<Match> {
    if s(sel, "/apiVersion") != s(template, "/apiVersion")
        || s(sel, "/kind") != s(template, "/kind")
    {
        return None;
    }
    let ns = s(template, "/metadata/namespace");
    if let Some(want) = sel["namespace"].as_str().filter(|n| !n.is_empty()) {
        if want != ns {
            return None;
        }
    }
    if let Some(name) = sel["name"].as_str().filter(|n| !n.is_empty()) {
        return (name == s(template, "/metadata/name")).then_some(Match::Name);
    }
    if sel.get("labelSelector").is_some_and(|l| !l.is_null()) {
        return labels_match(&sel["labelSelector"], &template["metadata"]["labels"])
            .then_some(Match::Labels);
    }
    Some(Match::KindOnly)
}

/// The best match of a policy's selectors for a template.
pub fn policy_match(policy: &Value, template: &Value) -> Option<Match> {
    policy["spec"]["resourceSelectors"]
        .as_array()?
        .iter()
        .filter_map(|sel| selector_match(sel, template))
        .max()
}

/// The policy that claims `template`: namespaced policies (same namespace) first, then
/// cluster-wide ones. Returns its index in `policies` (namespaced) or `cluster` (offset by
/// `policies.len()`).
pub fn choose(policies: &[&Value], cluster: &[&Value], template: &Value) -> Option<usize> {
    let ns = s(template, "/metadata/namespace");
    let best = |cands: &[&Value], offset: usize, cluster_wide: bool| {
        cands
            .iter()
            .enumerate()
            .filter(|(_, p)| cluster_wide || s(p, "/metadata/namespace") == ns)
            .filter_map(|(i, p)| {
                let m = policy_match(p, template)?;
                let prio = p["spec"]["priority"].as_i64().unwrap_or(0);
                Some((
                    prio,
                    m,
                    std::cmp::Reverse(s(p, "/metadata/name").to_string()),
                    i + offset,
                ))
            })
            .max()
            .map(|t| t.3)
    };
    if ns.is_empty() {
        return best(cluster, policies.len(), true);
    }
    best(policies, 0, false).or_else(|| best(cluster, policies.len(), true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default", "labels": labels}})
    }

    fn pp(name: &str, prio: i64, sel: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"priority": prio, "resourceSelectors": [sel]}})
    }

    #[test]
    fn name_beats_labels_beats_kind_and_explicit_priority_beats_all() {
        let d = deploy("web", json!({"app": "web"}));
        let kind = pp(
            "a-kind",
            0,
            json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
        );
        let labels = pp(
            "b-labels",
            0,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "web"}}}),
        );
        let name = pp(
            "c-name",
            0,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}),
        );
        assert_eq!(choose(&[&kind, &labels], &[], &d), Some(1));
        assert_eq!(choose(&[&kind, &labels, &name], &[], &d), Some(2));
        let urgent = pp(
            "d-kind",
            5,
            json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
        );
        assert_eq!(choose(&[&kind, &labels, &name, &urgent], &[], &d), Some(3));
        let other = pp(
            "x",
            0,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}),
        );
        assert_eq!(choose(&[&other], &[], &d), None);
    }

    #[test]
    fn namespaced_policies_win_over_cluster_policies() {
        let d = deploy("web", json!({}));
        let cpp = json!({"metadata": {"name": "all"}, "spec": {"priority": 100, "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}]}});
        let kind = pp(
            "kind",
            0,
            json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
        );
        assert_eq!(choose(&[&kind], &[&cpp], &d), Some(0));
        assert_eq!(choose(&[], &[&cpp], &d), Some(0));
    }

    #[test]
    fn match_expressions() {
        let sel = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}, {"key": "x", "operator": "DoesNotExist"}]});
        assert!(labels_match(&sel, &json!({"tier": "a"})));
        assert!(!labels_match(&sel, &json!({"tier": "c"})));
        assert!(!labels_match(&sel, &json!({"tier": "a", "x": "1"})));
    }
}
