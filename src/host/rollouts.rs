//! The host's `FleetRollout`s, watched once per process ([`FleetRollouts`]), and how
//! their status is written: the leader's pass (`runner`) writes the rollout-wide fields
//! and only the instance entries it changed, each instance's `rollout-steps` controller
//! its own entry, both as merge patches so neither overwrites the other's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::crd::{FleetRollout, FleetRolloutStatus, InstanceRollout};
use crate::host::watched::Watched;

/// How often the leader looks at every rollout, and each instance's controller at its
/// own step.
pub const TICK: Duration = Duration::from_secs(2);

/// The host's FleetRollouts, watched once per process.
#[derive(Clone)]
pub struct FleetRollouts(pub Watched<FleetRollout>);

impl FleetRollouts {
    pub fn start(host: &kube::Client) -> Self {
        Self(Watched::start(host))
    }

    pub fn store(&self) -> &kube::runtime::reflector::Store<FleetRollout> {
        self.0.store()
    }

    /// The rollout that still has work for `instance` (backing up, upgrading, soaking
    /// while its requests are judged, or failed and not yet rolled back), with its entry. A rollout halted or aborted keeps
    /// rolling back what failed.
    pub fn active_for(&self, instance: &str) -> Option<(Arc<FleetRollout>, InstanceRollout)> {
        // Asked at every tick of every instance: no copy of an entry that is not working,
        // and the first rollout by name when several are (none should be).
        self.store()
            .state()
            .into_iter()
            .filter(|r| {
                r.status
                    .as_ref()
                    .and_then(|s| s.instances.get(instance))
                    .is_some_and(|e| {
                        matches!(e.step.as_str(), "BackingUp" | "Upgrading" | "Soaking")
                            || (e.step == "Failed" && e.backup.is_some())
                    })
            })
            .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name))
            .and_then(|r| {
                let entry = r.status.as_ref()?.instances.get(instance)?.clone();
                Some((r, entry))
            })
    }
}

/// The merge patch that takes `before` to `after`: the rollout-wide fields, and only the
/// instance entries that differ.
pub fn status_patch(before: &FleetRolloutStatus, after: &FleetRolloutStatus) -> Option<Value> {
    let changed: serde_json::Map<String, Value> = after
        .instances
        .iter()
        .filter(|(n, e)| before.instances.get(*n) != Some(*e))
        .filter_map(|(n, e)| Some((n.clone(), serde_json::to_value(e).ok()?)))
        .collect();
    let same = before.phase == after.phase
        && before.reason == after.reason
        && before.waves == after.waves
        && before.observed_generation == after.observed_generation
        && changed.is_empty();
    (!same).then(|| {
        json!({"status": {
            "phase": after.phase,
            "reason": after.reason,
            "waves": after.waves,
            "observedGeneration": after.observed_generation,
            "instances": changed,
        }})
    })
}

/// One instance's entry as a status merge patch (what `rollout-steps` writes).
pub fn entry_patch(instance: &str, entry: &InstanceRollout) -> Value {
    json!({"status": {"instances": {instance: entry}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_patch_carries_only_what_changed() {
        let entry = |step: &str| InstanceRollout {
            step: step.into(),
            ..Default::default()
        };
        let before = FleetRolloutStatus {
            phase: "Progressing".into(),
            waves: vec![vec!["a".into()], vec!["b".into()]],
            instances: [
                ("a".into(), entry("Soaking")),
                ("b".into(), entry("Pending")),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(status_patch(&before, &before), None, "nothing changed");
        let mut after = before.clone();
        after.instances.insert("b".into(), entry("BackingUp"));
        let patch = status_patch(&before, &after).expect("a change");
        let instances = patch["status"]["instances"].as_object().expect("instances");
        assert_eq!(
            instances.len(),
            1,
            "a's entry is left to its controller: {patch}"
        );
        assert_eq!(instances["b"]["step"], "BackingUp");
    }
}
