//! A managed instance karmada-operator cannot finish (its CRD tarball is nowhere):
//! Provisioning with the operator's own failure, never Running, and deletable while
//! broken (part of the managed lifecycle, `managed::lifecycle`).

use std::process::Command;
use std::time::{Duration, Instant};

use kairship_test_support::{holds, poll, PROCESS_POLL};
use serde_json::Value;

use crate::ha::ClusterDemo;
use crate::managed::{ctl, ctl_ok, phase_and_message, NS};
use crate::run;

/// A new instance the operator cannot finish (a CRD tarball nobody serves): Provisioning
/// with the operator's failure, never Running, and deletable while broken.
pub async fn broken_instance_stays_provisioning(demo: &ClusterDemo) {
    let broken = "team-broken";
    let url = format!("http://kairship.{NS}.svc:8080/karmada-crds/v9.9.9/crds.tar.gz");
    ctl_ok(
        demo,
        &[
            "instances",
            "create",
            broken,
            "--mode",
            "managed",
            "--crd-tarball-url",
            &url,
        ],
    );
    let started = Instant::now();
    let shown = poll(Duration::from_secs(180), PROCESS_POLL, || {
        let out = ctl(demo, &["instances", "get", broken, "-o", "json"]);
        let i: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let (phase, message) = phase_and_message(&i);
        assert_ne!(
            phase, "Running",
            "a control plane without CRDs is never Running"
        );
        let shown = phase == "Provisioning" && message.contains("failed to download CRD tar");
        async move {
            if shown {
                Ok(message)
            } else {
                Err(format!("{phase}: {message}"))
            }
        }
    })
    .await
    .unwrap_or_else(|last| panic!("{broken}: no failure shown; last {last}"));
    println!(
        "a new instance with a missing CRD tarball: Provisioning after {:.0}s with {shown:?}",
        started.elapsed().as_secs_f64()
    );
    run(Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args(["ctl", "--state-dir"])
        .arg(demo.dir.path())
        .args(["instances", "delete", broken]));
    let gone = holds(Duration::from_secs(120), PROCESS_POLL, || {
        !demo
            .kubectl(&["-n", NS, "get", "karmadas", "-o", "name"])
            .contains(broken)
            && !ctl(demo, &["instances", "get", broken]).status.success()
    })
    .await;
    assert!(gone, "{broken} not deleted while broken");
}
