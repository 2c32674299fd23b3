//! Whether one cache's watch is failing, for the instance's Degraded phase. Written by the
//! watch task and its backoff, read by the actor's tick.
//!
//! A watch that fails reports an error; one that resumes successfully reports nothing
//! until something changes. So a failure counts as over on the next event, or once the
//! retry its backoff scheduled has come and gone without a new error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::utils::Backoff;
use kube::runtime::watcher::DefaultBackoff;

/// How long a retried watch has to fail again before its retry counts as a success: a
/// refused or missing resource answers at once, a dead endpoint within the connect timeout.
const RETRY_SETTLES: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct WatchHealth {
    /// Skips the lock on every event while nothing is failing.
    failing: AtomicBool,
    streak: parking_lot::Mutex<Streak>,
}

#[derive(Default)]
struct Streak {
    since: Option<Instant>,
    error: String,
    retry_at: Option<Instant>,
}

impl WatchHealth {
    pub fn failed(&self, error: String) {
        let mut s = self.streak.lock();
        s.since.get_or_insert_with(Instant::now);
        s.error = error;
        self.failing.store(true, Ordering::Relaxed);
    }

    /// The last thing the watch did was fail: its cache may be behind the instance.
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    pub fn succeeded(&self) {
        if self.failing.swap(false, Ordering::Relaxed) {
            *self.streak.lock() = Streak::default();
        }
    }

    fn retry_in(&self, delay: Duration) {
        self.streak.lock().retry_at = Some(Instant::now() + delay);
    }

    /// The latest error, when the watch has failed for at least `grace` without a
    /// success, counting from `not_before` at the earliest.
    pub fn failing_for(&self, grace: Duration, not_before: Instant) -> Option<String> {
        if !self.failing.load(Ordering::Relaxed) {
            return None;
        }
        let mut s = self.streak.lock();
        let since = s.since?;
        if s.retry_at
            .is_some_and(|r| r + RETRY_SETTLES < Instant::now())
        {
            // Retried without failing again: the watch resumed.
            *s = Streak::default();
            self.failing.store(false, Ordering::Relaxed);
            return None;
        }
        (since.max(not_before).elapsed() >= grace).then(|| s.error.clone())
    }

    /// kube-runtime's default watch backoff, telling this when the next retry is due.
    pub fn backoff(self: &Arc<Self>) -> TellingBackoff {
        TellingBackoff {
            inner: DefaultBackoff::default(),
            health: self.clone(),
        }
    }
}

pub struct TellingBackoff {
    inner: DefaultBackoff,
    health: Arc<WatchHealth>,
}

impl Iterator for TellingBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.inner.next();
        if let Some(d) = delay {
            self.health.retry_in(d);
        }
        delay
    }
}

impl Backoff for TellingBackoff {
    fn reset(&mut self) {
        self.inner.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_lasts_until_a_success_or_a_quiet_retry() {
        let h = Arc::new(WatchHealth::default());
        let start = Instant::now();
        assert_eq!(h.failing_for(Duration::ZERO, start), None);
        h.failed("404".into());
        assert_eq!(h.failing_for(Duration::ZERO, start).as_deref(), Some("404"));
        assert_eq!(
            h.failing_for(Duration::from_secs(60), start),
            None,
            "too short"
        );
        let grace = Duration::from_millis(20);
        std::thread::sleep(grace * 2);
        h.failed("410".into());
        assert_eq!(
            h.failing_for(grace, start).as_deref(),
            Some("410"),
            "the latest error"
        );
        assert_eq!(
            h.failing_for(grace, Instant::now()),
            None,
            "counted from not_before"
        );
        h.succeeded();
        assert_eq!(h.failing_for(Duration::ZERO, start), None);

        h.failed("404".into());
        // A retry due long ago that did not fail again.
        h.streak.lock().retry_at = Instant::now().checked_sub(RETRY_SETTLES * 2);
        assert_eq!(
            h.failing_for(Duration::ZERO, start),
            None,
            "resumed quietly"
        );
        let mut backoff = h.backoff();
        h.failed("404".into());
        assert!(backoff.next().is_some());
        assert_eq!(h.failing_for(Duration::ZERO, start).as_deref(), Some("404"));
    }
}
