//! Helpers every Kairship test binary shares, so they exist once: waiting for a condition
//! (in async tests and in blocking ones driving kubectl), with one poll interval, and
//! starting a simulated fleet ([`fleet`]), Kairship's supervision tree against it
//! ([`harness`]), and the scenarios both fleets run ([`scenarios`]).

pub mod fleet;
pub mod harness;
pub mod scenarios;

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is checked again.
pub const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it returns `Some`, failing the test after `within` naming `what`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// As [`eventually`], for blocking checks (a kubectl run each time) outside a runtime.
pub fn wait<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_returns_what_the_check_found() {
        let mut n = 0;
        let v = wait(Duration::from_secs(5), "the third try", || {
            n += 1;
            (n == 3).then_some(n)
        });
        assert_eq!(v, 3);
    }

    #[test]
    #[should_panic(expected = "timed out after 0ns waiting for nothing")]
    fn wait_fails_naming_what_it_waited_for() {
        wait(Duration::ZERO, "nothing", || None::<()>);
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_polls_on_the_clock_until_found() {
        let start = tokio::time::Instant::now();
        let mut n = 0;
        let v = eventually(Duration::from_secs(5), "the fourth try", || {
            n += 1;
            let found = (n == 4).then_some(n);
            async move { found }
        })
        .await;
        assert_eq!(v, 4);
        assert_eq!(start.elapsed(), POLL * 3);
    }
}
