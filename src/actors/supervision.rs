//! Restart tracking and actor snapshots, shared by every supervisor in the tree (the
//! policy and its backoff are `host::backoff`).

use std::collections::VecDeque;
use std::time::Duration;

// The runtime clock, so tests can pause and advance it.
use tokio::time::Instant;

use serde::Serialize;

use crate::host::backoff::{backoff_step, RestartPolicy};

/// What a supervisor does after a child failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Restart after this delay.
    Restart(Duration),
    /// Too many failures: mark Degraded, try again after this delay.
    Degraded(Duration),
}

/// Failure history of one child.
#[derive(Debug, Clone, Default)]
pub struct RestartTracker {
    failures: VecDeque<Instant>,
    pub total_restarts: u32,
}

impl RestartTracker {
    /// Records a failure at `now` and decides what follows.
    pub fn on_failure(&mut self, policy: &RestartPolicy, now: Instant) -> Decision {
        self.failures.push_back(now);
        while self
            .failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.window)
        {
            self.failures.pop_front();
        }
        self.total_restarts = self.total_restarts.saturating_add(1);
        if self.failures.len() > policy.max_restarts {
            return Decision::Degraded(policy.degraded_retry);
        }
        // The n-th failure within the window waits the n-th step of the backoff.
        let delay = backoff_step(policy.min_delay, policy.max_delay, self.failures.len());
        Decision::Restart(delay.min(policy.max_delay * 2))
    }

    /// A manual restart forgives past failures.
    pub fn reset(&mut self) {
        self.failures.clear();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ActorState {
    Starting,
    Running,
    Backoff,
    Degraded,
    Stopped,
}

impl ActorState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "Starting",
            Self::Running => "Running",
            Self::Backoff => "Backoff",
            Self::Degraded => "Degraded",
            Self::Stopped => "Stopped",
        }
    }
}

/// One actor as the SupervisorService and the tests see it.
#[derive(Debug, Clone, Serialize)]
pub struct ActorSnapshot {
    pub name: String,
    pub parent: String,
    pub state: ActorState,
    pub restart_count: u32,
    /// Restarts an SRE asked for (RestartInstance), counted apart from failures.
    pub requested_restarts: u32,
    pub last_error: Option<String>,
    pub uptime: Duration,
    pub instance: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_then_degrade_past_the_limit() {
        let policy = RestartPolicy {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(10),
            max_restarts: 3,
            window: Duration::from_secs(60),
            degraded_retry: Duration::from_secs(30),
        };
        let mut t = RestartTracker::default();
        let start = Instant::now();
        let mut delays = Vec::new();
        for i in 0..3 {
            match t.on_failure(&policy, start + Duration::from_secs(i)) {
                Decision::Restart(d) => delays.push(d),
                other => panic!("failure {i} should restart, got {other:?}"),
            }
        }
        assert!(
            delays[0] >= Duration::from_millis(100) && delays[2] > delays[0],
            "{delays:?}"
        );
        assert_eq!(
            t.on_failure(&policy, start + Duration::from_secs(4)),
            Decision::Degraded(Duration::from_secs(30))
        );
        assert_eq!(t.total_restarts, 4);
    }

    /// The same policy on the runtime's paused clock: each restart waits its backoff in
    /// virtual time, a crash loop degrades, and a quiet window forgives it.
    #[tokio::test(start_paused = true)]
    async fn backoff_and_intensity_follow_the_runtime_clock() {
        let policy = RestartPolicy {
            min_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(8),
            max_restarts: 3,
            window: Duration::from_secs(60),
            degraded_retry: Duration::from_secs(30),
        };
        let mut t = RestartTracker::default();
        let start = Instant::now();
        let mut waited = Duration::ZERO;
        let mut delays = Vec::new();
        for i in 0..3 {
            let Decision::Restart(d) = t.on_failure(&policy, Instant::now()) else {
                panic!("failure {i} should restart");
            };
            tokio::time::sleep(d).await;
            waited += d;
            delays.push(d);
        }
        // Only the backoff passed (the timer wheel rounds each sleep up to a millisecond).
        let passed = Instant::now() - start;
        assert!(
            passed >= waited && passed - waited <= Duration::from_millis(3),
            "{passed:?} for {waited:?}"
        );
        assert!(
            delays[0] >= Duration::from_secs(1) && delays[2] > delays[0],
            "{delays:?}"
        );
        assert_eq!(
            t.on_failure(&policy, Instant::now()),
            Decision::Degraded(Duration::from_secs(30))
        );
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(matches!(
            t.on_failure(&policy, Instant::now()),
            Decision::Restart(_)
        ));
    }

    #[test]
    fn failures_outside_the_window_are_forgotten() {
        let policy = RestartPolicy {
            max_restarts: 1,
            window: Duration::from_secs(10),
            ..Default::default()
        };
        let mut t = RestartTracker::default();
        let start = Instant::now();
        assert!(matches!(t.on_failure(&policy, start), Decision::Restart(_)));
        assert!(matches!(
            t.on_failure(&policy, start + Duration::from_secs(30)),
            Decision::Restart(_)
        ));
        assert!(matches!(
            t.on_failure(&policy, start + Duration::from_secs(31)),
            Decision::Degraded(_)
        ));
    }
}
