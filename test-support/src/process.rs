//! A `kairship demo` the end-to-end tests run as a child process: its endpoints.json once
//! written, and a stop that gives it the time to remove what it started.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use crate::{poll, poll_blocking, POLL};

/// Why a demo's endpoints.json never came.
#[derive(Debug)]
pub enum NotUp {
    /// The demo ended first.
    Exited(ExitStatus),
    /// Still running, still no endpoints.json.
    TimedOut(Duration),
}

impl std::fmt::Display for NotUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(s) => write!(f, "the demo exited ({s}) before writing endpoints.json"),
            Self::TimedOut(d) => write!(f, "no endpoints.json within {d:?}"),
        }
    }
}

/// Waits until `path` (the demo's endpoints.json) parses, and fails at once if `child`
/// ends first.
pub async fn endpoints(child: &mut Child, path: &Path, within: Duration) -> Result<Value, NotUp> {
    // The check ends the wait either way: endpoints read, or the demo gone.
    let ended = poll(within, POLL, || {
        let found = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let seen = match (found, child.try_wait()) {
            (Some(v), _) => Ok(Ok(v)),
            (None, Ok(Some(status))) => Ok(Err(NotUp::Exited(status))),
            (None, _) => Err(NotUp::TimedOut(within)),
        };
        async move { seen }
    })
    .await;
    ended.and_then(|up| up)
}

/// SIGTERM, then up to `within` for the demo to stop its fleet and exit; killed past
/// that. The exit status, when it exited by itself in time.
pub fn stop(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let exited = poll_blocking(within, POLL, || match child.try_wait() {
        Ok(Some(status)) => Ok(status),
        _ => Err(()),
    })
    .ok();
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    exited
}

/// A child stopped as [`stop`] does when dropped, so a failing test leaves nothing running.
pub struct StopOnDrop(pub Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        stop(&mut self.0, Duration::from_secs(30));
    }
}

/// `kairship ctl` (the test's `kairship` binary `bin`) against the demo whose state is in
/// `state_dir`.
pub fn ctl(bin: &str, state_dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin)
        .arg("ctl")
        .arg("--state-dir")
        .arg(state_dir)
        .args(args)
        .output()
        .expect("kairship ctl runs")
}

/// `kairship ctl ... -o json`'s answer; ctl's own words when it fails.
pub fn ctl_json(bin: &str, state_dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    let out = ctl(bin, state_dir, &a);
    assert!(
        out.status.success(),
        "kairship ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("ctl -o json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_reports_its_exit() {
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let status = stop(&mut child, Duration::from_secs(10)).expect("exits on SIGTERM");
        assert!(!status.success(), "ended by the signal: {status}");
    }

    #[tokio::test]
    async fn endpoints_fail_at_once_when_the_process_ends_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new("true").spawn().expect("true runs");
        let path = dir.path().join("endpoints.json");
        let started = std::time::Instant::now();
        let up = endpoints(&mut child, &path, Duration::from_secs(30)).await;
        assert!(matches!(up, Err(NotUp::Exited(s)) if s.success()), "{up:?}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let mut running = StopOnDrop(Command::new("sleep").arg("30").spawn().expect("sleep"));
        std::fs::write(&path, r#"{"grpc": "127.0.0.1:1"}"#).expect("write");
        let v = endpoints(&mut running.0, &path, Duration::ZERO)
            .await
            .expect("parsed");
        assert_eq!(v["grpc"], "127.0.0.1:1");
    }
}
