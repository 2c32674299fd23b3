//! `InstanceClass`: one description of many managed instances (issue 55), as Cluster
//! API's ClusterClass is for clusters: the Karmada release, a Karmada spec fragment
//! (component replicas and resources, feature gates, extra arguments) and a maintenance
//! window. An Instance names its class (`spec.className`); when it is created the class
//! is written into its Karmada spec under what the Instance sets itself, which is kept in
//! `spec.managed.overrides` and wins then and at every later class rollout. A class
//! change moves no instance by itself: `status.drift` on each Instance lists, field by
//! field, where it differs from its class, and a `FleetRollout` naming the class brings
//! them in line wave by wave.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::instance::preserve_unknown;
use super::karmada_spec;
use super::MaintenanceWindowSpec;

/// What the instances of a class share.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[kube(
    group = "kairship.io",
    version = "v1alpha1",
    kind = "InstanceClass",
    plural = "instanceclasses",
    shortname = "kic",
    category = "kairship",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.karmadaVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceClassSpec {
    /// What the class is for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The Karmada release its instances run (v1.18.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karmada_version: Option<String>,
    /// A karmada-operator `Karmada` spec fragment: component replicas and resources,
    /// feature gates, extra arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub karmada_spec: Option<Value>,
    /// When fleet rollouts may change its instances, unless an instance sets its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindowSpec>,
    /// Objects pushed into each of its instances (`crd::guardrail`): RBAC, admission
    /// policies, default PropagationPolicies and FederatedResourceQuotas.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::guardrail::schema")]
    pub guardrails: Vec<Value>,
}

/// One field where an instance differs from its class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClassDrift {
    /// The field in the Karmada spec, as a JSON pointer (`/components/etcd/local/replicas`),
    /// or `guardrails` (the objects each lists: `crd::guardrail::drift`).
    pub field: String,
    /// The class's value and the instance's, as JSON (`null`: not set).
    pub class: String,
    pub instance: String,
    /// The instance sets this itself (`spec.managed.overrides`): a class rollout keeps it.
    #[serde(default)]
    pub overridden: bool,
}

impl InstanceClassSpec {
    /// The Karmada spec fragment the class gives its instances.
    pub fn fragment(&self) -> Value {
        let mut out = Value::Object(Map::new());
        if let Some(v) = &self.karmada_version {
            karmada_spec::merge(&mut out, &karmada_spec::for_version(v));
        }
        if let Some(s) = &self.karmada_spec {
            karmada_spec::merge(&mut out, s);
        }
        out
    }
}

/// Every leaf of `v` with its JSON pointer, in order.
fn leaves(v: &Value, at: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let key = k.replace('~', "~0").replace('/', "~1");
                leaves(child, &format!("{at}/{key}"), out);
            }
        }
        other => out.push((at.to_string(), other.clone())),
    }
}

/// Where the Karmada spec `spec` differs from what `class` gives, field by field; a field
/// `overrides` sets is marked as the instance's own.
pub fn drift(
    class: &InstanceClassSpec,
    spec: &Value,
    overrides: Option<&Value>,
) -> Vec<ClassDrift> {
    let mut wanted = Vec::new();
    leaves(&class.fragment(), "", &mut wanted);
    wanted
        .into_iter()
        .filter_map(|(field, want)| {
            let have = spec.pointer(&field).cloned().unwrap_or(Value::Null);
            (have != want).then(|| ClassDrift {
                overridden: overrides.is_some_and(|o| o.pointer(&field).is_some()),
                class: want.to_string(),
                instance: have.to_string(),
                field,
            })
        })
        .collect()
}

/// The Karmada spec `spec` brought in line with `class`, what `overrides` sets kept.
pub fn applied(class: &InstanceClassSpec, spec: &Value, overrides: Option<&Value>) -> Value {
    let mut out = spec.clone();
    karmada_spec::merge(&mut out, &class.fragment());
    if let Some(o) = overrides {
        karmada_spec::merge(&mut out, o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class() -> InstanceClassSpec {
        InstanceClassSpec {
            karmada_version: Some("v1.18.2".into()),
            karmada_spec: Some(json!({
                "featureGates": {"Failover": true},
                "components": {"karmadaScheduler": {"replicas": 2}}
            })),
            ..Default::default()
        }
    }

    #[test]
    fn drift_lists_each_field_and_a_rollout_keeps_the_instances_own() {
        let own = json!({"components": {"karmadaScheduler": {"replicas": 3}}});
        let mut spec = applied(&class(), &json!({}), Some(&own));
        assert_eq!(
            spec["components"]["karmadaScheduler"]["replicas"], 3,
            "the instance wins"
        );
        assert_eq!(
            spec["components"]["karmadaScheduler"]["imageTag"],
            "v1.18.2"
        );
        let d = drift(&class(), &spec, Some(&own));
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].field, "/components/karmadaScheduler/replicas");
        assert!(d[0].overridden);
        // Someone turned a gate off behind the class's back: drift, and a rollout of the
        // class turns it on again while the instance's own replicas stay.
        spec["featureGates"]["Failover"] = json!(false);
        let d = drift(&class(), &spec, Some(&own));
        let gate = d
            .iter()
            .find(|x| x.field == "/featureGates/Failover")
            .expect("the gate");
        assert_eq!(
            (gate.class.as_str(), gate.instance.as_str(), gate.overridden),
            ("true", "false", false)
        );
        let back = applied(&class(), &spec, Some(&own));
        assert_eq!(back["featureGates"]["Failover"], true);
        assert_eq!(back["components"]["karmadaScheduler"]["replicas"], 3);
        assert_eq!(
            drift(&class(), &back, Some(&own))
                .iter()
                .filter(|x| !x.overridden)
                .count(),
            0
        );
    }
}
