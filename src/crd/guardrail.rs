//! Guardrails: the objects a platform team wants in every instance of a class (issue 55):
//! RBAC, admission policies, default PropagationPolicies and FederatedResourceQuotas.
//! An InstanceClass lists them (`spec.guardrails`), an Instance made from the class gets
//! them in its own `spec.guardrails`, and the `guardrails` controller applies them in the
//! instance by server-side apply, labelled as Kairship's, deleting the ones taken out.
//!
//! Only the kinds below may be pushed, and namespaced RBAC never into Karmada's system or
//! execution namespaces: `karmada-cluster` holds every member's credentials, so a Role
//! bound there through a class would hand them to whoever the binding names, on every
//! instance at once.

use kairship_wire::roles::Class;
use kube::discovery::ApiResource;
use serde_json::Value;

/// The most guardrails one list may hold: each is a call on every pass, on every instance.
pub const MAX: usize = 64;

/// The schema of a `guardrails` list: any Kubernetes objects, checked by [`check`].
pub(super) fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX,
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

/// Marks the objects the controller applied, to find the ones taken out of the list.
pub const LABEL: &str = "kairship.io/guardrail";
/// The field manager of the apply.
pub const MANAGER: &str = "kairship-guardrails";

/// A kind that may be pushed: its group, version, kind, plural, and whether namespaced.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Kind {
    Kind {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// Every kind a guardrail may be.
pub const KINDS: &[Kind] = &[
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    ),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    ),
    kind(
        "policy.karmada.io",
        "v1alpha1",
        "PropagationPolicy",
        "propagationpolicies",
        true,
    ),
    kind(
        "policy.karmada.io",
        "v1alpha1",
        "ClusterPropagationPolicy",
        "clusterpropagationpolicies",
        false,
    ),
    kind(
        "policy.karmada.io",
        "v1alpha1",
        "OverridePolicy",
        "overridepolicies",
        true,
    ),
    kind(
        "policy.karmada.io",
        "v1alpha1",
        "ClusterOverridePolicy",
        "clusteroverridepolicies",
        false,
    ),
    kind(
        "policy.karmada.io",
        "v1alpha1",
        "FederatedResourceQuota",
        "federatedresourcequotas",
        true,
    ),
    kind("", "v1", "Namespace", "namespaces", false),
    kind("", "v1", "ResourceQuota", "resourcequotas", true),
    kind("", "v1", "LimitRange", "limitranges", true),
];

impl Kind {
    pub fn api_resource(&self) -> ApiResource {
        let gvk = kube::core::GroupVersionKind::gvk(self.group, self.version, self.kind);
        ApiResource::from_gvk_with_plural(&gvk, self.plural)
    }

    fn api_version(&self) -> String {
        match self.group {
            "" => self.version.to_string(),
            g => format!("{g}/{}", self.version),
        }
    }
}

/// One guardrail, checked: where it goes and the object to apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Guardrail {
    pub kind: &'static Kind,
    pub namespace: Option<String>,
    pub name: String,
    /// The object, labelled as Kairship's.
    pub object: Value,
}

impl Guardrail {
    /// `Kind namespace/name`, as errors and conditions name it.
    pub fn key(&self) -> String {
        key(self.kind.kind, self.namespace.as_deref(), &self.name)
    }
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
fn key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Why a guardrail cannot be pushed, naming the entry (`guardrails[2]`) and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guardrails[{index}]: {message}")]
pub struct GuardrailError {
    pub index: usize,
    pub message: String,
}

/// Checks `manifests` (a class's or an instance's `spec.guardrails`): each names an
/// allowed kind in its served apiVersion, a valid name, a namespace exactly when the kind
/// is namespaced, and no system namespace for namespaced RBAC; two may not name the same
/// object. The first problem found, or every guardrail labelled.
pub fn check(manifests: &[Value]) -> Result<Vec<Guardrail>, GuardrailError> {
    if manifests.len() > MAX {
        return Err(GuardrailError {
            index: MAX,
            message: format!(
                "{} guardrails; at most {MAX} may be listed",
                manifests.len()
            ),
        });
    }
    let mut out: Vec<Guardrail> = Vec::with_capacity(manifests.len());
    for (index, m) in manifests.iter().enumerate() {
        let fail = |message: String| GuardrailError { index, message };
        let g = one(m).map_err(fail)?;
        if let Some(same) = out
            .iter()
            .position(|o| o.kind == g.kind && o.namespace == g.namespace && o.name == g.name)
        {
            return Err(fail(format!("{} is also guardrails[{same}]", g.key())));
        }
        out.push(g);
    }
    Ok(out)
}

fn one(m: &Value) -> Result<Guardrail, String> {
    let text = |pointer: &str| m.pointer(pointer).and_then(Value::as_str);
    let api_version = text("/apiVersion").ok_or("apiVersion is required")?;
    let kind_name = text("/kind").ok_or("kind is required")?;
    let kind = KINDS
        .iter()
        .find(|k| {
            k.kind == kind_name && k.group == api_version.rsplit_once('/').map_or("", |(g, _)| g)
        })
        .ok_or_else(|| {
            let known: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
            format!(
                "kind {kind_name:?} ({api_version}) cannot be a guardrail (one of: {})",
                known.join(", ")
            )
        })?;
    if api_version != kind.api_version() {
        return Err(format!(
            "apiVersion {api_version:?}: a {} guardrail is {}",
            kind.kind,
            kind.api_version()
        ));
    }
    let name = text("/metadata/name").ok_or("metadata.name is required")?;
    crate::error::check_name("metadata.name", name).map_err(|e| e.to_string())?;
    let namespace = text("/metadata/namespace").filter(|n| !n.is_empty());
    match (kind.namespaced, namespace) {
        (true, None) => return Err(format!("a {} needs metadata.namespace", kind.kind)),
        (false, Some(ns)) => {
            return Err(format!(
                "a {} is cluster-scoped: metadata.namespace {ns:?} must go",
                kind.kind
            ))
        }
        _ => {}
    }
    if let Some(ns) = namespace {
        crate::error::check_name("metadata.namespace", ns).map_err(|e| e.to_string())?;
        let rbac = kind.group == "rbac.authorization.k8s.io";
        if rbac && Class::of(Some(ns), false) != Class::Workload {
            return Err(format!(
                "a {} in {ns:?}: Karmada's system and execution namespaces hold members' \
                 credentials and Works, and a class may not grant roles there",
                kind.kind
            ));
        }
    }
    let mut object = m.clone();
    let labels = object
        .pointer_mut("/metadata")
        .and_then(Value::as_object_mut)
        .ok_or("metadata must be an object")?
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    let labels = labels
        .as_object_mut()
        .ok_or("metadata.labels must be an object")?;
    labels.insert(LABEL.into(), "true".into());
    labels.insert("app.kubernetes.io/managed-by".into(), "kairship".into());
    Ok(Guardrail {
        kind,
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
        object,
    })
}

/// Where an instance's guardrails differ from its class's, as one drift entry (field
/// `guardrails`): the objects each lists, those whose content differs marked `*`.
pub fn drift(class: &[Value], instance: &[Value]) -> Option<super::ClassDrift> {
    if class == instance {
        return None;
    }
    let keys = |list: &[Value], other: &[Value]| -> String {
        let named = |v: &Value| {
            let text = |p: &str| v.pointer(p).and_then(Value::as_str);
            key(
                text("/kind").unwrap_or("?"),
                text("/metadata/namespace"),
                text("/metadata/name").unwrap_or("?"),
            )
        };
        let names: Vec<String> = list
            .iter()
            .map(|v| {
                let n = named(v);
                let same = other.iter().any(|o| o == v);
                let listed = other.iter().any(|o| named(o) == n);
                if listed && !same {
                    format!("{n}*")
                } else {
                    n
                }
            })
            .collect();
        format!("[{}]", names.join(", "))
    };
    Some(super::ClassDrift {
        field: "guardrails".into(),
        class: keys(class, instance),
        instance: keys(instance, class),
        overridden: false,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn drift_names_the_objects_and_marks_changed_ones() {
        let a = vap("a");
        let mut a2 = vap("a");
        a2["spec"] = json!({});
        assert_eq!(
            drift(std::slice::from_ref(&a), std::slice::from_ref(&a)),
            None
        );
        let d = drift(&[a.clone(), vap("b")], &[a2]).expect("differs");
        assert_eq!(
            d.class,
            "[ValidatingAdmissionPolicy a*, ValidatingAdmissionPolicy b]"
        );
        assert_eq!(d.instance, "[ValidatingAdmissionPolicy a*]");
    }

    use super::*;
    use serde_json::json;

    fn vap(name: &str) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": {"validations": [{"expression": "true"}]}})
    }

    #[test]
    fn allowed_kinds_are_labelled_as_kairships() {
        let pp = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
                        "metadata": {"name": "default", "namespace": "shop", "labels": {"team": "a"}}, "spec": {}});
        let g = check(&[vap("no-latest"), pp]).expect("allowed");
        assert_eq!(g[0].key(), "ValidatingAdmissionPolicy no-latest");
        assert_eq!(g[1].key(), "PropagationPolicy shop/default");
        assert_eq!(g[1].object["metadata"]["labels"][LABEL], "true");
        assert_eq!(g[1].object["metadata"]["labels"]["team"], "a");
    }

    #[test]
    fn refusals_name_the_entry_and_the_field() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "shop"}});
        let e = check(&[vap("a"), secret]).expect_err("a Secret");
        assert_eq!(e.index, 1);
        assert!(
            e.message.contains("\"Secret\"") && e.message.contains("cannot be a guardrail"),
            "{e}"
        );
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                          "metadata": {"name": "r", "namespace": "karmada-cluster"}, "roleRef": {}});
        assert!(check(&[role])
            .expect_err("system ns")
            .message
            .contains("karmada-cluster"));
        let old = json!({"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "a"}});
        assert!(check(&[old])
            .expect_err("version")
            .message
            .contains("admissionregistration.k8s.io/v1"));
        let cluster_ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "namespace": "b"}});
        assert!(check(&[cluster_ns])
            .expect_err("scope")
            .message
            .contains("cluster-scoped"));
        let no_ns = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}});
        assert!(check(&[no_ns])
            .expect_err("ns")
            .message
            .contains("metadata.namespace"));
        assert!(check(&[vap("a"), vap("a")])
            .expect_err("twice")
            .message
            .contains("guardrails[0]"));
        assert!(check(&[vap("Not_A_Name")]).is_err());
        let many: Vec<Value> = (0..=MAX).map(|i| vap(&format!("p{i}"))).collect();
        assert!(check(&many)
            .expect_err("too many")
            .message
            .contains("at most 64"));
        assert!(check(&[json!({"kind": "Role"})])
            .expect_err("apiVersion")
            .message
            .contains("apiVersion"));
    }
}
