//! The leader's `FleetRollout` passes: every [`TICK`] each rollout gets one
//! [`engine::pass`] over the Instance cache and what changed is written to its status
//! (`store::status_patch`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, Patch, PatchParams};
use tracing::{debug, info, warn};

use super::alerts::{Read, Reader};
use super::engine::{self, Planned};
use super::findings;
use crate::context::events::{event_on, About};
use crate::context::Context;
use crate::crd::{FleetRollout, FleetRolloutSpec, FleetRolloutStatus, Instance, InstanceClassSpec};
use crate::host::rollouts::{status_patch, TICK};

/// The plan of `spec` over `fleet` at `now`, as `PlanRollout` would answer it (`class`:
/// the class a class rollout names, if found; `crd`: the CRD changes of its releases).
pub fn plan(
    spec: &FleetRolloutSpec,
    class: Option<&InstanceClassSpec>,
    fleet: &[Arc<Instance>],
    crd: &findings::CrdChanges,
    now: jiff::Timestamp,
) -> Result<Planned, String> {
    let mut p = plan_proto(spec, class, fleet, now)?;
    findings::with_crd_changes(&mut p, crd);
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

/// The plan of `spec` as `PlanRollout` answers it, before its CRD changes.
fn plan_proto(
    spec: &FleetRolloutSpec,
    class: Option<&InstanceClassSpec>,
    fleet: &[Arc<Instance>],
    now: jiff::Timestamp,
) -> Result<crate::proto::RolloutPlan, String> {
    let wanted = findings::with_class(findings::spec_of(spec), class).map_err(|e| e.to_string())?;
    findings::plan_of(&wanted, fleet, now).map_err(|e| e.to_string())
}

/// The CRD changes of the releases a rollout about to be planned moves between.
async fn crd_changes(
    ctx: &Context,
    spec: &FleetRolloutSpec,
    class: Option<&InstanceClassSpec>,
    fleet: &[Arc<Instance>],
    now: jiff::Timestamp,
) -> findings::CrdChanges {
    let Ok(p) = plan_proto(spec, class, fleet, now) else {
        return findings::CrdChanges::new();
    };
    super::crd_diff::between(
        &ctx.host,
        &ctx.settings.managed_namespace,
        findings::release_pairs(&p),
        ctx.settings.host_call_timeout,
    )
    .await
}

/// What Prometheus says is firing, read once for this pass when a rollout still running
/// halts on alerts (`None`: Kairship reads no alerts, or no rollout needs them).
async fn alerts_now(rollouts: &[Arc<FleetRollout>], reader: Option<&Reader>) -> Option<Read> {
    let reader = reader?;
    // A rollout halted by a failure stays so whatever fires; one held goes on once the
    // alerts allow it, so it keeps reading them.
    let needed = rollouts.iter().any(|r| {
        let (phase, reason) = r
            .status
            .as_ref()
            .map_or(("", ""), |s| (s.phase.as_str(), s.reason.as_str()));
        let halted_for_good = phase == "Halted" && !super::alerts::is_hold(reason);
        !r.spec.aborted
            && !r.spec.halt_on_alerts.is_empty()
            && !halted_for_good
            && !matches!(phase, "Completed" | "Aborted")
    });
    if !needed {
        return None;
    }
    let read = reader.read().await;
    if let Err(e) = &read {
        debug!(error = %e, "reading the firing alerts failed; rollouts that halt on alerts hold");
    }
    Some(read)
}

/// One pass over every rollout, on the leader.
async fn pass_all(ctx: &Context, reader: Option<&Reader>) {
    let api: Api<FleetRollout> = Api::all(ctx.host.clone());
    let fleet = ctx.instances.store().state();
    let rollouts = ctx.rollouts.store().state();
    let alerts = alerts_now(&rollouts, reader).await;
    let now = jiff::Timestamp::now();
    for r in rollouts {
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
        // Planned once, at its start: the CRD changes of the releases it moves between.
        let crd = match before.waves.is_empty() {
            true => crd_changes(ctx, &r.spec, class, &fleet, now).await,
            false => findings::CrdChanges::new(),
        };
        let mut after = engine::pass(
            &r.spec,
            &before,
            &fleet,
            || plan(&r.spec, class, &fleet, &crd, now),
            alerts.as_ref(),
            now,
        );
        after.observed_generation = r.metadata.generation;
        let Some(patch) = status_patch(&before, &after) else {
            continue;
        };
        let moved = (before.phase != after.phase || before.reason != after.reason)
            .then(|| moved_event(&r, &after, ctx.leadership.identity()));
        if before.phase != after.phase {
            info!(rollout = name, phase = %after.phase, reason = %after.reason, "rollout moved");
        }
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let write = api.patch_status(name, &params, &patch);
        match tokio::time::timeout(ctx.settings.host_call_timeout, write).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                warn!(rollout = name, error = %e, "writing the rollout's status failed");
                continue;
            }
            Err(_) => {
                warn!(rollout = name, "writing the rollout's status timed out");
                continue;
            }
        }
        if let Some(event) = moved {
            record(ctx, name, event).await;
        }
    }
}

/// The Event for a rollout that moved to `after`'s phase (or, Progressing, to its next
/// wave), for `kubectl describe fleetrollout` and `kubectl get events`.
fn moved_event(r: &FleetRollout, after: &FleetRolloutStatus, reporter: &str) -> Event {
    let about = About {
        kind: "FleetRollout",
        name: r.metadata.name.as_deref().unwrap_or_default(),
        uid: r.metadata.uid.as_deref(),
    };
    let message = match after.reason.is_empty() {
        true => after.phase.clone(),
        false => format!("{}: {}", after.phase, after.reason),
    };
    let warning = matches!(after.phase.as_str(), "Halted" | "Blocked");
    event_on(&about, &after.phase, &message, warning, reporter)
}

/// Records `event`; a failure is logged and not retried (the status says the same).
async fn record(ctx: &Context, rollout: &str, event: Event) {
    let what = format!("an event of rollout {rollout}");
    if let Err(e) = crate::context::events::create(ctx, event, &what).await {
        warn!(rollout, error = %e, "recording the rollout's event failed");
    }
}

/// The leader's loop: a pass every [`TICK`] while this replica leads.
pub async fn run(ctx: Context) {
    // The address was checked when Kairship started (`kairship run --alerts-url`).
    let reader = ctx.settings.alerts_url.as_deref().and_then(|url| {
        Reader::new(url, ctx.settings.host_call_timeout)
            .map_err(|e| warn!(error = %e, "rollouts will not read alerts"))
            .ok()
    });
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if ctx.leadership.is_leader() {
            pass_all(&ctx, reader.as_ref()).await;
        }
    }
}
