//! A backup of a real Karmada instance restored after loss: the `web` Deployment and its
//! PropagationPolicy deleted (real Karmada then removes them from the members), the
//! backup restored through Kairship, and real Karmada placing `web` on the members again
//! as before (2 and 1 replicas by its weights).

use std::path::Path;
use std::time::{Duration, Instant};

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use tonic::transport::Channel;

use crate::common::eventually;
use crate::Demo;

pub async fn restored_after_loss(demo: &Demo, channel: &Channel, member1: &Path) {
    let c = InstanceServiceClient::new(channel.clone());
    let started = Instant::now();
    let b = c
        .clone()
        .create_backup(demo.request(CreateBackupRequest {
            name: "karmada-1".into(),
        }))
        .await
        .expect("backup started")
        .into_inner();
    let b = eventually(Duration::from_secs(120), "the backup done", || {
        let (mut c, req) = (
            c.clone(),
            demo.request(GetBackupRequest {
                name: "karmada-1".into(),
                backup: b.name.clone(),
            }),
        );
        async move {
            let b = c.get_backup(req).await.ok()?.into_inner();
            (b.phase != "Running").then_some(b)
        }
    })
    .await;
    let took = started.elapsed();
    assert_eq!(b.phase, "Completed", "{b:?}");
    assert!(
        b.resources.get("deployments.apps").is_some_and(|n| *n >= 2),
        "{b:?}"
    );
    assert!(
        b.resources.contains_key("clusters.cluster.karmada.io"),
        "{b:?}"
    );
    println!(
        "backup of karmada-1: {} objects of {} resources, {} bytes, in {took:?}",
        b.objects,
        b.resources.len(),
        b.size_bytes
    );

    let direct = demo.direct("karmada-1");
    demo.ok(
        &direct,
        &["delete", "propagationpolicy", "web", "-n", "default"],
    );
    demo.ok(&direct, &["delete", "deployment", "web", "-n", "default"]);
    eventually(Duration::from_secs(90), "web gone from member1", || {
        let out = demo.kubectl(member1, &["get", "deployment", "web", "-n", "default"]);
        let gone = String::from_utf8_lossy(&out.stderr).contains("NotFound");
        async move { gone.then_some(()) }
    })
    .await;

    let started = Instant::now();
    let r = c
        .clone()
        .restore_backup(demo.request(RestoreBackupRequest {
            name: "karmada-1".into(),
            backup: b.name.clone(),
            source_instance: String::new(),
        }))
        .await
        .expect("restored")
        .into_inner();
    let restore_took = started.elapsed();
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert_eq!(r.resources.get("deployments.apps"), Some(&1), "{r:?}");
    assert_eq!(
        r.resources.get("propagationpolicies.policy.karmada.io"),
        Some(&1),
        "{r:?}"
    );
    let on_member1 = demo
        .eventually_json(
            Duration::from_secs(90),
            "web back on member1",
            member1,
            &["get", "deployment", "web", "-n", "default", "-o", "json"],
        )
        .await;
    assert_eq!(on_member1["spec"]["replicas"], 2);
    println!(
        "restore into karmada-1: {} created, {} already there, in {restore_took:?}; web on member1 again {:?} after the restore began",
        r.created,
        r.existing,
        started.elapsed()
    );
}
