//! A `FleetRollout`'s engine as pure functions of what it reads, so every transition is
//! tested without a fleet:
//!
//! - [`pass`]: the rollout as a whole, from its spec and status and the instances it
//!   selects: its waves (planned once, blocked by blocking findings unless forced), then
//!   what [`decide`](super::decide::decide) says (instances to start, soaked ones done,
//!   one failed) written back as the next status;
//! - [`advance`]: one instance's own work in its step: its backup, its new release, its
//!   soak, or its rollback after a failure.
//!
//! The engine that calls them writes what they return: the next status (the leader), and
//! for an instance its backup and the release in its spec (its controller).

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::decide::{self, Decision, Phase as Decided, Policy, Seen, Step};
use crate::cache::traffic::Counts;
use crate::crd::{FleetRolloutSpec, FleetRolloutStatus, Instance, InstanceRollout, Phase};

/// A rollout's waves, and each planned instance's blocking findings.
pub type Planned = (Vec<Vec<String>>, BTreeMap<String, Vec<String>>);

/// The step as the status spells it.
pub fn step_of(r: &InstanceRollout) -> Step {
    let since = r
        .since
        .as_deref()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let reason = r.reason.clone().unwrap_or_default();
    match r.step.as_str() {
        "BackingUp" => Step::BackingUp { since },
        "Upgrading" => Step::Upgrading { since },
        "Soaking" => Step::Soaking { since },
        "Done" => Step::Done,
        "Failed" => Step::Failed { reason },
        "RolledBack" => Step::RolledBack { reason },
        _ => Step::Pending,
    }
}

fn entry(step: &str, since: Timestamp, prior: Option<&InstanceRollout>) -> InstanceRollout {
    InstanceRollout {
        step: step.into(),
        since: Some(since.to_string()),
        ..prior.cloned().unwrap_or_default()
    }
}

/// Why `i` is not healthy enough to soak (not Running, or a component failing, each
/// with what its condition says); `None` when it is.
pub fn trouble(i: &Instance) -> Option<String> {
    let Some(s) = i.status.as_ref() else {
        return Some("it has no status yet".into());
    };
    let said = |kind: &str| {
        s.conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "False")
            .map(|c| c.message.clone())
    };
    if s.phase != Phase::Running {
        let why = said("Ready").map(|m| format!(": {m}")).unwrap_or_default();
        return Some(format!("it is {:?}{why}", s.phase));
    }
    said(crate::status::COMPONENTS_CONDITION)
        .map(|m| format!("a component is failing: {m}"))
        .or_else(|| {
            said(crate::status::GUARDRAILS_CONDITION)
                .map(|m| format!("its guardrails were not applied: {m}"))
        })
}

/// How long a component must have been failing before an upgrade showing it fails: a
/// new pod may crash once while its control plane restarts around it; an image that
/// does not pull or a crash loop is still there a minute later.
pub const COMPONENT_FAILING_FOR: SignedDuration = SignedDuration::from_secs(60);

/// The failing component `i` reports (its `ComponentsHealthy` condition False) if it has
/// been failing for [`COMPONENT_FAILING_FOR`] at `now`.
pub fn broken(i: &Instance, now: Timestamp) -> Option<String> {
    let c = i
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == crate::status::COMPONENTS_CONDITION)?;
    let since = c.last_transition_time.parse::<Timestamp>().ok()?;
    (c.status == "False" && now.duration_since(since) >= COMPONENT_FAILING_FOR)
        .then(|| c.message.clone())
}

/// The policy of `spec` for [`decide`](super::decide::decide).
pub fn policy(spec: &FleetRolloutSpec) -> Policy {
    Policy {
        max_unavailable: spec.max_unavailable.max(1) as usize,
        soak: SignedDuration::from_secs(i64::from(spec.soak_seconds)),
        progress_deadline: SignedDuration::from_secs(i64::from(spec.progress_deadline_seconds)),
        ignore_windows: spec.ignore_windows,
        paused: spec.paused,
        aborted: spec.aborted,
        hold: None,
    }
}

/// The rollout's next status after one pass at `now`, over the `fleet` as the Instance
/// cache shows it; `plan` gives the waves and each planned instance's blocking findings
/// (`api::grpc::rollout` answers it for a plan read by hand too); `alerts`, what
/// Prometheus said firing (`None`: Kairship reads no alerts).
pub fn pass(
    spec: &FleetRolloutSpec,
    status: &FleetRolloutStatus,
    fleet: &[Arc<Instance>],
    plan: impl Fn() -> Result<Planned, String>,
    alerts: Option<&super::alerts::Read>,
    now: Timestamp,
) -> FleetRolloutStatus {
    let mut next = status.clone();
    if next.waves.is_empty() {
        let (waves, blocking) = match plan() {
            Ok(p) => p,
            Err(why) => {
                next.phase = "Blocked".into();
                next.reason = format!("the rollout cannot be planned: {why}");
                return next;
            }
        };
        let blocked: Vec<String> = blocking
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(n, b)| format!("{n}: {}", b.join("; ")))
            .collect();
        if !blocked.is_empty() && !spec.force {
            next.phase = "Blocked".into();
            next.reason = format!(
                "{} instance(s) cannot take the change (force the rollout to leave them out): {}",
                blocked.len(),
                blocked.join(" | ")
            );
            return next;
        }
        // Forced: the blocked instances are left out of the waves.
        next.waves = waves
            .into_iter()
            .map(|w| {
                w.into_iter()
                    .filter(|n| blocking.get(n).is_none_or(|b| b.is_empty()))
                    .collect::<Vec<_>>()
            })
            .filter(|w: &Vec<String>| !w.is_empty())
            .collect();
        for n in next.waves.iter().flatten() {
            next.instances.entry(n.clone()).or_insert(InstanceRollout {
                step: "Pending".into(),
                ..Default::default()
            });
        }
    }
    let by_name: BTreeMap<&str, &Instance> = fleet
        .iter()
        .filter_map(|i| Some((i.metadata.name.as_deref()?, &**i)))
        .collect();
    let signals = super::alerts::signals(alerts, &spec.halt_on_alerts);
    let seen: BTreeMap<String, Seen> = next
        .instances
        .iter()
        .filter_map(|(n, r)| {
            let i = by_name.get(n.as_str())?;
            let window_open = match &i.spec.maintenance_window {
                None => true,
                Some(w) => w.window().is_ok_and(|w| w.is_open(now)),
            };
            Some((
                n.clone(),
                Seen {
                    step: step_of(r),
                    trouble: trouble(i),
                    broken: broken(i, now),
                    window_open,
                    alert: signals.instances.get(n).cloned(),
                },
            ))
        })
        .collect();
    let Decision {
        phase,
        start,
        finish,
        fail,
    } = decide::decide(
        &next.waves,
        &Policy {
            hold: signals.hold,
            ..policy(spec)
        },
        &seen,
        now,
    );
    for n in start {
        let from = by_name
            .get(n.as_str())
            .and_then(|i| i.status.as_ref()?.karmada_version.clone());
        let prior = next.instances.get(&n).cloned();
        let mut e = entry("BackingUp", now, prior.as_ref());
        e.from_version = from;
        next.instances.insert(n, e);
    }
    for n in finish {
        let prior = next.instances.get(&n).cloned();
        next.instances.insert(n, entry("Done", now, prior.as_ref()));
    }
    if let Some((n, why)) = fail {
        let prior = next.instances.get(&n).cloned();
        let mut e = entry("Failed", now, prior.as_ref());
        e.reason = Some(why);
        next.instances.insert(n, e);
    }
    (next.phase, next.reason) = match phase {
        Decided::Progressing { wave } => (
            "Progressing".into(),
            format!("wave {} of {}", wave + 1, next.waves.len()),
        ),
        Decided::Paused { wave } => (
            "Paused".into(),
            format!("paused at wave {} of {}", wave + 1, next.waves.len()),
        ),
        Decided::Halted { reason } => ("Halted".into(), reason),
        Decided::Aborted => ("Aborted".into(), "aborted".into()),
        Decided::Completed => ("Completed".into(), String::new()),
    };
    next
}

/// What an instance's own controller does now for its step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    Nothing,
    /// Take a backup of the instance first.
    Backup,
    /// Put the rollout's change into the instance's Karmada spec (a release, or its
    /// class's spec); karmada-operator carries it out.
    Change,
    /// Put back the Karmada spec it had before its change.
    Restore,
}

/// A backup's outcome, as the instance's controller reads its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupState {
    Running,
    Completed(String),
    Failed(String),
    /// Its progress stopped with the replica taking it (a restart, a moved instance):
    /// `tries` backups of this step ended so.
    Abandoned {
        why: String,
        tries: usize,
    },
}

/// Backups of one step abandoned by stopped replicas before the step fails: a restart
/// mid-backup takes it again, a replica that keeps dying does not hold the rollout.
pub const BACKUP_TRIES: usize = 3;

/// One instance's next entry (when it changes) and work, at `now`, for a rollout to the
/// release `target`: `instance` as the cache shows it, `backup` the backup its step
/// started, `in_spec` whether its Karmada spec already says what the step wants (the
/// change while it is Upgrading, what it had before once it Failed).
pub fn advance(
    r: &InstanceRollout,
    target: &str,
    instance: &Instance,
    backup: Option<&BackupState>,
    in_spec: bool,
    now: Timestamp,
) -> (Option<InstanceRollout>, Work) {
    let status = instance.status.as_ref();
    // Running at `v`, and reported for the spec as it is now (not the one before it).
    // Its guardrails, if it has any, reported for that spec too (applied or refused: a
    // refusal then fails its soak).
    let settled_at = |v: &str| {
        status.is_some_and(|s| {
            s.phase == Phase::Running
                && s.karmada_version.as_deref() == Some(v)
                && s.observed_generation == instance.metadata.generation
                && (instance.spec.guardrails.is_empty()
                    || s.conditions.iter().any(|c| {
                        c.type_ == crate::status::GUARDRAILS_CONDITION
                            && c.observed_generation == instance.metadata.generation
                    }))
        })
    };
    match (r.step.as_str(), backup) {
        ("BackingUp", None) => (None, Work::Backup),
        ("BackingUp", Some(BackupState::Running)) => (None, Work::Nothing),
        ("BackingUp", Some(BackupState::Completed(name))) => {
            let mut e = entry("Upgrading", now, Some(r));
            e.backup = Some(name.clone());
            (Some(e), Work::Change)
        }
        ("BackingUp", Some(BackupState::Failed(why))) => {
            let mut e = entry("Failed", now, Some(r));
            e.reason = Some(format!("its backup failed, so nothing was changed: {why}"));
            (Some(e), Work::Nothing)
        }
        ("BackingUp", Some(BackupState::Abandoned { tries, .. })) if *tries < BACKUP_TRIES => {
            (None, Work::Backup)
        }
        ("BackingUp", Some(BackupState::Abandoned { why, tries })) => {
            let mut e = entry("Failed", now, Some(r));
            e.reason = Some(format!(
                "its backup was abandoned {tries} times, so nothing was changed: {why}"
            ));
            (Some(e), Work::Nothing)
        }
        // Set again until the spec says so (idempotent; a restart may have come between).
        ("Upgrading", _) if !in_spec => (None, Work::Change),
        ("Upgrading", _) if settled_at(target) => {
            (Some(entry("Soaking", now, Some(r))), Work::Nothing)
        }
        // Nothing changed yet (its backup failed, or it never left BackingUp).
        ("Failed", _) if r.backup.is_none() => (None, Work::Nothing),
        ("Failed", _) if !in_spec => (None, Work::Restore),
        ("Failed", _) => match r.from_version.as_deref() {
            Some(from) if settled_at(from) => {
                let mut e = entry("RolledBack", now, Some(r));
                e.reason = r.reason.clone();
                (Some(e), Work::Nothing)
            }
            _ => (None, Work::Nothing),
        },
        _ => (None, Work::Nothing),
    }
}

/// Why an instance fails its soak on the requests Kairship's proxy answered for it since
/// the soak began (`traffic`): more than `max_percent` of at least `min_requests` failed
/// with a server error. `None` while that holds (or at 100%: never).
pub fn failed_share(traffic: Counts, max_percent: u32, min_requests: u32) -> Option<String> {
    let Counts { requests, failed } = traffic;
    if max_percent >= 100 || requests == 0 || requests < u64::from(min_requests) {
        return None;
    }
    (failed * 100 > u64::from(max_percent) * requests).then(|| {
        format!(
            "{failed} of the {requests} requests Kairship's proxy answered for it while it \
             soaked failed with a server error ({}%; the rollout allows {max_percent}%)",
            failed * 100 / requests
        )
    })
}

/// The entry of an instance that failed its soak for `why`: it is rolled back next.
pub fn soak_failed(r: &InstanceRollout, why: String, now: Timestamp) -> InstanceRollout {
    let mut e = entry("Failed", now, Some(r));
    e.reason = Some(why);
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{InstanceMode, InstanceSpec, InstanceStatus};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    fn instance(name: &str, version: &str, phase: Phase) -> Arc<Instance> {
        let mut i = Instance::new(
            name,
            InstanceSpec {
                mode: InstanceMode::Managed,
                ..serde_json::from_value(serde_json::json!({})).expect("spec")
            },
        );
        i.status = Some(InstanceStatus {
            phase,
            karmada_version: Some(version.into()),
            ..Default::default()
        });
        Arc::new(i)
    }

    fn spec() -> FleetRolloutSpec {
        serde_json::from_value(
            serde_json::json!({"karmadaVersion": "v1.18.2", "canary": 1, "soakSeconds": 60}),
        )
        .expect("spec")
    }

    fn plan(names: &[&str]) -> Result<Planned, String> {
        let w = super::super::plan::waves(
            &names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &super::super::plan::Strategy::Progressive {
                canary: 1,
                percentages: vec![100],
            },
        )
        .map_err(|e| e.to_string())?;
        Ok((w, BTreeMap::new()))
    }

    #[test]
    fn a_rollout_goes_from_canary_to_done() {
        let fleet = vec![
            instance("a", "v1.17.1", Phase::Running),
            instance("b", "v1.17.1", Phase::Running),
        ];
        let s0 = FleetRolloutStatus::default();
        let s1 = pass(&spec(), &s0, &fleet, || plan(&["a", "b"]), None, t(0));
        assert_eq!(s1.waves, [vec!["a".to_string()], vec!["b".to_string()]]);
        assert_eq!(s1.instances["a"].step, "BackingUp");
        assert_eq!(s1.instances["a"].from_version.as_deref(), Some("v1.17.1"));
        assert_eq!(s1.instances["b"].step, "Pending");
        assert_eq!(
            (s1.phase.as_str(), s1.reason.as_str()),
            ("Progressing", "wave 1 of 2")
        );
        // The canary's own controller: back up, then set the release, then soak.
        let a = &fleet[0];
        let (e, w) = advance(&s1.instances["a"], "v1.18.2", a, None, false, t(1));
        assert_eq!((e, w), (None, Work::Backup));
        let done = BackupState::Completed("a-backup".into());
        let (e, w) = advance(&s1.instances["a"], "v1.18.2", a, Some(&done), false, t(5));
        let upgrading = e.expect("upgrading");
        assert_eq!((upgrading.step.as_str(), w), ("Upgrading", Work::Change));
        let upgraded = instance("a", "v1.18.2", Phase::Running);
        // Changed in its spec but still reporting the old release: it waits.
        let (e, w) = advance(&upgrading, "v1.18.2", a, None, true, t(20));
        assert_eq!((e, w), (None, Work::Nothing));
        let (e, _) = advance(&upgrading, "v1.18.2", &upgraded, None, true, t(30));
        let soaking = e.expect("soaking");
        assert_eq!(soaking.step, "Soaking");
        let mut s2 = s1.clone();
        s2.instances.insert("a".into(), soaking);
        let fleet = vec![upgraded, fleet[1].clone()];
        let s3 = pass(&spec(), &s2, &fleet, || plan(&["a", "b"]), None, t(60));
        assert_eq!(s3.instances["b"].step, "Pending", "still soaking");
        let s4 = pass(&spec(), &s3, &fleet, || plan(&["a", "b"]), None, t(95));
        assert_eq!(s4.instances["a"].step, "Done");
        assert_eq!(
            s4.instances["b"].step, "BackingUp",
            "the next wave once the canary soaked"
        );
    }

    #[test]
    fn blocked_plans_wait_for_force_and_failures_roll_back() {
        let fleet = vec![
            instance("a", "v1.17.1", Phase::Running),
            instance("x", "v1.17.1", Phase::Running),
        ];
        let blocked = || {
            let (w, _) = plan(&["a", "x"])?;
            Ok((w, [("x".to_string(), vec!["External".to_string()])].into()))
        };
        let s = pass(
            &spec(),
            &FleetRolloutStatus::default(),
            &fleet,
            blocked,
            None,
            t(0),
        );
        assert_eq!(s.phase, "Blocked");
        assert!(s.reason.contains("x: External"), "{}", s.reason);
        let forced = FleetRolloutSpec {
            force: true,
            ..spec()
        };
        let s = pass(
            &forced,
            &FleetRolloutStatus::default(),
            &fleet,
            blocked,
            None,
            t(0),
        );
        assert_eq!(s.waves, [vec!["a".to_string()]], "x left out");
        // Upgrading past the deadline: failed, and its controller rolls it back.
        let mut s = s;
        s.instances.insert(
            "a".into(),
            InstanceRollout {
                step: "Upgrading".into(),
                since: Some(t(0).to_string()),
                from_version: Some("v1.17.1".into()),
                backup: Some("a-backup".into()),
                ..Default::default()
            },
        );
        let failed = pass(&spec(), &s, &fleet, || plan(&["a"]), None, t(1801));
        assert_eq!(failed.phase, "Halted");
        let a = &failed.instances["a"];
        assert_eq!(a.step, "Failed");
        let stuck = instance("a", "v1.18.2", Phase::Upgrading);
        let (e, w) = advance(a, "v1.18.2", &stuck, None, false, t(1802));
        assert_eq!((e, w), (None, Work::Restore));
        let back = instance("a", "v1.17.1", Phase::Running);
        let (e, _) = advance(a, "v1.18.2", &back, None, true, t(1900));
        assert_eq!(e.map(|e| e.step), Some("RolledBack".into()));
        // A failed backup changes nothing.
        let backing = InstanceRollout {
            step: "BackingUp".into(),
            ..Default::default()
        };
        let (e, w) = advance(
            &backing,
            "v1.18.2",
            &back,
            Some(&BackupState::Failed("full".into())),
            false,
            t(0),
        );
        assert_eq!(w, Work::Nothing);
        assert!(e
            .is_some_and(|e| e.step == "Failed"
                && e.reason.is_some_and(|r| r.contains("nothing was changed"))));
        // A backup abandoned by a stopped replica is taken again, up to BACKUP_TRIES.
        let after_abandoned = |tries| {
            let state = BackupState::Abandoned {
                why: "abandoned: no progress".into(),
                tries,
            };
            advance(&backing, "v1.18.2", &back, Some(&state), false, t(0))
        };
        for tries in 1..BACKUP_TRIES {
            assert_eq!(
                after_abandoned(tries),
                (None, Work::Backup),
                "after {tries} abandoned"
            );
        }
        let (e, w) = after_abandoned(BACKUP_TRIES);
        assert_eq!(w, Work::Nothing);
        assert!(e.is_some_and(
            |e| e.step == "Failed" && e.reason.is_some_and(|r| r.contains("abandoned 3 times"))
        ));
    }

    #[test]
    fn trouble_names_the_phase_or_the_failing_component() {
        use crate::crd::Condition;
        let cond = |kind: &str, message: &str| Condition {
            type_: kind.into(),
            status: "False".into(),
            reason: "x".into(),
            message: message.into(),
            last_transition_time: String::new(),
            observed_generation: None,
        };
        let ok = instance("a", "v1.18.2", Phase::Running);
        assert_eq!(trouble(&ok), None);
        let mut degraded = (*instance("a", "v1.18.2", Phase::Degraded)).clone();
        if let Some(s) = degraded.status.as_mut() {
            s.conditions = vec![cond("Ready", "the Cluster watch keeps failing")];
        }
        assert_eq!(
            trouble(&degraded).as_deref(),
            Some("it is Degraded: the Cluster watch keeps failing")
        );
        let mut failing = (*ok).clone();
        if let Some(s) = failing.status.as_mut() {
            s.conditions = vec![cond(
                "ComponentsHealthy",
                "karmada-scheduler: CrashLoopBackOff",
            )];
        }
        assert_eq!(
            trouble(&failing).as_deref(),
            Some("a component is failing: karmada-scheduler: CrashLoopBackOff")
        );
        // Broken only once it has been failing for a minute.
        if let Some(s) = failing.status.as_mut() {
            s.conditions[0].last_transition_time = t(0).to_string();
        }
        assert_eq!(broken(&failing, t(59)), None);
        assert_eq!(
            broken(&failing, t(60)).as_deref(),
            Some("karmada-scheduler: CrashLoopBackOff")
        );
        assert_eq!(broken(&ok, t(600)), None);
    }

    #[test]
    fn a_soak_fails_on_the_share_of_failed_requests_once_there_are_enough() {
        let c = |requests, failed| Counts { requests, failed };
        assert_eq!(failed_share(c(19, 19), 5, 20), None, "too few to judge");
        assert_eq!(failed_share(c(20, 1), 5, 20), None, "5% is allowed");
        let why = failed_share(c(20, 2), 5, 20).expect("10% fails");
        assert!(
            why.contains("2 of the 20 requests") && why.contains("(10%;"),
            "{why}"
        );
        assert_eq!(failed_share(c(100, 100), 100, 20), None, "100: never");
        assert!(failed_share(c(1, 1), 0, 0).is_some(), "0%: any failure");
        let soaking = InstanceRollout {
            step: "Soaking".into(),
            backup: Some("a-backup".into()),
            from_version: Some("v1.17.1".into()),
            ..Default::default()
        };
        let failed = soak_failed(&soaking, why, t(10));
        assert_eq!(failed.step, "Failed");
        let stuck = instance("a", "v1.18.2", Phase::Running);
        let (_, w) = advance(&failed, "v1.18.2", &stuck, None, false, t(11));
        assert_eq!(w, Work::Restore, "rolled back like any failure");
    }
}
