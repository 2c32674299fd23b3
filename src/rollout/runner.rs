//! Running `FleetRollout`s: the host's rollouts are watched once per process
//! ([`FleetRollouts`]); on the leader, every [`TICK`] each rollout gets one
//! [`engine::pass`] over the Instance cache and what changed is written to its status
//! (phase, reason, waves, and only the instance entries the pass changed, as a merge
//! patch, since each instance's `rollout-steps` controller writes its own entry too).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};
use tracing::{info, warn};

use super::{engine, findings};
use crate::actors::context::Context;
use crate::actors::instance_informer::AbortOnDrop;
use crate::crd::{FleetRollout, FleetRolloutSpec, FleetRolloutStatus, Instance, InstanceRollout};

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

/// The waves and each planned instance's blocking findings, for [`engine::pass`].
pub type Planned = (Vec<Vec<String>>, BTreeMap<String, Vec<String>>);

/// The plan of `spec` over `fleet` at `now`, as `PlanRollout` would answer it.
pub fn plan(
    spec: &FleetRolloutSpec,
    fleet: &[Arc<Instance>],
    now: jiff::Timestamp,
) -> Result<Planned, String> {
    let p = findings::plan_of(&findings::spec_of(spec), fleet, now).map_err(|e| e.to_string())?;
    let waves = p
        .waves
        .iter()
        .map(|w| w.instances.iter().map(|i| i.name.clone()).collect())
        .collect();
    let blocking = p
        .waves
        .iter()
        .flat_map(|w| &w.instances)
        .map(|i| (i.name.clone(), i.blocking.clone()))
        .collect();
    Ok((waves, blocking))
}

/// The merge patch that takes `before` to `after`: the rollout-wide fields, and only the
/// instance entries that differ.
pub fn status_patch(
    before: &FleetRolloutStatus,
    after: &FleetRolloutStatus,
) -> Option<Value> {
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

/// One pass over every rollout, on the leader.
async fn pass_all(ctx: &Context) {
    let api: Api<FleetRollout> = Api::all(ctx.host.clone());
    let fleet = ctx.instances.store().state();
    let now = jiff::Timestamp::now();
    for r in ctx.rollouts.store().state() {
        let Some(name) = r.metadata.name.as_deref() else {
            continue;
        };
        let before = r.status.clone().unwrap_or_default();
        let mut after = engine::pass(&r.spec, &before, &fleet, || plan(&r.spec, &fleet, now), now);
        after.observed_generation = r.metadata.generation;
        let Some(patch) = status_patch(&before, &after) else {
            continue;
        };
        if before.phase != after.phase {
            info!(rollout = name, phase = %after.phase, reason = %after.reason, "rollout moved");
        }
        let write = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch));
        match tokio::time::timeout(ctx.settings.host_call_timeout, write).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(rollout = name, error = %e, "writing the rollout's status failed"),
            Err(_) => warn!(rollout = name, "writing the rollout's status timed out"),
        }
    }
}

/// The leader's loop: a pass every [`TICK`] while this replica leads.
pub async fn run(ctx: Context) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if ctx.leadership.is_leader() {
            pass_all(&ctx).await;
        }
    }
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
            instances: [("a".into(), entry("Soaking")), ("b".into(), entry("Pending"))].into(),
            ..Default::default()
        };
        assert_eq!(status_patch(&before, &before), None, "nothing changed");
        let mut after = before.clone();
        after.instances.insert("b".into(), entry("BackingUp"));
        let patch = status_patch(&before, &after).expect("a change");
        let instances = patch["status"]["instances"].as_object().expect("instances");
        assert_eq!(instances.len(), 1, "a's entry is left to its controller: {patch}");
        assert_eq!(instances["b"]["step"], "BackingUp");
    }
}
