//! Structured selectors as Karmada's policies spell them: `metav1.LabelSelector`
//! (matchLabels, matchExpressions) and the cluster `fieldSelector` on provider/region/zone.

use serde_json::Value;

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// One `{key, operator, values}` requirement against a lookup of the subject's values.
fn requirement<'a>(req: &Value, get: impl Fn(&str) -> Option<&'a str>) -> bool {
    let key = req["key"].as_str().unwrap_or_default();
    let values = strings(&req["values"]);
    let have = get(key);
    match req["operator"].as_str().unwrap_or_default() {
        "In" => have.is_some_and(|h| values.contains(&h)),
        "NotIn" => have.is_none_or(|h| !values.contains(&h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        // Unknown operators select nothing, as the API server would have rejected them.
        _ => false,
    }
}

/// Whether a `metav1.LabelSelector` matches `labels`; an empty selector matches everything.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| get(k) == v.as_str()));
    let exprs_ok = selector["matchExpressions"]
        .as_array()
        .is_none_or(|es| es.iter().all(|e| requirement(e, get)));
    labels_ok && exprs_ok
}

/// Karmada's cluster `fieldSelector`: requirements on `provider`, `region` and `zone`.
pub fn field_selector_matches(selector: &Value, cluster: &Value) -> bool {
    let get = |k: &str| match k {
        "provider" | "region" | "zone" => cluster["spec"][k].as_str(),
        _ => None,
    };
    selector["matchExpressions"]
        .as_array()
        .is_none_or(|es| es.iter().all(|e| requirement(e, get)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn match_labels_and_expressions() {
        let labels = json!({"app": "nginx", "tier": "web"});
        assert!(label_selector_matches(&json!({}), &labels));
        assert!(label_selector_matches(
            &json!({"matchLabels": {"app": "nginx"}}),
            &labels
        ));
        assert!(!label_selector_matches(
            &json!({"matchLabels": {"app": "redis"}}),
            &labels
        ));
        let sel = |op: &str, vals: Value| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": vals}]});
        assert!(label_selector_matches(
            &sel("In", json!(["web", "db"])),
            &labels
        ));
        assert!(!label_selector_matches(
            &sel("NotIn", json!(["web"])),
            &labels
        ));
        assert!(label_selector_matches(&sel("Exists", json!([])), &labels));
        assert!(!label_selector_matches(
            &sel("DoesNotExist", json!([])),
            &labels
        ));
        assert!(!label_selector_matches(&sel("Bogus", json!([])), &labels));
    }

    #[test]
    fn field_selector_reads_cluster_spec() {
        let cluster = json!({"spec": {"provider": "aws", "region": "eu-west-1", "zone": "a"}});
        let sel = json!({"matchExpressions": [
            {"key": "region", "operator": "In", "values": ["eu-west-1"]},
            {"key": "provider", "operator": "NotIn", "values": ["gcp"]},
        ]});
        assert!(field_selector_matches(&sel, &cluster));
        let sel = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]});
        assert!(!field_selector_matches(&sel, &cluster));
    }
}
