//! One instance's placement on one replica, as a pure state machine: what the manager does
//! when it sees the Instance (with the step the shard view gives it, `handoff::step`) and
//! when a record write it started returns. The manager carries out the effects
//! (`actors::manager::placement`); `simulation` runs many replicas of it against a model
//! host to check that an instance never runs on two replicas and always ends up on one.
//!
//! The rules that keep it safe: a replica writes the record only for itself (`Acquire`,
//! after the ring gave it the instance and no live replica holds it) or to clear its own
//! (`Release`, after its actor has stopped), one write at a time per instance; what it
//! sees while a write is in flight is decided once the write has returned, on the
//! Instance as it is then; and it runs an instance only on a record it wrote or confirmed
//! itself since it last stopped running it. A record naming it in its cache may be stale:
//! after it lost its Lease (a partition) another replica may have taken the instance while
//! its watch still shows the old record, so it first writes the record again,
//! conditionally on it still naming it, which fails if another replica took it.

use std::time::Duration;

use super::handoff::Step;

/// Who a record write names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// This replica (it takes the instance).
    Me,
    /// Nobody (this replica gives it up, its actor stopped first).
    Nobody,
}

/// Where one instance is on this replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Its actor may not run here. `failures`: record writes that failed in a row;
    /// `confirmed`: this replica's own write named it last, so a record naming it is
    /// current.
    Away { failures: u32, confirmed: bool },
    /// It is recorded ours and the ring agrees: its actor may run here (the manager's
    /// lifecycle decides whether it does: a paused or deleted instance runs nowhere).
    Here,
    /// A record write is in flight, decided on the Instance at version `from`; no actor
    /// runs here meanwhile.
    Writing {
        record: Record,
        from: Option<String>,
        failures: u32,
    },
}

impl Default for Placement {
    fn default() -> Self {
        Placement::Away {
            failures: 0,
            confirmed: false,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// The Instance is seen at `version` (its watch, or the live replicas changed) and the
    /// shard view gives this replica `step` for it.
    Seen {
        step: Step,
        version: Option<&'a str>,
    },
    /// The record write in flight returned; `latest` is the Instance's version now, as
    /// this replica's cache has it.
    Written { ok: bool, latest: Option<&'a str> },
}

/// What the manager does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Go on with the instance's lifecycle here (start its actor if it should run).
    Proceed,
    /// Stop its actor, if one runs here.
    Stop,
    /// Stop its actor and wait for it, then write the record, conditional on the record
    /// seen at `from`; the answer comes back as `Event::Written`.
    Write(Record),
    /// Decide again at once, on the Instance as the cache has it now.
    DecideAgain,
    /// Decide again after this long (a write failed and nothing has changed since).
    DecideAgainAfter(Duration),
}

/// The next placement and what to do, for `event` in `state`; `retry` is the first wait
/// after a failed write (doubling after each further one, at most 30 s).
pub fn decide(state: &Placement, event: &Event<'_>, retry: Duration) -> (Placement, Vec<Effect>) {
    match (state, event) {
        // Seen while a write is in flight: decided when it returns, on the latest.
        (Placement::Writing { .. }, Event::Seen { .. }) => (state.clone(), Vec::new()),
        (_, Event::Seen { step, version }) => {
            let (failures, confirmed) = match state {
                Placement::Away {
                    failures,
                    confirmed,
                } => (*failures, *confirmed),
                _ => (0, true),
            };
            let write = |record| {
                (
                    Placement::Writing {
                        record,
                        from: version.map(str::to_string),
                        failures,
                    },
                    vec![Effect::Write(record)],
                )
            };
            match step {
                Step::Run if confirmed => (Placement::Here, vec![Effect::Proceed]),
                // Recorded ours in the cache, but not by a write of ours since: confirm.
                Step::Run | Step::Acquire => write(Record::Me),
                Step::Release => write(Record::Nobody),
                Step::Wait | Step::Away => (
                    Placement::Away {
                        failures,
                        confirmed: false,
                    },
                    vec![Effect::Stop],
                ),
            }
        }
        (
            Placement::Writing {
                record,
                from,
                failures,
            },
            Event::Written { ok, latest },
        ) => {
            // Anything that came while the write was in flight (its own watch event, a
            // peer's record, the ring moving again) was not acted on: decide on it now.
            let changed = latest.map(str::to_string) != *from;
            let failed = Placement::Away {
                failures: failures + 1,
                confirmed: false,
            };
            match (ok, record, changed) {
                // Ours now, by our own write (which may have changed nothing).
                (true, Record::Me, _) => (
                    Placement::Away {
                        failures: 0,
                        confirmed: true,
                    },
                    vec![Effect::DecideAgain],
                ),
                (true, Record::Nobody, true) => (Placement::default(), vec![Effect::DecideAgain]),
                (true, Record::Nobody, false) => (Placement::default(), Vec::new()),
                // Refused because the Instance moved on (a conflict): at once, twice; then
                // later, each time later, as under 10,000 instances a cache behind the
                // host made every at-once retry conflict again.
                (false, _, true) if *failures < IMMEDIATE_RETRIES => {
                    (failed, vec![Effect::DecideAgain])
                }
                (false, _, true) => (
                    failed,
                    vec![Effect::DecideAgainAfter(retry_after(
                        retry,
                        failures + 1 - IMMEDIATE_RETRIES,
                    ))],
                ),
                // Refused with nothing changed (the host is gone): later, each time later.
                (false, _, false) => (
                    failed,
                    vec![Effect::DecideAgainAfter(retry_after(retry, failures + 1))],
                ),
            }
        }
        // A late answer to a write already forgotten (the Instance was deleted meanwhile).
        (_, Event::Written { .. }) => (state.clone(), Vec::new()),
    }
}

/// Record writes refused by a conflict that are tried again at once, in a row.
const IMMEDIATE_RETRIES: u32 = 2;

/// The wait before deciding again after `failures` record writes failed in a row:
/// doubling from `base`, at most 30 s.
pub fn retry_after(base: Duration, failures: u32) -> Duration {
    crate::host::backoff::doubling(base, Duration::from_secs(30), failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RETRY: Duration = Duration::from_secs(1);

    fn seen(step: Step, version: &str) -> Event<'_> {
        Event::Seen {
            step,
            version: Some(version),
        }
    }

    #[test]
    fn an_instance_is_taken_run_and_given_up_one_write_at_a_time() {
        let away = Placement::default();
        let (s, e) = decide(&away, &seen(Step::Acquire, "1"), RETRY);
        assert_eq!(e, [Effect::Write(Record::Me)]);
        // Its own write's watch event while the write is in flight: not acted on.
        let (s2, e) = decide(&s, &seen(Step::Run, "2"), RETRY);
        assert_eq!((s2.clone(), e), (s.clone(), vec![]));
        // The write returns: decided again, on the Instance as it is now.
        let (s, e) = decide(
            &s2,
            &Event::Written {
                ok: true,
                latest: Some("2"),
            },
            RETRY,
        );
        let confirmed = Placement::Away {
            failures: 0,
            confirmed: true,
        };
        assert_eq!((s.clone(), e), (confirmed, vec![Effect::DecideAgain]));
        let (s, e) = decide(&s, &seen(Step::Run, "2"), RETRY);
        assert_eq!((s.clone(), e), (Placement::Here, vec![Effect::Proceed]));
        let (s, e) = decide(&s, &seen(Step::Release, "3"), RETRY);
        assert_eq!(e, [Effect::Write(Record::Nobody)]);
        assert!(matches!(
            s,
            Placement::Writing {
                record: Record::Nobody,
                ..
            }
        ));
        let (s, e) = decide(&Placement::Here, &seen(Step::Away, "3"), RETRY);
        assert_eq!(e, [Effect::Stop]);
        // Recorded ours in the cache after it went away (a Lease lost, a restart): the
        // record is written again before anything runs, and fails if another took it.
        let (s, e) = decide(&s, &seen(Step::Run, "3"), RETRY);
        assert_eq!(e, [Effect::Write(Record::Me)]);
        let (s, e) = decide(
            &s,
            &Event::Written {
                ok: false,
                latest: Some("3"),
            },
            RETRY,
        );
        assert_eq!(e, [Effect::DecideAgainAfter(RETRY)]);
        assert_eq!(
            s,
            Placement::Away {
                failures: 1,
                confirmed: false
            }
        );
    }

    #[test]
    fn failed_writes_are_decided_again_at_once_on_a_change_else_later_each_time_and_so_are_runs_of_conflicts(
    ) {
        let (mut s, _) = decide(&Placement::default(), &seen(Step::Acquire, "1"), RETRY);
        let mut waits = Vec::new();
        for _ in 0..7 {
            let (next, e) = decide(
                &s,
                &Event::Written {
                    ok: false,
                    latest: Some("1"),
                },
                RETRY,
            );
            match e.as_slice() {
                [Effect::DecideAgainAfter(d)] => waits.push(d.as_secs()),
                other => panic!("{other:?}"),
            }
            (s, _) = decide(&next, &seen(Step::Acquire, "1"), RETRY);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        // A conflict (the record changed under it): the count goes on, and after a run of
        // failures it waits too.
        let conflict = Event::Written {
            ok: false,
            latest: Some("5"),
        };
        let (after_many, e) = decide(&s, &conflict, RETRY);
        assert_eq!(
            after_many,
            Placement::Away {
                failures: 8,
                confirmed: false
            }
        );
        assert_eq!(e, vec![Effect::DecideAgainAfter(Duration::from_secs(30))]);
        // Fresh: two conflicts in a row are decided again at once, the third a while later.
        let (mut s, _) = decide(&Placement::default(), &seen(Step::Acquire, "1"), RETRY);
        let mut effects = Vec::new();
        for _ in 0..3 {
            let (next, e) = decide(&s, &conflict, RETRY);
            effects.push(e);
            (s, _) = decide(&next, &seen(Step::Acquire, "1"), RETRY);
        }
        assert_eq!(
            effects,
            [
                vec![Effect::DecideAgain],
                vec![Effect::DecideAgain],
                vec![Effect::DecideAgainAfter(RETRY)]
            ]
        );
        assert_eq!(retry_after(RETRY, u32::MAX), Duration::from_secs(30));
    }
}
