//! `ClusterProfile` (`multicluster.x-k8s.io/v1alpha1`): SIG Multicluster's cluster
//! inventory (KEP-4322), the one way schedulers and GitOps tools (Argo CD, OCM, Kueue's
//! MultiKueue) find clusters. Kairship publishes each instance's member clusters as
//! ClusterProfiles in the host (`controllers::cluster_profiles`); only the fields it
//! writes are typed here, and the CRD is installed only where none is (an inventory's own
//! CRD stays as it is).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

#[derive(
    CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default,
)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    printcolumn = r#"{"name":"Manager","type":"string","jsonPath":".spec.clusterManager.name"}"#,
    printcolumn = r#"{"name":"Healthy","type":"string","jsonPath":".status.conditions[?(@.type==\"ControlPlaneHealthy\")].status"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.version.kubernetes"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// A name for people; the object's name is what tools key on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    /// Who manages the cluster (its `x-k8s.io/cluster-manager` label says the same).
    pub cluster_manager: ClusterManager,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct ClusterManager {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// `ControlPlaneHealthy`, `Joined`, and Kairship's `SharedMember`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
    /// Name/value facts about the cluster (its instance, capacity, region).
    #[serde(default)]
    pub properties: Vec<Property>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct ClusterVersion {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub struct Property {
    pub name: String,
    pub value: String,
}
