//! A managed instance (the real karmada-operator's control plane) backed up through
//! `kairship ctl`, its `web` Deployment and policy deleted through Kairship's proxy (real
//! Karmada takes web off member1), then restored: web is placed on member1 again.

use std::time::{Duration, Instant};

use kairship_test_support::{poll, PROCESS_POLL};

use crate::ha::ClusterDemo;
use crate::managed::{ctl_ok, placed_on, proxy_kubeconfig};

pub async fn restored_after_loss(demo: &ClusterDemo, name: &str) {
    // The operator may still be applying the previous change (the instance then answers
    // Unavailable, naming it): the backup is taken once the instance is connected.
    let started = Instant::now();
    let args = ["backups", "create", name, "--wait", "-o", "json"];
    let b: serde_json::Value = poll(Duration::from_secs(240), PROCESS_POLL * 4, || {
        let out = crate::managed::ctl(demo, &args);
        let answer = match out.status.success() {
            true => Ok(serde_json::from_slice(&out.stdout).unwrap_or_default()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        };
        async move { answer }
    })
    .await
    .unwrap_or_else(|e| panic!("no backup of {name}: {e}"));
    assert_eq!(b["phase"], "Completed", "{b}");
    assert!(
        b["resources"]["deployments.apps"].as_i64() >= Some(1),
        "{b}"
    );
    let backup = b["name"].as_str().expect("name").to_string();
    println!(
        "managed instance {name} backed up in {:.1}s: {} objects, {} bytes",
        started.elapsed().as_secs_f64(),
        b["objects"],
        b["sizeBytes"]
    );
    let proxy = proxy_kubeconfig(demo);
    for what in [["propagationpolicy", "web"], ["deployment", "web"]] {
        crate::managed::kubectl_with(
            &proxy,
            &["delete", what[0], what[1], "-n", "managed-app"],
            None,
        );
    }
    poll(Duration::from_secs(90), PROCESS_POLL, || {
        let on = placed_on(demo);
        async move { on.is_empty().then_some(()).ok_or(on) }
    })
    .await
    .unwrap_or_else(|on| panic!("web still placed on {on:?} after its deletion"));

    let started = Instant::now();
    let r = ctl_ok(demo, &["backups", "restore", name, &backup]);
    assert!(r["failed"].is_null(), "{r}");
    assert_eq!(r["resources"]["deployments.apps"], 1, "{r}");
    let restored = started.elapsed();
    poll(Duration::from_secs(120), PROCESS_POLL, || {
        let on = placed_on(demo);
        async move { (on == ["member1"]).then_some(()).ok_or(on) }
    })
    .await
    .unwrap_or_else(|on| panic!("web placed on {on:?} after the restore, not member1"));
    println!(
        "managed instance {name} restored in {:.1}s; web on member1 again after {:.1}s",
        restored.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
