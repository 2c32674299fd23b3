//! The leader's hibernation passes: every [`TICK`] each managed instance is judged
//! ([`next_step`], from `decide`) and, where it should move, one task moves it a step
//! ([`hibernate`], [`wake`]); each step is safe to repeat, so a lost leader or a failed
//! call leaves the next pass to finish it.
//!
//! Asleep: `status.hibernation.state` leaves `Awake` first, so the manager stops the
//! instance's actor on every replica; then karmada-operator is told to keep out
//! (`spec.suspend: true`), the components go to zero (controllers first, the apiserver
//! last, etcd only when its data has a volume claim), and the phase becomes `Hibernated`.
//! Awake: etcd and the apiserver come back first, the operator is resumed (it brings the
//! rest back from its spec, waiting for each), and once every component runs what it ran
//! before the state is `Awake` again and the actor starts.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use parking_lot::Mutex;
use serde_json::json;
use tracing::{info, warn, Instrument};

use super::decide::{decide, Inputs};
use super::scale::{etcd_persistent, karmada_of, write_status, Host};
use crate::context::Context;
use crate::crd::{HibernationState, HibernationStatus, Instance, Phase};
use crate::host::error::HostError;

pub const TICK: Duration = Duration::from_secs(1);

/// Instances moved at once: a schedule putting a thousand instances to sleep at 20:00
/// must not open a thousand tasks of host calls.
const AT_ONCE: usize = 16;

/// A wake not finished by the operator after this long is finished by Kairship: it
/// scales the components it recorded back itself.
const OPERATOR_GRACE: SignedDuration = SignedDuration::from_secs(60);

/// Set (to an RFC 3339 time) by a request that found the instance asleep.
pub const WAKE_REQUEST_ANNOTATION: &str = "kairship.io/wakeRequestedAt";
/// Set by `kairship ctl instances hibernate|wake`: `hibernate <time>` or `wake <time>`.
pub const COMMAND_ANNOTATION: &str = "kairship.io/hibernationCommand";

/// Where an instance should move next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Hibernate {
        reason: String,
    },
    Wake {
        reason: String,
    },
    /// It should sleep but cannot yet; the reason is shown in its status.
    Wait {
        reason: String,
    },
}

/// Runs the passes until the process stops; only the leader acts.
pub async fn run(ctx: Context) {
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let slots = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !ctx.leadership.is_leader() {
            continue;
        }
        let now = Timestamp::now();
        for instance in ctx.instances.store().state() {
            let name = instance.name_any();
            let rollout = ctx
                .rollouts
                .active_for(&name)
                .map(|(r, e)| format!("FleetRollout {} ({})", r.name_any(), e.step));
            let Some(step) = next_step(&instance, rollout, now) else {
                continue;
            };
            if !busy.lock().insert(name.clone()) {
                continue;
            }
            let (ctx, busy, slots) = (ctx.clone(), busy.clone(), slots.clone());
            let span = tracing::info_span!("hibernation", instance = %name);
            tokio::spawn(
                async move {
                    if let Ok(_slot) = slots.acquire().await {
                        if let Err(e) = act(&ctx, &instance, step).await {
                            warn!(error = %e, "hibernation step failed; the next pass retries it");
                        }
                    }
                    busy.lock().remove(&name);
                }
                .instrument(span),
            );
        }
    }
}

fn hibernation(instance: &Instance) -> HibernationStatus {
    instance
        .status
        .as_ref()
        .and_then(|s| s.hibernation.clone())
        .unwrap_or_default()
}

fn annotation(instance: &Instance, key: &str) -> Option<String> {
    instance.annotations().get(key).cloned()
}

fn time(s: Option<&str>) -> Option<Timestamp> {
    s.and_then(|s| s.parse().ok())
}

/// What a managed instance should do now (`None`: nothing), from its spec, status,
/// annotations and a rollout that holds it (`rollout`).
pub fn next_step(instance: &Instance, rollout: Option<String>, now: Timestamp) -> Option<Step> {
    // Kairship runs no External instance's control plane: there is nothing to scale.
    if instance.metadata.deletion_timestamp.is_some()
        || instance.spec.paused
        || instance.spec.mode != crate::crd::InstanceMode::Managed
    {
        return None;
    }
    let h = hibernation(instance);
    match h.state {
        HibernationState::Hibernating => {
            return Some(Step::Hibernate { reason: h.reason });
        }
        HibernationState::Waking => return Some(Step::Wake { reason: h.reason }),
        _ => {}
    }
    let status = instance.status.as_ref();
    let command = annotation(instance, COMMAND_ANNOTATION).and_then(|c| {
        let (verb, at) = c.split_once(' ')?;
        Some((time(Some(at))?, verb == "hibernate"))
    });
    // Nothing to judge for an instance nobody asked to sleep.
    if instance.spec.hibernation.is_none() && command.is_none() && !h.state.asleep() {
        return None;
    }
    let spec = instance.spec.hibernation.clone().unwrap_or_default();
    let schedules = spec.schedules().unwrap_or_default();
    let awake_since = match h.state {
        HibernationState::Awake => time(h.since.as_deref()),
        _ => None,
    };
    let created = instance.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let wake_request = time(annotation(instance, WAKE_REQUEST_ANNOTATION).as_deref());
    let wake_command = command
        .filter(|(_, hibernate)| !hibernate)
        .map(|(at, _)| at);
    // Idleness counts from the last sign of use: a request, a wake, its creation.
    let last_activity = [
        time(status.and_then(|s| s.last_request_time.as_deref())),
        awake_since,
        wake_request,
        wake_command,
        created,
    ]
    .into_iter()
    .flatten()
    .max();
    let inputs = Inputs {
        last_activity,
        last_wake_request: wake_request,
        last_command: command,
        in_flight: rollout.into_iter().collect(),
    };
    let idle = spec
        .idle_after_minutes
        .map(|m| SignedDuration::from_mins(i64::from(m)));
    let verdict = decide(&schedules, idle, &inputs, now);
    let reason = verdict.reason.to_string();
    match (h.state, verdict.asleep) {
        (HibernationState::Awake, true) => {
            let phase = status.map(|s| s.phase).unwrap_or_default();
            match phase {
                Phase::Running | Phase::Degraded => Some(Step::Hibernate { reason }),
                other => Some(Step::Wait {
                    reason: format!("{reason}; waits for the instance to run (phase {other:?})"),
                }),
            }
        }
        (HibernationState::Hibernated, false) => Some(Step::Wake { reason }),
        // A write of its stopping actor landed after the leader's: said again.
        (HibernationState::Hibernated, true)
            if status.is_some_and(|s| s.phase != Phase::Hibernated) =>
        {
            Some(Step::Hibernate {
                reason: h.reason.clone(),
            })
        }
        (HibernationState::Awake, false) if !verdict.waiting_for.is_empty() => {
            let waiting = format!(
                "{reason}; sleep waits for {}",
                verdict.waiting_for.join(", ")
            );
            (h.reason != waiting).then_some(Step::Wait { reason: waiting })
        }
        _ => None,
    }
    .filter(|s| !matches!(s, Step::Wait { reason } if *reason == h.reason))
}

async fn act(ctx: &Context, instance: &Instance, step: Step) -> Result<(), HostError> {
    let name = instance.name_any();
    match step {
        Step::Wait { reason } => {
            write_status(ctx, &name, json!({"hibernation": {"reason": reason}})).await
        }
        Step::Hibernate { reason } => hibernate(ctx, instance, &name, reason).await,
        Step::Wake { reason } => wake(ctx, instance, &name, reason).await,
    }
}

fn now() -> String {
    Timestamp::now().to_string()
}

fn seconds_since(since: Option<&str>) -> f64 {
    time(since).map_or(0.0, |t| {
        Timestamp::now().duration_since(t).as_secs_f64().max(0.0)
    })
}

/// A backup of the instance in progress, by name.
async fn backup_running(ctx: &Context, name: &str) -> Result<Option<String>, HostError> {
    let records = ctx
        .settings
        .backup_store(&ctx.host)
        .list(name)
        .await
        .map_err(|e| HostError::Secret(format!("listing the backups of {name}: {e}")))?;
    let now = Timestamp::now();
    Ok(records
        .into_iter()
        .map(|r| r.as_seen(now))
        .find(|r| r.phase == crate::backups::record::Phase::Running)
        .map(|r| r.name))
}

async fn hibernate(
    ctx: &Context,
    instance: &Instance,
    name: &str,
    reason: String,
) -> Result<(), HostError> {
    let Some((ns, karmada)) = karmada_of(ctx, instance) else {
        return Ok(());
    };
    let mut h = hibernation(instance);
    if h.state == HibernationState::Hibernated {
        return write_status(ctx, name, asleep_status(&h)).await;
    }
    if h.state == HibernationState::Awake {
        if let Some(backup) = backup_running(ctx, name).await? {
            let reason = format!("{reason}; sleep waits for backup {backup}");
            if h.reason == reason {
                return Ok(());
            }
            return write_status(ctx, name, json!({"hibernation": {"reason": reason}})).await;
        }
        info!(%reason, "hibernating");
        h.state = HibernationState::Hibernating;
        h.reason = reason;
        h.since = Some(now());
        // The manager stops the actor on every replica once it reads this.
        write_status(ctx, name, json!({ "hibernation": h })).await?;
    }
    let host = Host::new(ctx, ns, karmada);
    let spec = host.suspend(true).await?;
    let keep_etcd = !etcd_persistent(&spec);
    let mut components = host.components().await?;
    // Controllers first, etcd last: each goes after what depends on it.
    components.sort_by_key(|c| (c.is_etcd(), c.is_apiserver()));
    for c in &components {
        if c.replicas == 0 || (c.is_etcd() && keep_etcd) {
            continue;
        }
        host.scale(c, 0, Some(Some(c.before.unwrap_or(c.replicas))))
            .await?;
    }
    let etcd = match keep_etcd {
        true => "kept running: its data is in an emptyDir, which zero replicas would lose",
        false => "scaled to zero: its volume claim keeps the data",
    };
    h.state = HibernationState::Hibernated;
    h.last_hibernate_seconds = Some(seconds_since(h.since.as_deref()));
    h.since = Some(now());
    h.etcd = etcd.to_string();
    info!(seconds = h.last_hibernate_seconds, etcd, "hibernated");
    write_status(ctx, name, asleep_status(&h)).await
}

/// The status of a hibernated instance: its phase, why, and hibernation's record.
fn asleep_status(h: &HibernationStatus) -> serde_json::Value {
    let message = format!(
        "hibernated: {}; a request through Kairship wakes it",
        h.reason
    );
    let conditions = [
        condition("Ready", "False", "Hibernated", &message),
        condition("Hibernated", "True", "Hibernated", &message),
    ];
    json!({"phase": Phase::Hibernated, "conditions": conditions, "hibernation": h})
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> crate::crd::Condition {
    crate::crd::Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now(),
        observed_generation: None,
    }
}

async fn wake(
    ctx: &Context,
    instance: &Instance,
    name: &str,
    reason: String,
) -> Result<(), HostError> {
    let Some((ns, karmada)) = karmada_of(ctx, instance) else {
        return Ok(());
    };
    let mut h = hibernation(instance);
    if h.state != HibernationState::Waking {
        info!(%reason, "waking");
        h.hibernated_seconds += seconds_since(h.since.as_deref()) as i64;
        h.state = HibernationState::Waking;
        h.reason = reason;
        h.since = Some(now());
        write_status(ctx, name, json!({ "hibernation": h })).await?;
    }
    let host = Host::new(ctx, ns, karmada);
    let components = host.components().await?;
    // Without etcd and the apiserver nothing else starts, and the operator's own waits
    // for them are short: they come first.
    let late = time(h.since.as_deref())
        .is_some_and(|t| Timestamp::now().duration_since(t) >= OPERATOR_GRACE);
    for c in &components {
        if let Some(before) = c.before {
            if c.replicas < before && (c.is_etcd() || c.is_apiserver() || late) {
                host.scale(c, before, None).await?;
            }
        }
    }
    host.suspend(false).await?;
    let components = host.components().await?;
    if !components.iter().all(|c| c.restored()) {
        // The operator is still bringing them back; the next pass looks again.
        return Ok(());
    }
    for c in components.iter().filter(|c| c.before.is_some()) {
        host.scale(c, c.replicas, Some(None)).await?;
    }
    h.state = HibernationState::Awake;
    h.last_wake_seconds = Some(seconds_since(h.since.as_deref()));
    h.wakes += 1;
    h.since = Some(now());
    let message = format!("woken: {}", h.reason);
    info!(seconds = h.last_wake_seconds, "awake");
    // Pending until the actor, started by the manager now, reports what it finds.
    write_status(
        ctx,
        name,
        json!({
            "phase": Phase::Pending,
            "conditions": [condition("Hibernated", "False", "Woken", &message)],
            "hibernation": h,
        }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{HibernationSpec, InstanceSpec, InstanceStatus};

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn instance(
        spec: Option<HibernationSpec>,
        phase: Phase,
        state: Option<HibernationState>,
        annotations: &[(&str, &str)],
    ) -> Instance {
        let mut i = Instance::new(
            "a",
            InstanceSpec {
                mode: crate::crd::InstanceMode::Managed,
                hibernation: spec,
                ..serde_json::from_value(json!({})).expect("spec")
            },
        );
        i.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            ts("2026-11-30T08:00:00Z"),
        ));
        i.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        i.status = Some(InstanceStatus {
            phase,
            last_request_time: Some("2026-11-30T09:00:00Z".into()),
            hibernation: state.map(|state| HibernationStatus {
                state,
                since: Some("2026-11-30T09:30:00Z".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        i
    }

    fn idle(minutes: u32) -> Option<HibernationSpec> {
        Some(HibernationSpec {
            idle_after_minutes: Some(minutes),
            ..Default::default()
        })
    }

    #[test]
    fn an_instance_nobody_asked_to_sleep_is_left_alone() {
        let i = instance(None, Phase::Running, None, &[]);
        assert_eq!(next_step(&i, None, ts("2026-12-30T00:00:00Z")), None);
    }

    #[test]
    fn idleness_puts_a_running_instance_to_sleep_and_a_request_wakes_it() {
        let i = instance(idle(60), Phase::Running, None, &[]);
        assert_eq!(next_step(&i, None, ts("2026-11-30T09:59:00Z")), None);
        let step = next_step(&i, None, ts("2026-11-30T10:00:00Z"));
        assert!(matches!(step, Some(Step::Hibernate { .. })), "{step:?}");
        let asleep = instance(
            idle(60),
            Phase::Hibernated,
            Some(HibernationState::Hibernated),
            &[],
        );
        assert_eq!(next_step(&asleep, None, ts("2026-11-30T12:00:00Z")), None);
        let asked = instance(
            idle(60),
            Phase::Hibernated,
            Some(HibernationState::Hibernated),
            &[(WAKE_REQUEST_ANNOTATION, "2026-11-30T11:00:00Z")],
        );
        let step = next_step(&asked, None, ts("2026-11-30T11:00:01Z"));
        assert!(matches!(step, Some(Step::Wake { .. })), "{step:?}");
        // Woken at 11:00 by that request: idle again an hour after it, not before.
        let mut woken = asked.clone();
        if let Some(h) = woken.status.as_mut().and_then(|s| s.hibernation.as_mut()) {
            h.state = HibernationState::Awake;
            h.since = Some("2026-11-30T11:00:05Z".into());
        }
        if let Some(s) = woken.status.as_mut() {
            s.phase = Phase::Running;
        }
        assert_eq!(next_step(&woken, None, ts("2026-11-30T11:59:00Z")), None);
        let step = next_step(&woken, None, ts("2026-11-30T12:00:05Z"));
        assert!(matches!(step, Some(Step::Hibernate { .. })), "{step:?}");
    }

    #[test]
    fn a_command_hibernates_and_wakes_without_a_spec() {
        let i = instance(
            None,
            Phase::Running,
            None,
            &[(COMMAND_ANNOTATION, "hibernate 2026-11-30T10:00:00Z")],
        );
        let step = next_step(&i, None, ts("2026-11-30T10:00:01Z"));
        assert!(matches!(step, Some(Step::Hibernate { .. })), "{step:?}");
        let woken = instance(
            None,
            Phase::Hibernated,
            Some(HibernationState::Hibernated),
            &[(COMMAND_ANNOTATION, "wake 2026-11-30T11:00:00Z")],
        );
        let step = next_step(&woken, None, ts("2026-11-30T11:00:01Z"));
        assert!(matches!(step, Some(Step::Wake { .. })), "{step:?}");
    }

    #[test]
    fn a_rollout_or_a_phase_other_than_running_holds_sleep_off() {
        let i = instance(idle(60), Phase::Running, None, &[]);
        let step = next_step(
            &i,
            Some("FleetRollout r (Upgrading)".into()),
            ts("2026-11-30T11:00:00Z"),
        );
        assert!(
            matches!(&step, Some(Step::Wait { reason }) if reason.contains("FleetRollout r")),
            "{step:?}"
        );
        let pending = instance(idle(60), Phase::Upgrading, None, &[]);
        let step = next_step(&pending, None, ts("2026-11-30T11:00:00Z"));
        assert!(
            matches!(&step, Some(Step::Wait { reason }) if reason.contains("Upgrading")),
            "{step:?}"
        );
    }

    #[test]
    fn a_hibernated_instance_whose_phase_was_overwritten_is_said_hibernated_again() {
        let i = instance(
            None,
            Phase::Running,
            Some(HibernationState::Hibernated),
            &[(COMMAND_ANNOTATION, "hibernate 2026-11-30T10:00:00Z")],
        );
        let step = next_step(&i, None, ts("2026-11-30T11:00:00Z"));
        assert!(matches!(step, Some(Step::Hibernate { .. })), "{step:?}");
        let settled = instance(
            None,
            Phase::Hibernated,
            Some(HibernationState::Hibernated),
            &[(COMMAND_ANNOTATION, "hibernate 2026-11-30T10:00:00Z")],
        );
        assert_eq!(next_step(&settled, None, ts("2026-11-30T11:00:00Z")), None);
    }

    #[test]
    fn a_status_with_only_a_waiting_reason_reads_as_awake() {
        let h: HibernationStatus =
            serde_json::from_value(json!({"reason": "sleep waits for backup b"})).expect("reads");
        assert_eq!(h.state, HibernationState::Awake);
    }

    #[test]
    fn a_step_half_done_is_taken_up_again() {
        for (state, hibernate) in [
            (HibernationState::Hibernating, true),
            (HibernationState::Waking, false),
        ] {
            let i = instance(None, Phase::Running, Some(state), &[]);
            let step = next_step(&i, None, ts("2026-11-30T11:00:00Z"));
            assert_eq!(matches!(step, Some(Step::Hibernate { .. })), hibernate);
            assert_eq!(matches!(step, Some(Step::Wake { .. })), !hibernate);
        }
    }
}
