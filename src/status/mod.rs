//! The status an instance actor reports: phase and conditions (`Reachable`, `Synced`,
//! `Ready`, and where they apply `CertificatesExpiring`, `ComponentsHealthy`,
//! `GuardrailsApplied`, Clusterpedia's) from what it observed. Pure functions.

pub mod lifecycle;

use crate::crd::{Condition, InstanceStats, InstanceStatus, Phase};
pub mod report;

use lifecycle::{Lifecycle, Wait};
pub use report::{Report, Reports, Said};

/// What the instance actor knows at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    pub lifecycle: Lifecycle,
    pub stats: Option<InstanceStats>,
    pub karmada_version: Option<String>,
    pub kubernetes_version: Option<String>,
    pub endpoint: Option<String>,
    /// How long before the first expiry the certificates' condition turns True.
    pub certificate_warning: std::time::Duration,
    /// While karmada-operator upgrades a managed instance: its first failing component
    /// (`Some(Some)`), none (`Some(None)`). What the components controller would say, were
    /// the instance answering: the rollout engine fails an upgrade whose pods cannot run.
    pub upgrade_components: Option<Option<String>>,
    /// When the proxy last answered a request for it (RFC 3339), since the actor started.
    pub last_request: Option<String>,
    /// What each controller says of the instance (`controllers`).
    pub reports: Reports,
}

impl Observed {
    /// The first failing component, as the upgrade or the components controller says.
    pub fn failing_component(&self) -> Option<String> {
        match &self.upgrade_components {
            Some(failing) => failing.clone(),
            None => self
                .reports
                .said(COMPONENTS_CONDITION)
                .filter(|c| c.status == Some(false))
                .map(|c| c.message.clone()),
        }
    }
}

/// The condition Kairship adds to the Instance's status while Clusterpedia registration
/// is on.
pub const CLUSTERPEDIA_CONDITION: &str = "ClusterpediaSynced";

/// The condition on an instance's scheduled backups.
pub const BACKUPS_CONDITION: &str = "BackupsHealthy";

/// The condition on the instance's guardrails.
pub const GUARDRAILS_CONDITION: &str = "GuardrailsApplied";

/// The condition on a managed instance's components.
pub const COMPONENTS_CONDITION: &str = "ComponentsHealthy";

/// The ComponentsHealthy condition for a managed instance's first failing component.
pub fn components_said(failing: Option<&str>) -> (bool, &'static str, &str) {
    match failing {
        None => (true, "Running", "every component's containers run"),
        Some(why) => (false, "ComponentFailing", why),
    }
}

/// A condition whose `lastTransitionTime` moves only when its status does.
pub fn condition(
    prev: &[Condition],
    type_: &str,
    ok: Option<bool>,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &str,
) -> Condition {
    let status = match ok {
        Some(true) => "True",
        Some(false) => "False",
        None => "Unknown",
    };
    let since = prev
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.to_string());
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: since,
        observed_generation: generation,
    }
}

pub fn build(prev: Option<&InstanceStatus>, o: &Observed, now: &str) -> InstanceStatus {
    let prev_conds = prev.map(|p| p.conditions.as_slice()).unwrap_or(&[]);
    let phase = o.lifecycle.phase();
    let msg = o.lifecycle.why().unwrap_or("");
    let waiting = match o.lifecycle {
        Lifecycle::Connecting {
            wait: Wait::Provisioning,
            ..
        } => Some("Provisioning"),
        Lifecycle::Connecting {
            wait: Wait::Upgrading,
            ..
        } => Some("Upgrading"),
        _ => None,
    };
    let reachable = match (o.lifecycle.reachable(), waiting) {
        (Some(true), _) => condition(
            prev_conds,
            "Reachable",
            Some(true),
            "ProbeSucceeded",
            "karmada-apiserver answers",
            o.generation,
            now,
        ),
        (Some(false), _) => condition(
            prev_conds,
            "Reachable",
            Some(false),
            "ProbeFailed",
            msg,
            o.generation,
            now,
        ),
        (None, Some(waiting)) => condition(
            prev_conds,
            "Reachable",
            None,
            waiting,
            msg,
            o.generation,
            now,
        ),
        (None, None) => condition(
            prev_conds,
            "Reachable",
            None,
            "Connecting",
            msg,
            o.generation,
            now,
        ),
    };
    let synced = if o.lifecycle.synced() {
        condition(
            prev_conds,
            "Synced",
            Some(true),
            "CachesSynced",
            "every cache completed its initial list",
            o.generation,
            now,
        )
    } else {
        // What holds the caches up, when a watch keeps failing: the console and
        // `kubectl describe` show the first condition that is not True.
        let message = match &o.lifecycle {
            Lifecycle::Degraded { why, .. } => {
                format!("caches have not completed their initial list: {why}")
            }
            _ => "caches have not completed their initial list".to_string(),
        };
        condition(
            prev_conds,
            "Synced",
            Some(false),
            "CachesSyncing",
            &message,
            o.generation,
            now,
        )
    };
    let ready = match (&o.lifecycle, phase) {
        (Lifecycle::Degraded { why, .. }, _) => condition(
            prev_conds,
            "Ready",
            Some(false),
            "Degraded",
            why,
            o.generation,
            now,
        ),
        (_, Phase::Running) => condition(
            prev_conds,
            "Ready",
            Some(true),
            "Running",
            "instance is reachable and synced",
            o.generation,
            now,
        ),
        (_, p) => condition(
            prev_conds,
            "Ready",
            Some(false),
            &format!("{p:?}"),
            msg,
            o.generation,
            now,
        ),
    };
    let last_sync_time = if phase == Phase::Running {
        Some(now.to_string())
    } else {
        prev.and_then(|p| p.last_sync_time.clone())
    };
    let mut conditions = vec![reachable, synced, ready];
    let said = |c: &Said| {
        condition(
            prev_conds,
            c.type_,
            c.status,
            &c.reason,
            &c.message,
            o.generation,
            now,
        )
    };
    for report in o.reports.iter() {
        conditions.extend(report.conditions.iter().map(said));
    }
    if let Some(failing) = &o.upgrade_components {
        let (ok, reason, message) = components_said(failing.as_deref());
        conditions.retain(|c| c.type_ != COMPONENTS_CONDITION);
        conditions.push(said(&Said {
            type_: COMPONENTS_CONDITION,
            status: Some(ok),
            reason: reason.into(),
            message: message.into(),
        }));
    }
    let fields = |f: fn(&Report) -> bool| o.reports.iter().find(|r| f(r));
    let certificates = match fields(|r| r.certificates.as_ref().is_some_and(|c| !c.is_empty())) {
        Some(r) => r.certificates.clone().unwrap_or_default(),
        None => prev.map(|p| p.certificates.clone()).unwrap_or_default(),
    };
    let at = now
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|_| jiff::Timestamp::now());
    if let Some((on, reason, message)) =
        crate::certificates::condition_of(&certificates, at, o.certificate_warning)
    {
        conditions.push(condition(
            prev_conds,
            crate::certificates::CONDITION,
            Some(on),
            reason,
            &message,
            o.generation,
            now,
        ));
    }
    let last_backup = fields(|r| r.last_backup.is_some()).and_then(|r| r.last_backup.clone());
    let drift = fields(|r| r.drift.is_some())
        .and_then(|r| r.drift.clone())
        .unwrap_or_default();
    let control_plane = fields(|r| r.control_plane.is_some()).and_then(|r| r.control_plane.clone());
    let shared_members = fields(|r| r.shared_members.is_some())
        .and_then(|r| r.shared_members.clone())
        .unwrap_or_default();
    InstanceStatus {
        last_backup,
        phase,
        conditions,
        observed_generation: o.generation,
        karmada_version: o
            .karmada_version
            .clone()
            .or_else(|| prev.and_then(|p| p.karmada_version.clone())),
        kubernetes_version: o
            .kubernetes_version
            .clone()
            .or_else(|| prev.and_then(|p| p.kubernetes_version.clone())),
        api_endpoint: o
            .endpoint
            .clone()
            .or_else(|| prev.and_then(|p| p.api_endpoint.clone())),
        clusters: o
            .stats
            .as_ref()
            .map(|s| format!("{}/{}", s.clusters_ready, s.clusters_total))
            .or_else(|| prev.and_then(|p| p.clusters.clone())),
        nodes: o
            .stats
            .as_ref()
            .map(|s| format!("{}/{}", s.nodes_ready, s.nodes_total))
            .or_else(|| prev.and_then(|p| p.nodes.clone())),
        stats: o
            .stats
            .clone()
            .or_else(|| prev.and_then(|p| p.stats.clone())),
        last_sync_time,
        certificates,
        drift,
        shared_members,
        control_plane: control_plane.or_else(|| prev.and_then(|p| p.control_plane.clone())),
        last_request_time: o
            .last_request
            .clone()
            .or_else(|| prev.and_then(|p| p.last_request_time.clone())),
        // The leader's alone (`hibernation::runner`): absent from the merge patch, so a
        // stale copy never undoes its step.
        hibernation: None,
    }
}

/// Whether `next` says something `prev` did not, ignoring the sync timestamp and the
/// statistics: members' allocations move with every pod, so comparing them wrote each
/// instance's status twice a second, every write read back by every replica's watch
/// (a 50-instance fleet left Kairship's own Instance cache a minute behind on a loaded
/// machine). Statistics go out with the periodic refresh (`Settings::status_refresh`).
pub fn changed(prev: Option<&InstanceStatus>, next: &InstanceStatus) -> bool {
    match prev {
        None => true,
        // Field by field, without cloning (this runs on every tick of every instance);
        // the destructuring makes a new field fail to compile until it is compared here.
        Some(p) => {
            let InstanceStatus {
                phase,
                conditions,
                observed_generation,
                karmada_version,
                kubernetes_version,
                api_endpoint,
                clusters,
                nodes,
                stats: _,
                last_sync_time: _,
                certificates,
                last_backup,
                drift,
                shared_members,
                control_plane,
                last_request_time,
                hibernation: _,
            } = p;
            *phase != next.phase
                || *conditions != next.conditions
                || *observed_generation != next.observed_generation
                || *karmada_version != next.karmada_version
                || *kubernetes_version != next.kubernetes_version
                || *api_endpoint != next.api_endpoint
                || *clusters != next.clusters
                || *nodes != next.nodes
                || *certificates != next.certificates
                || *last_backup != next.last_backup
                || *drift != next.drift
                || *shared_members != next.shared_members
                || *control_plane != next.control_plane
                // The first request is news; later ones go out with the refresh.
                || last_request_time.is_none() != next.last_request_time.is_none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> Observed {
        Observed {
            lifecycle: Lifecycle::Serving,
            ..Default::default()
        }
    }

    fn reasons(s: &InstanceStatus) -> Vec<(&str, &str, &str)> {
        s.conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn conditions_follow_the_lifecycle() {
        let now = "2026-01-01T00:00:00Z";
        let running = build(None, &running(), now);
        assert_eq!(running.phase, Phase::Running);
        assert_eq!(
            reasons(&running),
            [
                ("Reachable", "True", "ProbeSucceeded"),
                ("Synced", "True", "CachesSynced"),
                ("Ready", "True", "Running")
            ]
        );
        let provisioning = Observed {
            lifecycle: Lifecycle::Connecting {
                attempts: 1,
                wait: Wait::Provisioning,
                why: Some("karmada-operator is not done".into()),
            },
            ..Default::default()
        };
        let s = build(None, &provisioning, now);
        assert_eq!(s.phase, Phase::Provisioning);
        assert_eq!(reasons(&s)[0], ("Reachable", "Unknown", "Provisioning"));
        assert_eq!(s.conditions[0].message, "karmada-operator is not done");
        let degraded = Observed {
            lifecycle: Lifecycle::Degraded {
                synced: false,
                why: "the watch of clusters.cluster.karmada.io keeps failing".into(),
            },
            ..Default::default()
        };
        let s = build(None, &degraded, now);
        assert_eq!(s.phase, Phase::Degraded);
        assert_eq!(
            reasons(&s),
            [
                ("Reachable", "True", "ProbeSucceeded"),
                ("Synced", "False", "CachesSyncing"),
                ("Ready", "False", "Degraded")
            ]
        );
        assert!(s.conditions[1]
            .message
            .contains("clusters.cluster.karmada.io"));
        assert!(s.conditions[2]
            .message
            .contains("clusters.cluster.karmada.io"));
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let first = build(None, &running(), "2026-01-01T00:00:00Z");
        let again = build(Some(&first), &running(), "2026-01-01T00:01:00Z");
        assert_eq!(
            first.conditions, again.conditions,
            "same status keeps its transition time"
        );
        assert!(!changed(Some(&first), &again), "only lastSyncTime moved");
        let down = build(
            Some(&again),
            &Observed {
                lifecycle: Lifecycle::Unreachable {
                    synced: true,
                    why: "connection refused".into(),
                },
                ..running()
            },
            "2026-01-01T00:02:00Z",
        );
        let reach = down
            .conditions
            .iter()
            .find(|c| c.type_ == "Reachable")
            .expect("reachable");
        assert_eq!(
            (reach.status.as_str(), reach.last_transition_time.as_str()),
            ("False", "2026-01-01T00:02:00Z")
        );
        assert_eq!(
            down.last_sync_time.as_deref(),
            Some("2026-01-01T00:01:00Z"),
            "an unreachable instance keeps its last sync time"
        );
        assert!(changed(Some(&again), &down));
    }

    #[test]
    fn each_controllers_report_is_merged_in_table_order() {
        let mut o = running();
        let mut guard = Report::default();
        guard.say(
            GUARDRAILS_CONDITION,
            Some(true),
            "Applied",
            "2 guardrail(s) applied",
        );
        o.reports.put("guardrails", guard);
        let mut components = Report::default();
        components.say(COMPONENTS_CONDITION, Some(true), "Running", "fine");
        components.control_plane = Some(crate::crd::ControlPlaneUsage {
            pods: 9,
            ..Default::default()
        });
        o.reports.put("components", components);
        let first = build(None, &o, "2026-01-01T00:00:00Z");
        assert_eq!(
            reasons(&first)[3..],
            [
                (GUARDRAILS_CONDITION, "True", "Applied"),
                (COMPONENTS_CONDITION, "True", "Running")
            ]
        );
        assert_eq!(first.control_plane.as_ref().map(|c| c.pods), Some(9));

        // An upgrade's failing component overrides the controller's last word.
        o.upgrade_components = Some(Some("karmada-apiserver: ImagePullBackOff".into()));
        let upgrading = build(Some(&first), &o, "2026-01-01T00:05:00Z");
        let c = upgrading
            .conditions
            .iter()
            .find(|c| c.type_ == COMPONENTS_CONDITION)
            .expect("components");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ComponentFailing")
        );
        assert_eq!(c.last_transition_time, "2026-01-01T00:05:00Z");
        assert_eq!(
            o.failing_component().as_deref(),
            Some("karmada-apiserver: ImagePullBackOff")
        );
        let g = upgrading
            .conditions
            .iter()
            .find(|c| c.type_ == GUARDRAILS_CONDITION)
            .expect("guardrails");
        assert_eq!(
            g.last_transition_time, "2026-01-01T00:00:00Z",
            "unchanged since"
        );

        // A report gone (its controller off, or leadership lost) says nothing any more;
        // what only the status held stays.
        o.upgrade_components = None;
        o.reports = Reports::default();
        let later = build(Some(&upgrading), &o, "2026-01-01T00:06:00Z");
        assert_eq!(later.conditions.len(), 3);
        assert_eq!(later.control_plane.as_ref().map(|c| c.pods), Some(9));
        assert_eq!(o.failing_component(), None);
    }
}
