//! The host's `FleetRollout`s, watched once per process ([`FleetRollouts`]), and how
//! their status is written: the leader's pass (`runner`) writes the rollout-wide fields
//! and only the instance entries it changed, each instance's `rollout-steps` controller
//! its own entry, both as merge patches so neither overwrites the other's.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};
use tracing::warn;

use crate::actors::instance_informer::AbortOnDrop;
use crate::crd::{FleetRollout, FleetRolloutStatus, InstanceRollout};

/// How often the leader looks at every rollout, and each instance's controller at its
/// own step.
pub const TICK: Duration = Duration::from_secs(2);

/// The host's FleetRollouts, watched once per process.
#[derive(Clone)]
pub struct FleetRollouts {
    store: Store<FleetRollout>,
    _task: Arc<AbortOnDrop>,
}

impl FleetRollouts {
    /// Starts watching (relisting with backoff on errors, such as a host without the CRD).
    pub fn start(host: &kube::Client) -> Self {
        let api: Api<FleetRollout> = Api::all(host.clone());
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default()).default_backoff(),
        );
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut failing = false;
            while let Some(ev) = stream.next().await {
                match ev {
                    Err(e) if !failing => {
                        failing = true;
                        warn!(error = %e, "watching FleetRollouts failed; retrying with backoff");
                    }
                    Err(_) => {}
                    Ok(_) => failing = false,
                }
            }
        });
        Self {
            store,
            _task: Arc::new(AbortOnDrop(task)),
        }
    }

    pub fn store(&self) -> &Store<FleetRollout> {
        &self.store
    }

    /// The step `instance` is at in a rollout that still has work for it (backing up,
    /// upgrading, or failed and not yet rolled back), with that rollout's target release
    /// and name. A rollout halted or aborted keeps rolling back what failed.
    pub fn active_for(&self, instance: &str) -> Option<(String, String, InstanceRollout)> {
        let mut all = self.store.state();
        all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        all.iter().find_map(|r| {
            let entry = r.status.as_ref()?.instances.get(instance)?;
            let working = matches!(entry.step.as_str(), "BackingUp" | "Upgrading")
                || (entry.step == "Failed" && entry.backup.is_some());
            working.then(|| {
                (
                    r.metadata.name.clone().unwrap_or_default(),
                    r.spec.karmada_version.clone(),
                    entry.clone(),
                )
            })
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
