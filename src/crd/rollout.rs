//! `FleetRollout`: one change rolled across many instances in waves (issue 55). The spec
//! says what changes (a Karmada release), where (a label selector) and how (a canary and
//! percentages, or groups; how many at once; the soak; the progress deadline; windows);
//! the status keeps the waves, fixed when the rollout is first planned, and each
//! instance's step, so a rollout resumes after a restart without redoing finished
//! instances.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

fn five_minutes() -> u32 {
    300
}

fn half_an_hour() -> u32 {
    1800
}

fn five() -> u32 {
    5
}

fn twenty() -> u32 {
    20
}

fn default_alerts() -> Vec<String> {
    DEFAULT_HALT_ON.iter().map(|s| s.to_string()).collect()
}

/// The alerts a rollout halts on when its spec names none (`rollout::alerts` reads them):
/// what a release can break on an instance, and the API's own errors. Certificate and
/// backup alerts are left out: an upgrade does not cause them.
pub const DEFAULT_HALT_ON: [&str; 6] = [
    "KairshipInstanceUnreachable",
    "KairshipInstanceDegraded",
    "KairshipInstanceNotRunning",
    "KairshipMemberClustersNotReady",
    "KairshipCacheRelisting",
    "KairshipAPIErrors",
];

/// A change rolled across the instances a selector picks.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kairship.io",
    version = "v1alpha1",
    kind = "FleetRollout",
    plural = "fleetrollouts",
    shortname = "kfr",
    category = "kairship",
    status = "FleetRolloutStatus",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.karmadaVersion"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.reason","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FleetRolloutSpec {
    /// The Karmada release the instances move to (v1.18.2); with `className`, the class's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub karmada_version: String,
    /// Roll an InstanceClass out: its instances (and only those) get its release and
    /// spec, what each sets itself kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Which instances: those whose labels match all of these (none: every instance).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Instances changed first, alone.
    #[serde(default)]
    pub canary: u32,
    /// Then waves that bring the share done to each (rising, the last 100; default 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentages: Vec<u32>,
    /// Or explicit groups of instance names, in order (the rest form a last wave).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<String>>,
    /// Instances of a wave changing at once.
    #[serde(default = "one")]
    pub max_unavailable: u32,
    /// How long an instance stays healthy after its change before it counts as done.
    #[serde(default = "five_minutes")]
    pub soak_seconds: u32,
    /// How long a change may take before the rollout halts.
    #[serde(default = "half_an_hour")]
    pub progress_deadline_seconds: u32,
    /// Halt when more than this share (percent) of the requests Kairship's proxy answered
    /// for an instance while it soaks failed with a server error (5xx); 100: never.
    #[serde(default = "five")]
    pub max_failed_request_percent: u32,
    /// The requests an instance must have had while it soaks before that share counts.
    #[serde(default = "twenty")]
    pub min_requests: u32,
    /// Prometheus alerts (names, or prefixes ending in `*`) that halt the rollout when
    /// Kairship reads alerts (`--alerts-url`): one naming an instance (`karmada_instance`)
    /// fails it if it fires while the instance soaks; one naming no instance holds the
    /// rollout while it fires. Empty: none.
    #[serde(default = "default_alerts")]
    #[schemars(length(max = 64))]
    pub halt_on_alerts: Vec<String>,
    /// Change instances whose maintenance window is closed too.
    #[serde(default)]
    pub ignore_windows: bool,
    /// Start although the plan found instances that cannot take the change (they are
    /// left out).
    #[serde(default)]
    pub force: bool,
    /// Start nothing new (instances changing carry on).
    #[serde(default)]
    pub paused: bool,
    /// Stop for good: nothing new starts; what changed stays changed.
    #[serde(default)]
    pub aborted: bool,
}

/// Where the rollout is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct FleetRolloutStatus {
    /// Planned, Blocked, Progressing, Paused, Halted, Aborted or Completed.
    #[serde(default)]
    pub phase: String,
    /// Why it is where it is (the wave under way, what blocked or halted it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The waves, by instance name, fixed when the rollout was first planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<Vec<String>>,
    /// Each planned instance's step.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instances: BTreeMap<String, InstanceRollout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One instance in a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRollout {
    /// Pending, BackingUp, Upgrading, Soaking, Done, Failed or RolledBack.
    pub step: String,
    /// When it entered the step (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The release it ran before its change, to roll back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// The backup taken before its change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// Its Karmada spec before its change, put back if it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::instance::preserve_unknown")]
    pub from_spec: Option<serde_json::Value>,
    /// Its guardrails before its change (a class rollout), put back if it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::guardrail::schema")]
    pub from_guardrails: Option<Vec<serde_json::Value>>,
}
