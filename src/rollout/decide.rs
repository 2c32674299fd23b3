//! What a fleet rollout does next, as a pure function of its waves, its policy and what
//! Kairship sees of each instance now: which instances start, which have soaked long
//! enough to count as done, and whether the rollout halts (naming why). The executor
//! (backing up, changing, rolling back) acts on the answer; this decides alone, so its
//! rules are tested without a fleet:
//!
//! - waves go in order: no instance of a wave starts before every instance of the waves
//!   before it is done, and an instance is done only once it has stayed healthy for the
//!   soak time after its change;
//! - at most `max_unavailable` instances of a wave change at once;
//! - an instance starts only while its maintenance window is open (unless windows are
//!   ignored);
//! - the rollout halts at the first failure, at an instance changing for longer than the
//!   progress deadline, or at one that turns unhealthy (or has an alert firing) while it
//!   soaks; nothing starts after a halt, and the failed instance is the executor's to roll
//!   back;
//! - a hold (a fleet-wide alert firing, alerts that cannot be read) stops instances from
//!   starting or finishing while it lasts, without failing any.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

/// Where one instance is in the rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Pending,
    /// Its backup is being taken.
    BackingUp {
        since: Timestamp,
    },
    /// The change is being applied (karmada-operator reconciling it).
    Upgrading {
        since: Timestamp,
    },
    /// Changed; healthy since `since`, done once it has soaked.
    Soaking {
        since: Timestamp,
    },
    Done,
    Failed {
        reason: String,
    },
    RolledBack {
        reason: String,
    },
}

impl Step {
    fn changing_since(&self) -> Option<Timestamp> {
        match self {
            Step::BackingUp { since } | Step::Upgrading { since } => Some(*since),
            _ => None,
        }
    }
}

/// What Kairship sees of one instance now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub step: Step,
    /// Why it is not healthy (not Running, a component failing); `None` when it is.
    pub trouble: Option<String>,
    /// A component that has not been able to run for a while (an image that does not
    /// pull, a crash loop): an upgrade showing it fails without waiting for its deadline.
    pub broken: Option<String>,
    /// Its maintenance window is open now (or it has none).
    pub window_open: bool,
    /// An alert the rollout halts on, firing for it (`super::alerts`).
    pub alert: Option<String>,
}

/// How the rollout may proceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub max_unavailable: usize,
    pub soak: SignedDuration,
    pub progress_deadline: SignedDuration,
    pub ignore_windows: bool,
    pub paused: bool,
    pub aborted: bool,
    /// Why nothing may start or finish now (a fleet-wide alert firing, alerts that cannot
    /// be read); it lifts by itself.
    pub hold: Option<String>,
}

/// Where the rollout as a whole is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Wave `wave` (from 0) is under way.
    Progressing {
        wave: usize,
    },
    Paused {
        wave: usize,
    },
    Halted {
        reason: String,
    },
    Aborted,
    Completed,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub phase: Phase,
    /// Instances to start changing (back up first), in order.
    pub start: Vec<String>,
    /// Instances that have soaked: done.
    pub finish: Vec<String>,
    /// An instance to mark failed (and roll back), with why: a deadline passed, or it
    /// turned unhealthy while soaking.
    pub fail: Option<(String, String)>,
}

/// The decision for `waves` under `policy`, given what is `seen` of each instance at `now`
/// (an instance not seen counts as pending and unhealthy).
pub fn decide(
    waves: &[Vec<String>],
    policy: &Policy,
    seen: &BTreeMap<String, Seen>,
    now: Timestamp,
) -> Decision {
    let pending = Seen {
        step: Step::Pending,
        trouble: Some("Kairship does not see it".into()),
        broken: None,
        window_open: false,
        alert: None,
    };
    let of = |n: &String| seen.get(n).unwrap_or(&pending);
    let mut d = Decision {
        phase: Phase::Completed,
        start: Vec::new(),
        finish: Vec::new(),
        fail: None,
    };
    if policy.aborted {
        d.phase = Phase::Aborted;
        return d;
    }
    let all = || waves.iter().flatten();
    // A failure already recorded halts everything.
    if let Some((n, reason)) = all().find_map(|n| match &of(n).step {
        Step::Failed { reason } | Step::RolledBack { reason } => Some((n, reason)),
        _ => None,
    }) {
        d.phase = Phase::Halted {
            reason: format!("instance {n:?} failed: {reason}"),
        };
        return d;
    }
    // New failures: a change past its deadline, a soaking instance turned unhealthy.
    for n in all() {
        let s = of(n);
        let late = s
            .step
            .changing_since()
            .is_some_and(|t| now.duration_since(t) > policy.progress_deadline);
        let why = match (&s.step, late) {
            (_, true) => Some(format!(
                "it has been changing for longer than the progress deadline ({:?})",
                policy.progress_deadline
            )),
            (Step::Upgrading { .. }, _) if s.broken.is_some() => Some(format!(
                "its change cannot run: {}",
                s.broken.as_deref().unwrap_or_default()
            )),
            (Step::Soaking { .. }, _) if s.trouble.is_some() => Some(format!(
                "it turned unhealthy while soaking after its change: {}",
                s.trouble.as_deref().unwrap_or_default()
            )),
            (Step::Soaking { .. }, _) if s.alert.is_some() => Some(format!(
                "while it soaked after its change, {}",
                s.alert.as_deref().unwrap_or_default()
            )),
            _ => None,
        };
        if let Some(why) = why {
            d.phase = Phase::Halted {
                reason: format!("instance {n:?} failed: {why}"),
            };
            d.fail = Some((n.clone(), why));
            return d;
        }
    }
    // Soaked long enough: done.
    let done = |n: &String| match &of(n).step {
        Step::Done => true,
        Step::Soaking { since } => now.duration_since(*since) >= policy.soak,
        _ => false,
    };
    d.finish = all()
        .filter(|n| matches!(of(n).step, Step::Soaking { .. }) && done(n))
        .cloned()
        .collect();
    let Some((wave, members)) = waves.iter().enumerate().find(|(_, w)| !w.iter().all(&done)) else {
        return d;
    };
    if let Some(reason) = &policy.hold {
        d.finish.clear();
        d.phase = Phase::Halted {
            reason: reason.clone(),
        };
        return d;
    }
    if policy.paused {
        d.phase = Phase::Paused { wave };
        return d;
    }
    d.phase = Phase::Progressing { wave };
    let changing = members
        .iter()
        .filter(|n| of(n).step.changing_since().is_some())
        .count();
    let free = policy.max_unavailable.max(1).saturating_sub(changing);
    d.start = members
        .iter()
        .filter(|n| of(n).step == Step::Pending)
        .filter(|n| policy.ignore_windows || of(n).window_open)
        .take(free)
        .cloned()
        .collect();
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    fn policy(max_unavailable: usize) -> Policy {
        Policy {
            max_unavailable,
            soak: SignedDuration::from_secs(60),
            progress_deadline: SignedDuration::from_secs(600),
            ignore_windows: false,
            paused: false,
            aborted: false,
            hold: None,
        }
    }

    fn seen(step: Step) -> Seen {
        Seen {
            step,
            trouble: None,
            broken: None,
            window_open: true,
            alert: None,
        }
    }

    fn waves() -> Vec<Vec<String>> {
        vec![vec!["a".into()], vec!["b".into(), "c".into(), "d".into()]]
    }

    /// Every instance of `waves` seen pending, healthy, its window open.
    fn all_pending(waves: &[Vec<String>]) -> BTreeMap<String, Seen> {
        waves
            .iter()
            .flatten()
            .map(|n| (n.clone(), seen(Step::Pending)))
            .collect()
    }

    #[test]
    fn the_canary_soaks_before_the_next_wave_starts() {
        let mut s = all_pending(&waves());
        assert!(
            decide(&waves(), &policy(2), &BTreeMap::new(), t(0))
                .start
                .is_empty(),
            "an instance not seen yet does not start"
        );
        let d = decide(&waves(), &policy(2), &s, t(0));
        assert_eq!(
            (d.phase.clone(), d.start.clone()),
            (Phase::Progressing { wave: 0 }, vec!["a".to_string()])
        );
        s.insert("a".into(), seen(Step::Soaking { since: t(10) }));
        let d = decide(&waves(), &policy(2), &s, t(30));
        assert!(
            d.start.is_empty() && d.finish.is_empty(),
            "still soaking: {d:?}"
        );
        let d = decide(&waves(), &policy(2), &s, t(70));
        assert_eq!(d.finish, ["a"]);
        assert_eq!(d.start, ["b", "c"], "two at a time");
        assert_eq!(d.phase, Phase::Progressing { wave: 1 });
    }

    #[test]
    fn windows_hold_and_halts_name_their_reason() {
        let mut s: BTreeMap<String, Seen> = BTreeMap::new();
        s.insert(
            "a".into(),
            Seen {
                window_open: false,
                ..seen(Step::Pending)
            },
        );
        assert!(decide(&waves(), &policy(1), &s, t(0)).start.is_empty());
        let ignore = Policy {
            ignore_windows: true,
            ..policy(1)
        };
        assert_eq!(decide(&waves(), &ignore, &s, t(0)).start, ["a"]);
        // Past the deadline.
        s.insert("a".into(), seen(Step::Upgrading { since: t(0) }));
        let d = decide(&waves(), &policy(1), &s, t(601));
        assert_eq!(d.fail.as_ref().map(|f| f.0.as_str()), Some("a"));
        assert!(
            matches!(&d.phase, Phase::Halted { reason } if reason.contains("progress deadline"))
        );
        // A component that cannot run fails an upgrade well before its deadline; one
        // that is only unhealthy (still starting) does not.
        s.insert(
            "a".into(),
            Seen {
                trouble: Some("it is Upgrading".into()),
                ..seen(Step::Upgrading { since: t(0) })
            },
        );
        assert!(decide(&waves(), &policy(1), &s, t(120)).fail.is_none());
        s.insert(
            "a".into(),
            Seen {
                broken: Some("component karmada-scheduler: ImagePullBackOff".into()),
                ..seen(Step::Upgrading { since: t(0) })
            },
        );
        let d = decide(&waves(), &policy(1), &s, t(120));
        assert!(
            matches!(&d.phase, Phase::Halted { reason } if reason.contains("cannot run: component karmada-scheduler: ImagePullBackOff")),
            "{d:?}"
        );
        // Unhealthy while soaking.
        s.insert(
            "a".into(),
            Seen {
                trouble: Some("Degraded".into()),
                ..seen(Step::Soaking { since: t(0) })
            },
        );
        let d = decide(&waves(), &policy(1), &s, t(10));
        assert!(matches!(&d.phase, Phase::Halted { reason } if reason.contains("unhealthy")));
        // A recorded failure halts for good; pause and abort hold everything.
        s.insert(
            "a".into(),
            seen(Step::Failed {
                reason: "image pull".into(),
            }),
        );
        let d = decide(&waves(), &policy(1), &s, t(10));
        assert!(d.start.is_empty() && matches!(d.phase, Phase::Halted { .. }));
        let paused = Policy {
            paused: true,
            ..policy(1)
        };
        assert_eq!(
            decide(&waves(), &paused, &BTreeMap::new(), t(0)).phase,
            Phase::Paused { wave: 0 }
        );
        let aborted = Policy {
            aborted: true,
            ..policy(1)
        };
        assert_eq!(
            decide(&waves(), &aborted, &BTreeMap::new(), t(0)).phase,
            Phase::Aborted
        );
    }

    #[test]
    fn an_alert_fails_a_soaking_instance_and_a_hold_stops_the_rest() {
        let alerted = |step| Seen {
            alert: Some("alert TeamAlert is firing: a is slow".into()),
            ..seen(step)
        };
        // Before its change, an alert does not fail it (the change is not its cause yet).
        let mut s = all_pending(&waves());
        s.insert("a".into(), alerted(Step::Upgrading { since: t(0) }));
        assert!(decide(&waves(), &policy(1), &s, t(10)).fail.is_none());
        s.insert("a".into(), alerted(Step::Soaking { since: t(0) }));
        let d = decide(&waves(), &policy(1), &s, t(10));
        assert_eq!(
            d.fail,
            Some((
                "a".to_string(),
                "while it soaked after its change, alert TeamAlert is firing: a is slow".into()
            ))
        );
        assert!(matches!(&d.phase, Phase::Halted { reason } if reason.contains("TeamAlert")));
        // A hold: the soaked canary is not counted done and the next wave does not start;
        // no instance fails, and the hold lifts by itself.
        s.insert("a".into(), seen(Step::Soaking { since: t(0) }));
        let held = Policy {
            hold: Some("held while alert KairshipAPIErrors is firing".into()),
            ..policy(2)
        };
        let d = decide(&waves(), &held, &s, t(120));
        assert!(
            d.start.is_empty() && d.finish.is_empty() && d.fail.is_none(),
            "{d:?}"
        );
        assert!(
            matches!(&d.phase, Phase::Halted { reason } if reason.contains("KairshipAPIErrors"))
        );
        let d = decide(&waves(), &policy(2), &s, t(120));
        assert_eq!(
            (d.finish, d.start),
            (vec!["a".to_string()], vec!["b".to_string(), "c".into()])
        );
    }

    /// A small deterministic generator, so the property runs are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % below.max(1)
        }
    }

    /// Properties over many simulated rollouts: no instance of a later wave starts before
    /// every instance of the earlier waves is done (soaked), `max_unavailable` is never
    /// exceeded, and a rollout whose instances all succeed completes.
    #[test]
    fn waves_stay_ordered_and_bounded() {
        for seed in 1..400u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let total = 1 + rng.next(12) as usize;
            let names: Vec<String> = (0..total).map(|i| format!("i{i:02}")).collect();
            let strategy = super::super::plan::Strategy::Progressive {
                canary: rng.next(3) as usize,
                percentages: vec![34, 67, 100],
            };
            let waves = super::super::plan::waves(&names, &strategy).expect("waves");
            let p = policy(1 + rng.next(3) as usize);
            let mut s = all_pending(&waves);
            let mut now = t(0);
            let mut completed = false;
            for _ in 0..2_000 {
                let d = decide(&waves, &p, &s, now);
                for n in &d.finish {
                    s.insert(n.clone(), seen(Step::Done));
                }
                if d.phase == Phase::Completed {
                    completed = true;
                    break;
                }
                for n in &d.start {
                    let wave = waves.iter().position(|w| w.contains(n)).expect("a wave");
                    for earlier in waves[..wave].iter().flatten() {
                        assert_eq!(
                            s.get(earlier).map(|x| &x.step),
                            Some(&Step::Done),
                            "seed {seed}: {n} (wave {wave}) started before {earlier} was done"
                        );
                    }
                    s.insert(n.clone(), seen(Step::BackingUp { since: now }));
                }
                let changing = s
                    .values()
                    .filter(|x| x.step.changing_since().is_some())
                    .count();
                assert!(
                    changing <= p.max_unavailable,
                    "seed {seed}: {changing} changing at once"
                );
                // Time passes; each changing instance moves on at its own pace.
                now = now
                    .checked_add(SignedDuration::from_secs(5 + rng.next(20) as i64))
                    .expect("time");
                for x in s.values_mut() {
                    x.step = match &x.step {
                        Step::BackingUp { .. } if rng.next(2) == 0 => {
                            Step::Upgrading { since: now }
                        }
                        Step::Upgrading { .. } if rng.next(3) == 0 => Step::Soaking { since: now },
                        other => other.clone(),
                    };
                }
            }
            assert!(
                completed,
                "seed {seed}: the rollout of {total} never completed"
            );
        }
    }
}
