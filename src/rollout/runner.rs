//! The leader's `FleetRollout` passes: every [`TICK`] each rollout gets one
//! [`engine::pass`] over the Instance cache and what changed is written to its status
//! (`store::status_patch`).

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use tracing::{info, warn};

use super::engine::{self, Planned};
use super::findings;
use super::store::{status_patch, TICK};
use crate::actors::context::Context;
use crate::crd::{FleetRollout, FleetRolloutSpec, Instance, InstanceClassSpec};

/// The plan of `spec` over `fleet` at `now`, as `PlanRollout` would answer it (`class`:
/// the class a class rollout names, if found).
pub fn plan(
    spec: &FleetRolloutSpec,
    class: Option<&InstanceClassSpec>,
    fleet: &[Arc<Instance>],
    now: jiff::Timestamp,
) -> Result<Planned, String> {
    let wanted = findings::with_class(findings::spec_of(spec), class).map_err(|e| e.to_string())?;
    let p = findings::plan_of(&wanted, fleet, now).map_err(|e| e.to_string())?;
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
        let class = r
            .spec
            .class_name
            .as_deref()
            .and_then(|c| ctx.classes.get(c));
        let class = class.as_ref().map(|c| &c.spec);
        let mut after = engine::pass(
            &r.spec,
            &before,
            &fleet,
            || plan(&r.spec, class, &fleet, now),
            now,
        );
        after.observed_generation = r.metadata.generation;
        let Some(patch) = status_patch(&before, &after) else {
            continue;
        };
        if before.phase != after.phase {
            info!(rollout = name, phase = %after.phase, reason = %after.reason, "rollout moved");
        }
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let write = api.patch_status(name, &params, &patch);
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
