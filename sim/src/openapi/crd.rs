//! A CustomResourceDefinition's schemas as kube-apiserver publishes them: one definition
//! per served version, named by the reversed group (`io.karmada.policy.v1alpha1.
//! PropagationPolicy`), with `apiVersion`, `kind` and `metadata` declared.

use std::sync::Arc;

use serde_json::{json, Value};

use super::Gvk;

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// One served version of a CRD: its kind, definition name and schema.
pub struct CrdVersion {
    pub gvk: Gvk,
    pub name: String,
    pub schema: Arc<Value>,
}

/// The served versions of a CRD object, with their schemas ready to publish.
pub fn versions(crd: &Value) -> Vec<CrdVersion> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for v in spec["versions"].as_array().into_iter().flatten() {
        let (Some(version), true) = (v["name"].as_str(), v["served"].as_bool() != Some(false))
        else {
            continue;
        };
        let gvk = Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        };
        let stored = &v["schema"]["openAPIV3Schema"];
        let schema = super::karmada::resolve(stored, &gvk)
            .unwrap_or_else(|| Arc::new(published(stored, &gvk)));
        out.push(CrdVersion {
            name: definition_name(&gvk),
            schema,
            gvk,
        });
    }
    out
}

/// A kind served without a schema here (an aggregated API's): any fields are kept.
pub fn open(gvk: &Gvk) -> CrdVersion {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    CrdVersion {
        name: definition_name(gvk),
        schema: Arc::new(published(&schema, gvk)),
        gvk: gvk.clone(),
    }
}

/// kube-apiserver's name for a custom kind's definition: the group reversed.
fn definition_name(gvk: &Gvk) -> String {
    let reversed: Vec<&str> = gvk.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), gvk.version, gvk.kind)
}

/// A CRD version's schema as published: `apiVersion`, `kind` and `metadata` declared.
pub(super) fn published(schema: &Value, gvk: &Gvk) -> Value {
    let mut s = match schema {
        Value::Object(_) => schema.clone(),
        _ => json!({"type": "object"}),
    };
    let props = s
        .as_object_mut()
        .map(|o| o.entry("properties").or_insert_with(|| json!({})));
    if let Some(Value::Object(props)) = props {
        props
            .entry("apiVersion")
            .or_insert_with(|| json!({"description": API_VERSION, "type": "string"}));
        props
            .entry("kind")
            .or_insert_with(|| json!({"description": KIND, "type": "string"}));
        props.insert(
            "metadata".into(),
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "description": METADATA}),
        );
    }
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": gvk.group, "kind": gvk.kind, "version": gvk.version}]);
    s
}
