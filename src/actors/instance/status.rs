//! The status an instance actor reports: phase and conditions (`Reachable`, `Synced`,
//! `Ready`) from what it observed. Pure functions.

use crate::crd::{Condition, InstanceStats, InstanceStatus, Phase};

/// What the instance actor knows at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub generation: Option<i64>,
    /// Connected and caches exist.
    pub connected: bool,
    /// Waiting for a managed control plane.
    pub provisioning: bool,
    /// A managed control plane is being upgraded by karmada-operator.
    pub upgrading: bool,
    /// `None` before the first probe.
    pub reachable: Option<bool>,
    pub synced: bool,
    pub degraded: Option<String>,
    pub message: Option<String>,
    pub stats: Option<InstanceStats>,
    pub karmada_version: Option<String>,
    pub kubernetes_version: Option<String>,
    pub endpoint: Option<String>,
}

pub fn phase(o: &Observed) -> Phase {
    if o.degraded.is_some() {
        Phase::Degraded
    } else if o.reachable == Some(false) {
        Phase::Unreachable
    } else if o.upgrading {
        Phase::Upgrading
    } else if o.provisioning {
        Phase::Provisioning
    } else if o.connected && o.synced && o.reachable == Some(true) {
        Phase::Running
    } else {
        Phase::Pending
    }
}

/// A condition whose `lastTransitionTime` moves only when its status does.
fn condition(
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
    let phase = phase(o);
    let msg = o.message.as_deref().unwrap_or("");
    let reachable = match o.reachable {
        Some(true) => condition(
            prev_conds,
            "Reachable",
            Some(true),
            "ProbeSucceeded",
            "karmada-apiserver answers",
            o.generation,
            now,
        ),
        Some(false) => condition(
            prev_conds,
            "Reachable",
            Some(false),
            "ProbeFailed",
            msg,
            o.generation,
            now,
        ),
        None if o.provisioning || o.upgrading => condition(
            prev_conds,
            "Reachable",
            None,
            if o.upgrading {
                "Upgrading"
            } else {
                "Provisioning"
            },
            msg,
            o.generation,
            now,
        ),
        None => condition(
            prev_conds,
            "Reachable",
            None,
            "Connecting",
            msg,
            o.generation,
            now,
        ),
    };
    let synced = if o.synced {
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
        condition(
            prev_conds,
            "Synced",
            Some(false),
            "CachesSyncing",
            "caches have not completed their initial list",
            o.generation,
            now,
        )
    };
    let ready = match (&o.degraded, phase) {
        (Some(why), _) => condition(
            prev_conds,
            "Ready",
            Some(false),
            "Degraded",
            why,
            o.generation,
            now,
        ),
        (None, Phase::Running) => condition(
            prev_conds,
            "Ready",
            Some(true),
            "Running",
            "instance is reachable and synced",
            o.generation,
            now,
        ),
        (None, p) => condition(
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
    InstanceStatus {
        phase,
        conditions: vec![reachable, synced, ready],
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
    }
}

/// Whether `next` says something `prev` did not (ignoring the sync timestamp).
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
                stats,
                last_sync_time: _,
            } = p;
            *phase != next.phase
                || *conditions != next.conditions
                || *observed_generation != next.observed_generation
                || *karmada_version != next.karmada_version
                || *kubernetes_version != next.kubernetes_version
                || *api_endpoint != next.api_endpoint
                || *clusters != next.clusters
                || *nodes != next.nodes
                || *stats != next.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> Observed {
        Observed {
            connected: true,
            reachable: Some(true),
            synced: true,
            ..Default::default()
        }
    }

    #[test]
    fn phases_from_observations() {
        assert_eq!(phase(&Observed::default()), Phase::Pending);
        assert_eq!(phase(&running()), Phase::Running);
        assert_eq!(
            phase(&Observed {
                reachable: Some(false),
                ..running()
            }),
            Phase::Unreachable
        );
        assert_eq!(
            phase(&Observed {
                provisioning: true,
                ..Default::default()
            }),
            Phase::Provisioning
        );
        assert_eq!(
            phase(&Observed {
                upgrading: true,
                ..Default::default()
            }),
            Phase::Upgrading
        );
        assert_eq!(
            phase(&Observed {
                degraded: Some("panics".into()),
                ..running()
            }),
            Phase::Degraded
        );
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
                reachable: Some(false),
                message: Some("connection refused".into()),
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
}
