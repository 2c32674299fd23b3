//! karmada-operator's `Karmada` object, which a managed instance's control plane is, and
//! whether Kairship made it.

use kube::api::DynamicObject;
use kube::discovery::ApiResource;

use super::scope::OWNER_LABEL;

/// `operator.karmada.io/v1alpha1` `Karmada`, read and written as a dynamic object.
pub fn karmada_resource() -> ApiResource {
    ApiResource {
        group: "operator.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "operator.karmada.io/v1alpha1".into(),
        kind: "Karmada".into(),
        plural: "karmadas".into(),
    }
}

/// Whether a `Karmada` object is the one Kairship created for instance `name`.
pub fn owned(karmada: &DynamicObject, name: &str) -> bool {
    karmada
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(OWNER_LABEL))
        .is_some_and(|v| v == name)
}
