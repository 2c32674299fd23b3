//! Schemas of the built-in kinds the simulator serves, from `k8s-openapi`'s generated
//! schemas of the Kubernetes release the real fleet runs, named as kube-apiserver names
//! them (`io.k8s.api.apps.v1.Deployment`), with the extensions kube-apiserver publishes
//! that clients act on: the group-version-kind of each kind and the list semantics that
//! strategic merge patch and server-side apply follow.

use std::sync::OnceLock;

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authorization::v1 as authz,
    autoscaling::v1 as autoscaling, batch::v1 as batch, coordination::v1 as coordination,
    core::v1 as core, rbac::v1 as rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use super::Gvk;

/// Built-in definitions (references as `#/definitions/{name}`) and the kinds among them.
pub struct Builtins {
    pub definitions: Map<String, Value>,
    pub kinds: Vec<(Gvk, String)>,
}

/// The extensions kube-apiserver publishes on the built-in kinds that merging acts on
/// (strategic merge patch and server-side apply): how a list's items are told apart, maps
/// set only as a whole, patch strategies. `x-kubernetes-` is left out of each name; lists
/// not named here are atomic. Definitions are named from `io.k8s.api.`, except `meta.v1.`,
/// `apiextensions.v1.` and `apiregistration.v1.` (see [`full_name`]).
const EXTENSIONS: &[(&str, &str, &str)] = &[
    ("apps.v1.DaemonSetStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("apps.v1.DeploymentSpec", "strategy", "patch-strategy=retainKeys"),
    ("apps.v1.DeploymentStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("apps.v1.ReplicaSetStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("apps.v1.StatefulSetStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("batch.v1.JobStatus", "conditions", "list-type=atomic patch-merge-key=type patch-strategy=merge"),
    ("batch.v1.PodFailurePolicyOnExitCodesRequirement", "values", "list-type=set"),
    ("batch.v1.UncountedTerminatedPods", "failed", "list-type=set"),
    ("batch.v1.UncountedTerminatedPods", "succeeded", "list-type=set"),
    ("core.v1.ConfigMapKeySelector", "", "map-type=atomic"),
    ("core.v1.Container", "env", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.Container", "ports", "list-type=map list-map-keys=containerPort,protocol patch-merge-key=containerPort patch-strategy=merge"),
    ("core.v1.Container", "volumeDevices", "list-type=map list-map-keys=devicePath patch-merge-key=devicePath patch-strategy=merge"),
    ("core.v1.Container", "volumeMounts", "list-type=map list-map-keys=mountPath patch-merge-key=mountPath patch-strategy=merge"),
    ("core.v1.ContainerRestartRuleOnExitCodes", "values", "list-type=set"),
    ("core.v1.ContainerStatus", "allocatedResourcesStatus", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.ContainerStatus", "volumeMounts", "list-type=map list-map-keys=mountPath patch-merge-key=mountPath patch-strategy=merge"),
    ("core.v1.EphemeralContainer", "env", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.EphemeralContainer", "ports", "list-type=map list-map-keys=containerPort,protocol patch-merge-key=containerPort patch-strategy=merge"),
    ("core.v1.EphemeralContainer", "volumeDevices", "list-type=map list-map-keys=devicePath patch-merge-key=devicePath patch-strategy=merge"),
    ("core.v1.EphemeralContainer", "volumeMounts", "list-type=map list-map-keys=mountPath patch-merge-key=mountPath patch-strategy=merge"),
    ("core.v1.FileKeySelector", "", "map-type=atomic"),
    ("core.v1.LocalObjectReference", "", "map-type=atomic"),
    ("core.v1.NamespaceStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.NodeSelector", "", "map-type=atomic"),
    ("core.v1.NodeSelectorTerm", "", "map-type=atomic"),
    ("core.v1.NodeSpec", "podCIDRs", "list-type=set patch-strategy=merge"),
    ("core.v1.NodeStatus", "addresses", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.NodeStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.ObjectFieldSelector", "", "map-type=atomic"),
    ("core.v1.ObjectReference", "", "map-type=atomic"),
    ("core.v1.PersistentVolumeClaimStatus", "allocatedResourceStatuses", "map-type=granular"),
    ("core.v1.PersistentVolumeClaimStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.PodSpec", "containers", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.PodSpec", "ephemeralContainers", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.PodSpec", "hostAliases", "list-type=map list-map-keys=ip patch-merge-key=ip patch-strategy=merge"),
    ("core.v1.PodSpec", "imagePullSecrets", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.PodSpec", "initContainers", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.PodSpec", "nodeSelector", "map-type=atomic"),
    ("core.v1.PodSpec", "resourceClaims", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge,retainKeys"),
    ("core.v1.PodSpec", "schedulingGates", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.PodSpec", "topologySpreadConstraints", "list-type=map list-map-keys=topologyKey,whenUnsatisfiable patch-merge-key=topologyKey patch-strategy=merge"),
    ("core.v1.PodSpec", "volumes", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge,retainKeys"),
    ("core.v1.PodStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.PodStatus", "hostIPs", "list-type=atomic patch-merge-key=ip patch-strategy=merge"),
    ("core.v1.PodStatus", "podIPs", "list-type=map list-map-keys=ip patch-merge-key=ip patch-strategy=merge"),
    ("core.v1.PodStatus", "resourceClaimStatuses", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge,retainKeys"),
    ("core.v1.ReplicationControllerSpec", "selector", "map-type=atomic"),
    ("core.v1.ReplicationControllerStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.ResourceFieldSelector", "", "map-type=atomic"),
    ("core.v1.ResourceRequirements", "claims", "list-type=map list-map-keys=name"),
    ("core.v1.ResourceStatus", "resources", "list-type=map list-map-keys=resourceID"),
    ("core.v1.SecretKeySelector", "", "map-type=atomic"),
    ("core.v1.ServiceAccount", "secrets", "list-type=map list-map-keys=name patch-merge-key=name patch-strategy=merge"),
    ("core.v1.ServiceSpec", "ports", "list-type=map list-map-keys=port,protocol patch-merge-key=port patch-strategy=merge"),
    ("core.v1.ServiceSpec", "selector", "map-type=atomic"),
    ("core.v1.ServiceStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
    ("core.v1.TypedLocalObjectReference", "", "map-type=atomic"),
    ("rbac.v1.RoleRef", "", "map-type=atomic"),
    ("rbac.v1.Subject", "", "map-type=atomic"),
    ("apiextensions.v1.CustomResourceDefinitionStatus", "conditions", "list-type=map list-map-keys=type"),
    ("apiextensions.v1.JSONSchemaProps", "x-kubernetes-validations", "list-type=map list-map-keys=rule patch-merge-key=rule patch-strategy=merge"),
    ("meta.v1.LabelSelector", "", "map-type=atomic"),
    ("meta.v1.ObjectMeta", "finalizers", "list-type=set patch-strategy=merge"),
    ("meta.v1.ObjectMeta", "ownerReferences", "list-type=map list-map-keys=uid patch-merge-key=uid patch-strategy=merge"),
    ("meta.v1.OwnerReference", "", "map-type=atomic"),
    ("apiregistration.v1.APIServiceStatus", "conditions", "list-type=map list-map-keys=type patch-merge-key=type patch-strategy=merge"),
];

/// Struct fields present, as `{}`, in a new empty object of their kind (Go values rather
/// than pointers): kube-apiserver publishes them with `default: {}`, and server-side
/// apply starts a new object from them, so they are never "added" by a write.
const OBJECT_DEFAULTS: &[(&str, &str)] = &[
    (
        "admissionregistration.v1.ValidatingAdmissionPolicy",
        "metadata spec status",
    ),
    (
        "admissionregistration.v1.ValidatingAdmissionPolicyBinding",
        "metadata spec",
    ),
    ("apps.v1.DaemonSet", "metadata spec status"),
    ("apps.v1.DaemonSetSpec", "template updateStrategy"),
    ("apps.v1.Deployment", "metadata spec status"),
    ("apps.v1.DeploymentSpec", "strategy template"),
    ("apps.v1.ReplicaSet", "metadata spec status"),
    ("apps.v1.ReplicaSetSpec", "template"),
    ("apps.v1.StatefulSet", "metadata spec status"),
    ("apps.v1.StatefulSetSpec", "template updateStrategy"),
    (
        "authorization.v1.SelfSubjectAccessReview",
        "metadata spec status",
    ),
    (
        "authorization.v1.SubjectAccessReview",
        "metadata spec status",
    ),
    ("autoscaling.v1.Scale", "metadata spec status"),
    ("batch.v1.Job", "metadata spec status"),
    ("batch.v1.JobSpec", "template"),
    ("coordination.v1.Lease", "metadata spec"),
    ("core.v1.ConfigMap", "metadata"),
    ("core.v1.Container", "resources"),
    ("core.v1.ContainerStatus", "lastState state"),
    ("core.v1.EphemeralContainer", "resources"),
    ("core.v1.Event", "involvedObject metadata source"),
    ("core.v1.Namespace", "metadata spec status"),
    ("core.v1.Node", "metadata spec status"),
    ("core.v1.NodeDaemonEndpoints", "kubeletEndpoint"),
    ("core.v1.NodeStatus", "daemonEndpoints nodeInfo"),
    ("core.v1.PersistentVolumeClaim", "metadata spec status"),
    ("core.v1.PersistentVolumeClaimSpec", "resources"),
    ("core.v1.PersistentVolumeClaimTemplate", "metadata spec"),
    ("core.v1.Pod", "metadata spec status"),
    ("core.v1.PodTemplateSpec", "metadata spec"),
    ("core.v1.PreferredSchedulingTerm", "preference"),
    ("core.v1.ReplicationController", "metadata spec status"),
    ("core.v1.Secret", "metadata"),
    ("core.v1.Service", "metadata spec status"),
    ("core.v1.ServiceAccount", "metadata"),
    ("core.v1.ServiceStatus", "loadBalancer"),
    ("core.v1.WeightedPodAffinityTerm", "podAffinityTerm"),
    ("rbac.v1.ClusterRole", "metadata"),
    ("rbac.v1.ClusterRoleBinding", "metadata roleRef"),
    ("rbac.v1.Role", "metadata"),
    ("rbac.v1.RoleBinding", "metadata roleRef"),
    (
        "apiextensions.v1.CustomResourceDefinition",
        "metadata spec status",
    ),
    ("apiextensions.v1.CustomResourceDefinitionSpec", "names"),
    (
        "apiextensions.v1.CustomResourceDefinitionStatus",
        "acceptedNames",
    ),
    ("meta.v1.Status", "metadata"),
    ("apiregistration.v1.APIService", "metadata spec status"),
];

/// Defaults of list keys: an item that leaves one out is keyed by its default.
const KEY_DEFAULTS: &[(&str, &str, &str)] = &[
    ("core.v1.ContainerPort", "protocol", "TCP"),
    ("core.v1.ServicePort", "protocol", "TCP"),
];

fn full_name(short: &str) -> String {
    for (prefix, full) in [
        ("meta.v1.", "io.k8s.apimachinery.pkg.apis.meta.v1."),
        (
            "apiextensions.v1.",
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.",
        ),
        (
            "apiregistration.v1.",
            "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.",
        ),
    ] {
        if let Some(rest) = short.strip_prefix(prefix) {
            return format!("{full}{rest}");
        }
    }
    format!("io.k8s.api.{short}")
}

/// `list-type=map list-map-keys=a,b` as the extension members they stand for.
fn extensions(spec: &str) -> Map<String, Value> {
    spec.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let value = match k {
                "list-map-keys" => json!(v.split(',').collect::<Vec<_>>()),
                _ => json!(v),
            };
            (format!("x-kubernetes-{k}"), value)
        })
        .collect()
}

pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
pub const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";

/// Kinds embedding a `LocalObjectReference`, whose `name` kube-apiserver defaults to ""
/// rather than requiring it.
const NAME_OPTIONAL: &[&str] = &[
    "core.v1.ConfigMapEnvSource",
    "core.v1.ConfigMapKeySelector",
    "core.v1.ConfigMapProjection",
    "core.v1.ConfigMapVolumeSource",
    "core.v1.LocalObjectReference",
    "core.v1.SecretEnvSource",
    "core.v1.SecretKeySelector",
    "core.v1.SecretProjection",
];

/// Enum values of built-in fields and the notes describing them, which k8s-openapi drops:
/// recorded from kube-apiserver's documents by `scripts/openapi-enums.py`.
const ENUMS: &str = include_str!("enums.json");

fn add_enums(definitions: &mut Map<String, Value>) {
    let Ok(Value::Object(enums)) = serde_json::from_str::<Value>(ENUMS) else {
        return;
    };
    for (def, fields) in enums {
        for (field, e) in fields.as_object().into_iter().flatten() {
            let Some(Value::Object(p)) = definitions
                .get_mut(&def)
                .and_then(|d| d.pointer_mut(&format!("/properties/{field}")))
            else {
                continue;
            };
            if let Some(note) = e["note"].as_str().filter(|n| !n.is_empty()) {
                if let Some(Value::String(d)) = p.get_mut("description") {
                    d.push_str(note);
                }
            }
            let target = match e["items"].as_bool() {
                Some(true) => p.get_mut("items").and_then(Value::as_object_mut),
                _ => Some(p),
            };
            if let Some(t) = target {
                t.insert("enum".into(), e["enum"].clone());
            }
        }
    }
}

pub fn builtins() -> &'static Builtins {
    static BUILTINS: OnceLock<Builtins> = OnceLock::new();
    BUILTINS.get_or_init(generate)
}

fn generate() -> Builtins {
    let mut generator = SchemaSettings::draft07()
        .with(|s| {
            s.transforms.clear();
            s.meta_schema = None;
        })
        .into_generator();
    let mut kinds = Vec::new();
    macro_rules! kind {
        ($($t:ty),* $(,)?) => {$(
            generator.subschema_for::<$t>();
            kinds.push((
                Gvk {
                    group: <$t as k8s_openapi::Resource>::GROUP.to_string(),
                    version: <$t as k8s_openapi::Resource>::VERSION.to_string(),
                    kind: <$t as k8s_openapi::Resource>::KIND.to_string(),
                },
                <$t as schemars::JsonSchema>::schema_name().into_owned(),
            ));
        )*};
    }
    kind!(
        core::Namespace,
        core::ConfigMap,
        core::Secret,
        core::Service,
        core::ServiceAccount,
        core::Event,
        core::Pod,
        core::Node,
        core::ReplicationController,
        apps::ReplicaSet,
        apps::Deployment,
        apps::StatefulSet,
        apps::DaemonSet,
        batch::Job,
        coordination::Lease,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        rbac::Role,
        rbac::RoleBinding,
        authz::SubjectAccessReview,
        authz::SelfSubjectAccessReview,
        apiextensions::CustomResourceDefinition,
        apiregistration::APIService,
        admission::ValidatingAdmissionPolicy,
        admission::ValidatingAdmissionPolicyBinding,
        autoscaling::Scale,
        meta::Status,
    );
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::ListMeta>();
    let mut definitions = generator.take_definitions(false);
    for (gvk, name) in &kinds {
        if let Some(Value::Object(d)) = definitions.get_mut(name) {
            // Generated schemas require `metadata` of every kind; kube-apiserver's only
            // of the core Event (generateName alone names an object).
            if gvk.kind != "Event" {
                if let Some(Value::Array(required)) = d.get_mut("required") {
                    required.retain(|r| r != "metadata");
                    if required.is_empty() {
                        d.remove("required");
                    }
                }
            }
            d.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": gvk.group, "kind": gvk.kind, "version": gvk.version}]),
            );
        }
    }
    for (def, field, spec) in EXTENSIONS {
        let Some(d) = definitions.get_mut(&full_name(def)) else {
            continue;
        };
        let target = match *field {
            "" => Some(d),
            f => d.pointer_mut(&format!("/properties/{f}")),
        };
        if let Some(Value::Object(t)) = target {
            t.extend(extensions(spec));
        }
    }
    for (def, fields) in OBJECT_DEFAULTS {
        let Some(d) = definitions.get_mut(&full_name(def)) else {
            continue;
        };
        for f in fields.split_whitespace() {
            if let Some(Value::Object(p)) = d.pointer_mut(&format!("/properties/{f}")) {
                p.insert("default".into(), json!({}));
            }
        }
    }
    for (def, field, value) in KEY_DEFAULTS {
        if let Some(Value::Object(p)) = definitions
            .get_mut(&full_name(def))
            .and_then(|d| d.pointer_mut(&format!("/properties/{field}")))
        {
            p.insert("default".into(), json!(value));
        }
    }
    add_enums(&mut definitions);
    for name in NAME_OPTIONAL {
        if let Some(Value::Object(d)) = definitions.get_mut(&full_name(name)) {
            if let Some(Value::Array(required)) = d.get_mut("required") {
                required.retain(|r| r != "name");
                if required.is_empty() {
                    d.remove("required");
                }
            }
        }
    }
    // Swagger 2.0 forms; the v3 documents use their `oneOf` forms (see `document`).
    for (name, schema) in [
        (QUANTITY, json!({"type": "string"})),
        (
            INT_OR_STRING,
            json!({"type": "string", "format": "int-or-string"}),
        ),
        (
            "io.k8s.apimachinery.pkg.runtime.RawExtension",
            json!({"type": "object"}),
        ),
        (
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
            json!({}),
        ),
    ] {
        if let Some(Value::Object(d)) = definitions.get_mut(name) {
            d.retain(|k, _| k == "description");
            d.extend(
                schema
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
    }
    Builtins { definitions, kinds }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_carry_their_gvk_and_lists_their_semantics() {
        let b = builtins();
        let d = &b.definitions["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            d["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        let c = &b.definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(c["x-kubernetes-list-map-keys"], json!(["name"]));
        // References point into the same document.
        let spec = &b.definitions["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
        assert_eq!(
            spec["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(b
            .definitions
            .contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    }
}
