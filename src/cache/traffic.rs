//! What Kairship's proxy answered for one instance since its actor started: the requests
//! it answered, those answered with a server error (5xx, Kairship's own 502/503/504
//! included), and when the last came. A rollout halts on the share that failed while an
//! instance soaks after its change (`controllers::rollout_steps`); `/metrics` shows the
//! counts and the last request's time, so idle instances can be found.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Traffic {
    requests: AtomicU64,
    failed: AtomicU64,
    /// Unix seconds of the last answer; 0 before the first.
    last: AtomicI64,
}

/// The counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub requests: u64,
    pub failed: u64,
}

impl Traffic {
    pub fn record(&self, status: http::StatusCode) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.last
            .store(jiff::Timestamp::now().as_second(), Ordering::Relaxed);
        if status.is_server_error() {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// When the last request was answered (Unix seconds), if one was.
    pub fn last_request(&self) -> Option<i64> {
        Some(self.last.load(Ordering::Relaxed)).filter(|s| *s > 0)
    }

    pub fn counts(&self) -> Counts {
        Counts {
            requests: self.requests.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

impl Counts {
    /// What came since `base`; `None` when the counts went back (a new actor counts from
    /// zero), so the caller starts again from now.
    pub fn since(self, base: Counts) -> Option<Counts> {
        Some(Counts {
            requests: self.requests.checked_sub(base.requests)?,
            failed: self.failed.checked_sub(base.failed)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_count_as_failed_and_counts_that_go_back_restart() {
        let t = Traffic::default();
        assert_eq!(t.last_request(), None);
        let before = jiff::Timestamp::now().as_second();
        for s in [200, 201, 404, 403, 500, 503, 504] {
            t.record(http::StatusCode::from_u16(s).expect("status"));
        }
        let c = t.counts();
        assert!(t.last_request().is_some_and(|at| at >= before));
        assert_eq!(
            c,
            Counts {
                requests: 7,
                failed: 3
            }
        );
        let base = Counts {
            requests: 2,
            failed: 1,
        };
        assert_eq!(
            c.since(base),
            Some(Counts {
                requests: 5,
                failed: 2
            })
        );
        assert_eq!(Counts::default().since(c), None);
    }
}
