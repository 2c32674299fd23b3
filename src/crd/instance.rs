//! The `Instance` resource: one Karmada control plane Kairship manages.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How Kairship gets at the instance's karmada-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum InstanceMode {
    /// Attach an existing Karmada through a kubeconfig Secret.
    #[default]
    External,
    /// Create a karmada-operator `Karmada` object and use the admin kubeconfig it reports.
    Managed,
}

/// A key of a Secret in the host cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretKeyRef {
    pub namespace: String,
    pub name: String,
    /// Key in the Secret's data holding a kubeconfig; default `kubeconfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSpec {
    pub kubeconfig_secret_ref: SecretKeyRef,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ManagedSpec {
    /// Namespace of the `Karmada` object; default `kairship-system`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Passed through as the `Karmada` object's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub karmada_spec: Option<serde_json::Value>,
    /// With a class: what the instance set itself over its class (part of `karmadaSpec`
    /// too); a rollout of the class never changes these fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub overrides: Option<serde_json::Value>,
}

pub(super) fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// A Karmada instance managed by Kairship.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kairship.io",
    version = "v1alpha1",
    kind = "Instance",
    plural = "instances",
    shortname = "kins",
    category = "kairship",
    status = "InstanceStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.karmadaVersion"}"#,
    printcolumn = r#"{"name":"Clusters","type":"string","description":"ready/total member clusters","jsonPath":".status.clusters"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","description":"ready/total nodes","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    #[serde(default)]
    pub mode: InstanceMode,
    /// Required with `mode: External`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalSpec>,
    /// Used with `mode: Managed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed: Option<ManagedSpec>,
    /// Stop watching the instance without deleting it.
    #[serde(default)]
    pub paused: bool,
    /// What Kairship may keep of this instance in its caches, over Kairship's defaults
    /// (`--cache-max-*`). Past it the caches are dropped, the instance is Degraded naming
    /// the budget, and its reads go to the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_budget: Option<CacheBudgetSpec>,
    /// Backups the leader takes on a schedule (`backups`); unset: only on request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_schedule: Option<BackupScheduleSpec>,
    /// When fleet rollouts may change the instance; unset: its class's, or any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindowSpec>,
    /// The InstanceClass it was made from (`crd::class`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_name: Option<String>,
    /// Objects Kairship keeps in the instance (`crd::guardrail`): its class's when it was
    /// made, and after each rollout of the class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::guardrail::schema")]
    pub guardrails: Vec<serde_json::Value>,
    /// When a managed instance sleeps: its control plane scaled to zero in the host, its
    /// data kept, woken by the next request through Kairship (`hibernation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernation: Option<HibernationSpec>,
}

/// When an instance sleeps. Besides these, `kairship ctl instances hibernate|wake` and
/// requests decide: the latest event wins (`hibernation::decide`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HibernationSpec {
    /// Asleep from each `start`, awake from each `end` (Gardener's shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<HibernationSchedule>,
    /// Sleep once no request reached it through Kairship for this many minutes (1 to
    /// 525600, a year); unset: only schedules and commands put it to sleep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_after_minutes: Option<u32>,
}

/// One schedule: five-field cron expressions read in `location`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HibernationSchedule {
    /// When it falls asleep ("0 20 * * 1-5").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// When it wakes ("0 8 * * 1-5").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// An IANA time zone (`Europe/Berlin`); default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl HibernationSpec {
    pub const IDLE_MINUTES: std::ops::RangeInclusive<u32> = 1..=525_600;

    /// Its schedules, read; the first that does not parse is named.
    pub fn schedules(&self) -> Result<Vec<crate::schedule::cron::Schedule>, String> {
        self.schedules
            .iter()
            .enumerate()
            .map(|(i, s)| {
                crate::schedule::cron::Schedule::parse(
                    s.start.as_deref(),
                    s.end.as_deref(),
                    s.location.as_deref(),
                )
                .map_err(|e| format!("spec.hibernation.schedules[{i}]: {e}"))
            })
            .collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        self.schedules()?;
        match self.idle_after_minutes {
            Some(m) if !Self::IDLE_MINUTES.contains(&m) => Err(format!(
                "spec.hibernation.idleAfterMinutes must be between {} and {}, got {m}",
                Self::IDLE_MINUTES.start(),
                Self::IDLE_MINUTES.end()
            )),
            _ => Ok(()),
        }
    }
}

/// A weekly maintenance window (`rollout::window`): on `days` (Mon..Sun; none: every
/// day) from `start` (HH:MM, local to `timeZone`) for `duration` (30m to 24h).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindowSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<String>,
    pub start: String,
    pub duration: String,
    /// An IANA time zone (`Europe/Berlin`); default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl MaintenanceWindowSpec {
    pub fn window(
        &self,
    ) -> Result<crate::schedule::window::Window, crate::schedule::window::WindowError> {
        crate::schedule::window::Window::parse(
            &self.days,
            &self.start,
            &self.duration,
            self.time_zone.as_deref().unwrap_or("UTC"),
        )
    }
}

/// An instance's scheduled backups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupScheduleSpec {
    /// Minutes between backups (1 to 10080); the first is taken once the schedule is set.
    pub interval_minutes: u32,
    /// Backups of the instance kept, the newest (1 to 100; default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u32>,
}

impl BackupScheduleSpec {
    pub const DEFAULT_KEEP: u32 = 7;

    pub fn keep(&self) -> u32 {
        self.keep.unwrap_or(Self::DEFAULT_KEEP)
    }
}

/// An instance's cache budget; unset fields keep Kairship's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CacheBudgetSpec {
    /// Objects of every cached kind together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u64>,
    /// Bytes the cached objects keep, every kind together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Bytes one cached object may keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_object_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
pub enum Phase {
    #[default]
    Pending,
    Provisioning,
    /// karmada-operator is moving the managed control plane to a new spec.
    Upgrading,
    Running,
    Degraded,
    Unreachable,
    Terminating,
    /// Its control plane is scaled to zero (`hibernation`); a request wakes it.
    Hibernated,
}

/// A member cluster that is also a member of other instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SharedMember {
    pub cluster: String,
    pub instances: Vec<String>,
}

/// A Kubernetes-style condition (metav1.Condition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Totals aggregated from the instance's member clusters and caches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStats {
    pub clusters_total: i64,
    pub clusters_ready: i64,
    pub nodes_total: i64,
    pub nodes_ready: i64,
    /// Kubernetes quantities ("64", "250m", "256Gi").
    pub cpu_allocatable: String,
    pub cpu_allocated: String,
    pub memory_allocatable: String,
    pub memory_allocated: String,
    pub pods_allocatable: String,
    pub pods_allocated: String,
    pub propagation_policies: i64,
    pub override_policies: i64,
    pub cluster_propagation_policies: i64,
    pub cluster_override_policies: i64,
    pub resource_bindings: i64,
    pub workloads: i64,
    pub namespaces: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    #[serde(default)]
    pub phase: Phase,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karmada_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The karmada-apiserver endpoint Kairship talks to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_endpoint: Option<String>,
    /// `ready/total` member clusters, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<String>,
    /// `ready/total` nodes, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<InstanceStats>,
    /// RFC 3339 time of the last successful sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<String>,
    /// The certificates the instance is reached with, the first to expire first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<CertificateStatus>,
    /// The newest completed backup, while backups are scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<LastBackup>,
    /// Where its Karmada spec differs from its class's, field by field. Always written,
    /// empty too: the status is merge-patched, and an absent list would keep the old one.
    #[serde(default)]
    pub drift: Vec<super::ClassDrift>,
    /// Members also joined to other instances (`cluster-profiles`). Always written, as
    /// `drift` is.
    #[serde(default)]
    pub shared_members: Vec<SharedMember>,
    /// A managed instance's control plane in the host, as its component pods ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneUsage>,
    /// RFC 3339 time Kairship's proxy last answered a request for the instance (carried
    /// over when its actor restarts); absent: none since Kairship first ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_request_time: Option<String>,
    /// Where hibernation has it (absent: never hibernated). Written by the leader while
    /// the instance's actor is stopped, so the actor never writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernation: Option<HibernationStatus>,
}

/// Where an instance is between awake and asleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
pub enum HibernationState {
    #[default]
    Awake,
    /// Its actor is stopped and its components are being scaled to zero.
    Hibernating,
    Hibernated,
    /// Its components are being scaled up; its actor starts once they are ready.
    Waking,
}

impl HibernationState {
    /// Its actor does not run: nothing answers, or not yet.
    pub fn asleep(self) -> bool {
        self != HibernationState::Awake
    }
}

/// Hibernation's record of an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HibernationStatus {
    /// Absent in a status only a waiting reason was written to: Awake.
    #[serde(default)]
    pub state: HibernationState,
    /// Why it is in that state (a schedule, a command, a request, idleness).
    #[serde(default)]
    pub reason: String,
    /// RFC 3339 time it entered the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Seconds the last hibernation took, from the decision to every component at zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hibernate_seconds: Option<f64>,
    /// Seconds the last wake took, from the decision to the actor starting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_wake_seconds: Option<f64>,
    /// Times it was woken.
    #[serde(default)]
    pub wakes: i64,
    /// Seconds it spent hibernated, counted at each wake.
    #[serde(default)]
    pub hibernated_seconds: i64,
    /// What became of etcd: scaled to zero with its volume claim, or kept running because
    /// its data lives in an emptyDir that scaling to zero would lose.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub etcd: String,
}

impl Instance {
    /// Hibernation has its actor stopped (`HibernationState::asleep`).
    pub fn asleep(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.hibernation.as_ref())
            .is_some_and(|h| h.state.asleep())
    }
}

/// What a managed instance's control plane takes in the host: its component pods (those
/// karmada-operator labels for the instance, not finished) and the CPU and memory their
/// containers request, the share the host's scheduler keeps for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneUsage {
    pub pods: i64,
    /// Kubernetes quantities ("1500m", "3Gi"); "0" when no container requests any.
    pub cpu_requests: String,
    pub memory_requests: String,
    /// Containers that request no CPU or no memory: the sums leave them out.
    #[serde(default)]
    pub containers_without_requests: i64,
}

/// A completed backup, as the Instance's status names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct LastBackup {
    pub name: String,
    /// RFC 3339.
    pub completed: String,
}

/// One certificate and its validity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CertificateStatus {
    /// Where it was seen: "kubeconfig CA", "kubeconfig client", "karmada-apiserver
    /// serving", or an operator Secret's `name/key`.
    pub name: String,
    pub subject: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
    /// RFC 3339.
    pub not_after: String,
}

impl InstanceSpec {
    /// Checks what the schema cannot express, naming the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(h) = &self.hibernation {
            if self.mode != InstanceMode::Managed {
                return Err(
                    "spec.hibernation needs spec.mode Managed: Kairship cannot scale an external instance's control plane"
                        .into(),
                );
            }
            h.validate()?;
        }
        match self.mode {
            InstanceMode::External => match &self.external {
                None => Err("spec.external is required when spec.mode is External".into()),
                Some(e) if e.kubeconfig_secret_ref.name.is_empty() => {
                    Err("spec.external.kubeconfigSecretRef.name must not be empty".into())
                }
                Some(e) if e.kubeconfig_secret_ref.namespace.is_empty() => {
                    Err("spec.external.kubeconfigSecretRef.namespace must not be empty".into())
                }
                Some(_) => Ok(()),
            },
            InstanceMode::Managed => Ok(()),
        }
    }
}
