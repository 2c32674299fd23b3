//! Whether an instance should be asleep now: a pure function of its hibernation spec,
//! the clock and what happened to it, so time zones, daylight-saving changes and every
//! order of events are tested without a fleet.
//!
//! The latest of these wins: a schedule's start (asleep) or end (awake), a command
//! (`kairship ctl instances hibernate|wake`), a request that needs the instance (awake).
//! An awake instance with `idleAfter` falls asleep once nothing reached it and nothing
//! changed in it for that long. Falling asleep waits while work is in flight (a
//! rollout, a backup, bindings Karmada has not applied): it would stop halfway.

use jiff::{SignedDuration, Timestamp};

use crate::schedule::cron::Schedule;

/// What an instance's owner knows when it decides.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The last request through Kairship or change in the instance.
    pub last_activity: Option<Timestamp>,
    /// The last request that needed the instance awake (wake on request).
    pub last_wake_request: Option<Timestamp>,
    /// The last `hibernate` or `wake` command, and which (`true`: hibernate).
    pub last_command: Option<(Timestamp, bool)>,
    /// Work that must not be cut off by falling asleep, each named.
    pub in_flight: Vec<String>,
}

/// Why the instance should be as [`Verdict`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Nothing asks for sleep.
    Default,
    Scheduled {
        at: Timestamp,
    },
    ScheduledEnd {
        at: Timestamp,
    },
    Command {
        at: Timestamp,
    },
    Request {
        at: Timestamp,
    },
    Idle {
        since: Timestamp,
    },
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Default => write!(f, "no schedule, command or idleness asks for sleep"),
            Reason::Scheduled { at } => write!(f, "its schedule started hibernation at {at}"),
            Reason::ScheduledEnd { at } => write!(f, "its schedule ended hibernation at {at}"),
            Reason::Command { at } => write!(f, "a command at {at}"),
            Reason::Request { at } => write!(f, "a request needed it at {at}"),
            Reason::Idle { since } => write!(f, "idle since {since}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub asleep: bool,
    pub reason: Reason,
    /// Sleep is due but waits for this work (empty when it does not).
    pub waiting_for: Vec<String>,
    /// When the verdict next changes by the clock alone (a schedule firing, idleness
    /// reached), for the owner to look again then.
    pub next_change: Option<Timestamp>,
}

/// Whether the instance should be asleep at `now`.
pub fn decide(
    schedules: &[Schedule],
    idle_after: Option<SignedDuration>,
    inputs: &Inputs,
    now: Timestamp,
) -> Verdict {
    // The latest event that says asleep or awake.
    let mut latest: Option<(Timestamp, bool, Reason)> = None;
    let mut consider = |at: Timestamp, asleep: bool, reason: Reason| {
        if latest.as_ref().is_none_or(|(t, _, _)| at >= *t) {
            latest = Some((at, asleep, reason));
        }
    };
    let mut next_change: Option<Timestamp> = None;
    let mut soonest = |t: Option<Timestamp>| {
        if let Some(t) = t {
            next_change = Some(next_change.map_or(t, |n| n.min(t)));
        }
    };
    for s in schedules {
        if let Some(at) = s
            .end
            .as_ref()
            .and_then(|c| c.last_at_or_before(now, &s.zone))
        {
            consider(at, false, Reason::ScheduledEnd { at });
        }
        // A start and an end at the same minute: asleep (considered last, so it wins).
        if let Some(at) = s
            .start
            .as_ref()
            .and_then(|c| c.last_at_or_before(now, &s.zone))
        {
            consider(at, true, Reason::Scheduled { at });
        }
        soonest(s.start.as_ref().and_then(|c| c.next_after(now, &s.zone)));
        soonest(s.end.as_ref().and_then(|c| c.next_after(now, &s.zone)));
    }
    if let Some((at, hibernate)) = inputs.last_command {
        consider(at, hibernate, Reason::Command { at });
    }
    if let Some(at) = inputs.last_wake_request {
        consider(at, false, Reason::Request { at });
    }
    let (mut asleep, mut reason) = match latest {
        Some((_, asleep, reason)) => (asleep, reason),
        None => (false, Reason::Default),
    };
    if !asleep {
        if let Some(idle) = idle_after {
            // Nothing known of its use (a fresh owner): not idle on that alone.
            let since = inputs.last_activity;
            match since.and_then(|s| Some((s, s.checked_add(idle).ok()?))) {
                Some((since, due)) if due <= now => {
                    asleep = true;
                    reason = Reason::Idle { since };
                }
                Some((_, due)) => soonest(Some(due)),
                None => {}
            }
        }
    }
    let waiting_for = if asleep {
        inputs.in_flight.clone()
    } else {
        Vec::new()
    };
    Verdict {
        asleep: asleep && waiting_for.is_empty(),
        reason,
        waiting_for,
        next_change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::cron::ScheduleError;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    /// Weekday nights in Berlin: asleep from 20:00, awake from 08:00.
    fn nights() -> Vec<Schedule> {
        vec![Schedule::parse(
            Some("0 20 * * 1-5"),
            Some("0 8 * * 1-5"),
            Some("Europe/Berlin"),
        )
        .expect("schedule")]
    }

    #[test]
    fn a_schedule_puts_it_to_sleep_and_wakes_it() {
        let s = nights();
        let none = Inputs::default();
        // Monday 2026-11-30 21:00 CET: asleep since 20:00 CET (19:00 UTC).
        let v = decide(&s, None, &none, ts("2026-11-30T20:00:00Z"));
        assert!(v.asleep, "{v:?}");
        assert_eq!(
            v.reason,
            Reason::Scheduled {
                at: ts("2026-11-30T19:00:00Z")
            }
        );
        assert_eq!(v.next_change, Some(ts("2026-12-01T07:00:00Z")));
        // Tuesday 09:00 CET: awake since 08:00.
        let v = decide(&s, None, &none, ts("2026-12-01T08:00:00Z"));
        assert!(!v.asleep, "{v:?}");
        // The weekend: Friday's 20:00 still holds on Sunday.
        let v = decide(&s, None, &none, ts("2026-11-29T12:00:00Z"));
        assert!(v.asleep);
        assert_eq!(
            v.reason,
            Reason::Scheduled {
                at: ts("2026-11-27T19:00:00Z")
            }
        );
    }

    #[test]
    fn the_schedule_follows_local_time_across_daylight_saving() {
        let s = nights();
        let none = Inputs::default();
        // Monday 2027-03-29, the first weekday of summer time: 20:00 CEST is 18:00 UTC.
        assert!(!decide(&s, None, &none, ts("2027-03-29T17:59:00Z")).asleep);
        assert!(decide(&s, None, &none, ts("2027-03-29T18:00:00Z")).asleep);
        // Monday 2027-11-01, winter time again: 19:00 UTC.
        assert!(!decide(&s, None, &none, ts("2027-11-01T18:59:00Z")).asleep);
        assert!(decide(&s, None, &none, ts("2027-11-01T19:00:00Z")).asleep);
    }

    #[test]
    fn a_request_wakes_it_until_the_schedule_next_starts() {
        let s = nights();
        let woken = Inputs {
            last_wake_request: Some(ts("2026-11-30T21:00:00Z")),
            last_activity: Some(ts("2026-11-30T21:00:00Z")),
            ..Default::default()
        };
        let v = decide(&s, None, &woken, ts("2026-11-30T23:00:00Z"));
        assert!(!v.asleep);
        assert_eq!(
            v.reason,
            Reason::Request {
                at: ts("2026-11-30T21:00:00Z")
            }
        );
        // The next evening's start is later than the request: asleep again.
        assert!(decide(&s, None, &woken, ts("2026-12-01T19:00:00Z")).asleep);
        // With idleAfter, an hour after the last request it sleeps without waiting.
        let v = decide(
            &s,
            Some(SignedDuration::from_hours(1)),
            &woken,
            ts("2026-11-30T22:00:00Z"),
        );
        assert!(v.asleep);
        assert_eq!(
            v.reason,
            Reason::Idle {
                since: ts("2026-11-30T21:00:00Z")
            }
        );
    }

    #[test]
    fn idleness_alone() {
        let idle = Some(SignedDuration::from_mins(30));
        let used = Inputs {
            last_activity: Some(ts("2026-11-29T10:00:00Z")),
            ..Default::default()
        };
        let v = decide(&[], idle, &used, ts("2026-11-29T10:20:00Z"));
        assert!(!v.asleep);
        assert_eq!(v.next_change, Some(ts("2026-11-29T10:30:00Z")));
        assert!(decide(&[], idle, &used, ts("2026-11-29T10:30:00Z")).asleep);
        // Nothing known of its use (a fresh owner): it does not sleep on that alone.
        assert!(!decide(&[], idle, &Inputs::default(), ts("2026-11-29T10:30:00Z")).asleep);
        // Without a schedule or idleAfter it never sleeps by itself.
        assert!(!decide(&[], None, &used, ts("2030-01-01T00:00:00Z")).asleep);
    }

    #[test]
    fn commands_win_until_something_later() {
        let s = nights();
        // Hibernated by hand on Tuesday at noon; the 20:00 start changes nothing, the
        // Wednesday 08:00 end wakes it.
        let by_hand = Inputs {
            last_command: Some((ts("2026-12-01T11:00:00Z"), true)),
            ..Default::default()
        };
        assert!(decide(&s, None, &by_hand, ts("2026-12-01T12:00:00Z")).asleep);
        assert!(!decide(&s, None, &by_hand, ts("2026-12-02T07:00:00Z")).asleep);
        // Woken by hand at night: awake until the next start.
        let woken = Inputs {
            last_command: Some((ts("2026-11-30T22:00:00Z"), false)),
            ..Default::default()
        };
        let v = decide(&s, None, &woken, ts("2026-11-30T23:00:00Z"));
        assert!(!v.asleep);
        assert_eq!(
            v.reason,
            Reason::Command {
                at: ts("2026-11-30T22:00:00Z")
            }
        );
    }

    #[test]
    fn a_schedule_that_starts_during_a_rollout_waits_for_it() {
        let s = nights();
        let busy = Inputs {
            in_flight: vec!["FleetRollout prod is upgrading it".into()],
            ..Default::default()
        };
        let v = decide(&s, None, &busy, ts("2026-11-30T19:30:00Z"));
        assert!(!v.asleep, "{v:?}");
        assert_eq!(v.waiting_for, busy.in_flight);
        assert!(matches!(v.reason, Reason::Scheduled { .. }));
        // Once done, the same schedule puts it to sleep.
        assert!(decide(&s, None, &Inputs::default(), ts("2026-11-30T19:45:00Z")).asleep);
    }

    #[test]
    fn bad_schedules_name_the_field() {
        let e = Schedule::parse(Some("0 25 * * *"), None, None).expect_err("hour 25");
        assert!(e.to_string().starts_with("start: "), "{e}");
        let e = Schedule::parse(None, Some("0 8 * *"), None).expect_err("four fields");
        assert!(e.to_string().starts_with("end: "), "{e}");
        let e = Schedule::parse(Some("0 20 * * *"), None, Some("Mars/Olympus")).expect_err("zone");
        assert!(e.to_string().contains("Mars/Olympus"), "{e}");
        assert_eq!(
            Schedule::parse(None, None, None).expect_err("empty"),
            ScheduleError::Empty
        );
    }
}
