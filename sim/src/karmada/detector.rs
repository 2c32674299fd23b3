//! The resource detector: which (Cluster)PropagationPolicy claims a resource template,
//! and the ResourceBinding it leads to, named and labelled as Karmada does.

use serde_json::{json, Value};

pub use kairship_wire::policy_claim::{
    pick, policy_match, Implicit, CPP_ID, CPP_NAME, CRB_ID, PP_ID, PP_NAME, PP_NAMESPACE, RB_ID,
};

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
