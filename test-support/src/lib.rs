//! Helpers every Kairship test binary shares, so they exist once: waiting for a condition
//! (in async tests and in blocking ones driving kubectl), at one of two poll intervals,
//! waiting on and stopping a `kairship demo` child ([`process`]), and
//! starting a simulated fleet ([`fleet`]), Kairship's supervision tree against it
//! ([`harness`]) and its API on loopback ports ([`api`]), one raw request answered as its code and body ([`http`]), and the
//! scenarios both fleets run ([`scenarios`]).

pub mod api;
pub mod fleet;
pub mod harness;
pub mod http;
pub mod process;
pub mod scenarios;

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is checked again.
pub const POLL: Duration = Duration::from_millis(100);

/// How often a check that starts a process (kubectl, ctr, karmadactl) is run again: each
/// run costs a process start on two shared cores.
pub const PROCESS_POLL: Duration = Duration::from_millis(500);

/// Runs `check` every `every` until it returns `Ok`; after `within`, its last `Err` (what
/// it saw), for the caller to fail with its own diagnostics.
pub async fn poll<T, E, F, Fut>(within: Duration, every: Duration, mut check: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return Ok(v),
            Err(seen) if tokio::time::Instant::now() >= deadline => return Err(seen),
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

/// As [`poll`], for a yes-or-no check run in place (a kubectl each time): whether it held
/// within `within`.
pub async fn holds(within: Duration, every: Duration, mut check: impl FnMut() -> bool) -> bool {
    poll(within, every, || {
        let held = check();
        async move { held.then_some(()).ok_or(()) }
    })
    .await
    .is_ok()
}

/// As [`poll`], for blocking checks outside a runtime (and in `Drop`).
pub fn poll_blocking<T, E>(
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = Instant::now() + within;
    loop {
        match check() {
            Ok(v) => return Ok(v),
            Err(seen) if Instant::now() >= deadline => return Err(seen),
            Err(_) => std::thread::sleep(every),
        }
    }
}

/// Polls `check` until it returns `Some`, failing the test after `within` naming `what`.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll(within, POLL, || {
        let found = check();
        async move { found.await.ok_or(()) }
    })
    .await
    .unwrap_or_else(|()| panic!("timed out after {within:?} waiting for {what}"))
}

/// As [`eventually`], for blocking checks (a kubectl run each time) outside a runtime.
pub fn wait<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    poll_blocking(within, POLL, || check().ok_or(()))
        .unwrap_or_else(|()| panic!("timed out after {within:?} waiting for {what}"))
}

/// A tier's prerequisite is missing on this machine: the test fails naming it, unless
/// `KAIRSHIP_SKIP_TIERS` (comma-separated) names the tier, when it says that it skips.
/// A missing prerequisite never passes silently.
pub fn missing_prerequisite(tier: &str, why: &str) {
    let skipped =
        std::env::var("KAIRSHIP_SKIP_TIERS").is_ok_and(|v| v.split(',').any(|t| t.trim() == tier));
    assert!(
        skipped,
        "{why} (or set KAIRSHIP_SKIP_TIERS={tier} to skip the {tier} tier)"
    );
    eprintln!("SKIPPED ({tier} is in KAIRSHIP_SKIP_TIERS): {why}");
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

    #[tokio::test(start_paused = true)]
    async fn poll_gives_back_what_it_saw_last_when_time_is_up() {
        let start = tokio::time::Instant::now();
        let mut n = 0;
        let seen = poll(Duration::from_secs(2), PROCESS_POLL, || {
            n += 1;
            let tried = n;
            async move { Err::<(), _>(tried) }
        })
        .await;
        assert_eq!(seen, Err(5), "tried at 0, 0.5, 1, 1.5 and 2 s");
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
