//! A managed instance (the real karmada-operator's control plane) backed up through
//! `kairship ctl`, its `web` Deployment and policy deleted through Kairship's proxy (real
//! Karmada takes web off member1), then restored: web is placed on member1 again.

use std::time::{Duration, Instant};

use kairship_test_support::{poll, PROCESS_POLL};

use crate::ha::ClusterDemo;
use crate::managed::{placed_on, proxy_kubeconfig};

pub async fn restored_after_loss(demo: &ClusterDemo, name: &str) {
    // The operator may still be applying the previous change (the instance then answers
    // Unavailable, naming it): the backup is taken once the instance is connected.
    let started = Instant::now();
    let args = ["backups", "create", name, "--wait", "-o", "json"];
    let b = ctl_once_connected(demo, &args).await;
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
    // Each step waits out the operator's workflows (the instance Unavailable through
    // Kairship meanwhile, naming them): a deletion already done is NotFound, a restore
    // is idempotent.
    let proxy = proxy_kubeconfig(demo);
    for what in ["propagationpolicy", "deployment"] {
        let args = [
            "delete",
            what,
            "web",
            "-n",
            "managed-app",
            "--ignore-not-found",
        ];
        poll(Duration::from_secs(240), PROCESS_POLL * 4, || {
            let r = crate::managed::try_kubectl(&proxy, &args, None);
            async move { r }
        })
        .await
        .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"));
    }
    poll(Duration::from_secs(90), PROCESS_POLL, || {
        let on = placed_on(demo);
        async move { on.is_empty().then_some(()).ok_or(on) }
    })
    .await
    .unwrap_or_else(|on| panic!("web still placed on {on:?} after its deletion"));

    let started = Instant::now();
    let args = ["backups", "restore", name, &backup, "-o", "json"];
    let r = ctl_once_connected(demo, &args).await;
    assert!(r["failed"].is_null(), "{r}");
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

/// `kairship ctl ARGS`'s JSON once it succeeds: the operator may still be applying an
/// earlier change, and Kairship answers Unavailable, naming it, meanwhile.
async fn ctl_once_connected(demo: &ClusterDemo, args: &[&str]) -> serde_json::Value {
    poll(Duration::from_secs(240), PROCESS_POLL * 4, || {
        let out = crate::managed::ctl(demo, args);
        let answer = match out.status.success() {
            true => Ok(serde_json::from_slice(&out.stdout).unwrap_or_default()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        };
        async move { answer }
    })
    .await
    .unwrap_or_else(|e| panic!("kairship ctl {args:?}: {e}"))
}
