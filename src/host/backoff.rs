//! The one backoff Kairship retries with: exponential with jitter on `backon` (maintained,
//! and what kube-runtime uses; the `backoff` crate is flagged unmaintained,
//! RUSTSEC-2025-0012), and the restart policy supervisors apply it with.

use std::time::Duration;

use backon::BackoffBuilder;

/// Exponential backoff between restarts, and a restart-intensity limit.
#[derive(Debug, Clone)]
pub struct RestartPolicy {
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// At most this many restarts within `window`...
    pub max_restarts: usize,
    pub window: Duration,
    /// ...past which the child is Degraded and retried only this often.
    pub degraded_retry: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            // A crash loop ends Degraded within seconds (0.25 + 0.5 + 1 + 2 s of back-off),
            // so it is reported while people are still looking; the retry comes later.
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
            max_restarts: 4,
            window: Duration::from_secs(60),
            degraded_retry: Duration::from_secs(60),
        }
    }
}

/// The wait before the `n`-th retry (from 1): from `min`, doubling, at most `max`, with
/// jitter so that instances failing together do not retry together.
pub fn backoff_step(min: Duration, max: Duration, n: usize) -> Duration {
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
        .nth(n.saturating_sub(1))
        .unwrap_or(max)
}

/// The `n`-th wait (from 1) without jitter: from `min`, doubling, at most `max`. For the
/// pure state machines a deterministic simulation replays (shard placement) and loops
/// whose waits are shown to SREs (the elector's).
pub fn doubling(min: Duration, max: Duration, n: u32) -> Duration {
    min.saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(max)
        .max(min.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_double_from_the_least_to_the_most() {
        let (min, max) = (Duration::from_millis(250), Duration::from_secs(10));
        let waits: Vec<u128> = (0..8).map(|n| doubling(min, max, n).as_millis()).collect();
        assert_eq!(waits, [250, 250, 500, 1000, 2000, 4000, 8000, 10000]);
        assert_eq!(doubling(min, max, u32::MAX), max);
        for n in 1..12 {
            let w = backoff_step(min, max, n);
            assert!(w >= min && w <= max * 2, "{n}: {w:?}");
        }
    }
}
