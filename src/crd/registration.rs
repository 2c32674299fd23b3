//! `InstanceRegistration`: one per instance, kept by the registration controller so a
//! global management module (IAM) can bind roles to instances.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The registration of one Kairship instance with global management.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kairship.io",
    version = "v1alpha1",
    kind = "InstanceRegistration",
    plural = "instanceregistrations",
    shortname = "kireg",
    category = "kairship",
    printcolumn = r#"{"name":"Instance","type":"string","jsonPath":".spec.instanceName"}"#,
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRegistrationSpec {
    /// Name of the `Instance` (also the name of this object).
    pub instance_name: String,
    /// UID of the `Instance`, so a recreated instance is a new registration.
    pub instance_uid: String,
    /// `External` or `Managed`.
    pub mode: String,
    /// The karmada-apiserver endpoint, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_endpoint: Option<String>,
}
