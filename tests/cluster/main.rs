//! The cluster tier: Kairship as its users run it. The image (`scripts/image/build.sh`)
//! and the Helm chart (`deploy/chart/kairship`) checked on their own, then
//! `kairship demo --fleet cluster`: the real fleet plus a kubelet-backed node, Kairship
//! installed by its chart as three pods, checked through the Service as a client would,
//! through a leader's loss, a rolling upgrade and an uninstall, and the machine left clean.
//!
//! The node needs root, the binaries of scripts/real-fleet/build.sh and the image: the
//! README's test command provides all three; without them the tier fails under that
//! command (or CI) and is skipped, loudly, elsewhere.

mod chart;
mod ha;
mod image;
mod managed;
mod managed_backups;
mod managed_broken;
mod managed_components;
mod managed_hibernation;
mod managed_rollouts;
mod promote;
mod pull_mode;
mod readers;
mod sessions;
mod sharded;
mod surfaces;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Fails when the tier's prerequisites are missing, unless KAIRSHIP_SKIP_TIERS names
/// the tier (then it says why it skips).
pub fn skip_unless(ready: Result<(), String>) -> bool {
    match ready {
        Ok(()) => false,
        Err(why) => {
            kairship_test_support::missing_prerequisite("cluster", &why);
            true
        }
    }
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn bin_dir() -> PathBuf {
    kairship_realfleet::default_bin_dir()
}

pub fn helm_path() -> PathBuf {
    bin_dir().join("helm")
}

/// The archive `scripts/image/build.sh` writes by default.
pub fn image_archive() -> PathBuf {
    repo().join(format!(
        "target/image/kairship-{}.oci.tar",
        env!("CARGO_PKG_VERSION")
    ))
}

pub fn image_name() -> String {
    format!("ghcr.io/kairship/kairship:{}", env!("CARGO_PKG_VERSION"))
}

/// Runs a command; its output, failing the test with stderr when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let what = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn helm(kubeconfig: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(helm_path());
    if let Some(k) = kubeconfig {
        cmd.arg(format!("--kubeconfig={}", k.display()));
    }
    run(cmd.args(args))
}
