//! `InstanceRoleBinding`: grants a role on some instances (or all) to users and groups.
//! Created by administrators with kubectl or by the global-management webhook; the API
//! caches them through a watch and enforces them on every request.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a binding allows, each role including the ones before it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// get, list and watch.
    View,
    /// view, plus create, update, patch and delete of workloads and policies.
    Edit,
    /// edit, plus instance lifecycle and actor restarts.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::View => "view",
            Self::Edit => "edit",
            Self::Admin => "admin",
        }
    }
}

impl From<kairship_wire::roles::Role> for Role {
    fn from(r: kairship_wire::roles::Role) -> Self {
        use kairship_wire::roles::Role as R;
        match r {
            R::View => Self::View,
            R::Edit => Self::Edit,
            R::Admin => Self::Admin,
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "view" => Ok(Self::View),
            "edit" => Ok(Self::Edit),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown role {other:?}: expected view, edit or admin"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SubjectKind {
    User,
    Group,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct Subject {
    pub kind: SubjectKind,
    pub name: String,
}

/// Every instance, in `spec.instances`.
pub const ALL_INSTANCES: &str = "*";

/// A role granted to subjects on instances.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kairship.io",
    version = "v1alpha1",
    kind = "InstanceRoleBinding",
    plural = "instancerolebindings",
    shortname = "kirb",
    category = "kairship",
    printcolumn = r#"{"name":"Role","type":"string","jsonPath":".spec.role"}"#,
    printcolumn = r#"{"name":"Instances","type":"string","jsonPath":".spec.instances"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRoleBindingSpec {
    pub role: Role,
    /// Instance names, or `"*"` for every instance (including ones created later).
    pub instances: Vec<String>,
    pub subjects: Vec<Subject>,
}

/// Label on the bindings the global-management webhook created.
pub const SOURCE_LABEL: &str = "kairship.io/source";
