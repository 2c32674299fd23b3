//! Faults on the real fleet: a Karmada CRD deleted and restored, failover by
//! ClusterTaintPolicy, and an instance's karmada-apiserver killed and started again.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;

use crate::common::eventually;
use crate::Demo;

/// A Karmada CRD deleted on a real karmada-apiserver: karmada-1 is Degraded naming it,
/// kubectl through the proxy hears what the instance says, and with the CRD applied
/// again it is Running.
pub(crate) async fn crd_deleted_and_restored(demo: &Demo, proxy1: &Path) {
    let proxy1 = proxy1.to_path_buf();
    const CRD: &str = "clusteroverridepolicies.policy.karmada.io";
    let direct1 = demo.direct("karmada-1");
    demo.ok(&direct1, &["delete", "crd", CRD]);
    eventually(Duration::from_secs(60), "karmada-1 Degraded", || async {
        let mut c = InstanceServiceClient::new(demo.channel().await);
        let status = c
            .get_instance(demo.request(GetInstanceRequest {
                name: "karmada-1".into(),
            }))
            .await
            .ok()?
            .into_inner()
            .status?;
        let named = status
            .conditions
            .iter()
            .any(|c| c.r#type == "Ready" && c.reason == "Degraded" && c.message.contains(CRD));
        (status.phase == "Degraded" && named).then_some(())
    })
    .await;
    // Not an empty list from the cache: the instance's 404 (or, with kubectl's discovery
    // cache refreshed, an unknown resource type).
    let gone = demo.kubectl(&proxy1, &["get", "clusteroverridepolicies"]);
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(
        !gone.status.success()
            && (said.contains("could not find the requested resource")
                || said.contains("doesn't have a resource type")),
        "{said}"
    );
    let crd_file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/karmada/crds/policy.karmada.io_clusteroverridepolicies.yaml"
    );
    demo.ok(&direct1, &["apply", "-f", crd_file]);
    eventually(
        Duration::from_secs(150),
        "karmada-1 Running with the CRD back",
        || async { (demo.phase("karmada-1").await == "Running").then_some(()) },
    )
    .await;
    demo.ok(&proxy1, &["get", "clusteroverridepolicies"]);
}

/// Failover as Karmada 1.18 does it, against its real taint policy controller and taint
/// manager (the same scenario runs on the simulator in tests/api/placement.rs).
pub(crate) async fn failover(
    demo: &Demo,
    kubectl: &(dyn Fn(&[&str]) -> Output + Sync),
    admin: &str,
) {
    kairship_test_support::scenarios::failover::only_a_taint_policy_evicts(
        kubectl,
        admin,
        WorkloadServiceClient::new(demo.channel().await),
        |r| demo.request(r),
        demo.dir.path(),
        Duration::from_secs(90),
    )
    .await;
}

/// Killing karmada-2's apiserver shows it Unreachable; karmada-1 keeps serving.
pub(crate) async fn instance_killed(demo: &Demo, proxy1: &Path, admin: &str) {
    let fault = |method: &'static str| {
        let url = format!("{admin}/faults/karmada-2");
        async move {
            let mut c = Command::new("curl");
            c.args([
                "-sS",
                "-f",
                "-X",
                method,
                &url,
                "-H",
                "content-type: application/json",
                "-d",
                r#"{"mode":"down"}"#,
            ]);
            c.output().expect("curl")
        }
    };
    assert!(fault("POST").await.status.success());
    eventually(Duration::from_secs(30), "karmada-2 Unreachable", || async {
        (demo.phase("karmada-2").await == "Unreachable").then_some(())
    })
    .await;
    demo.ok(proxy1, &["get", "deployments", "-A"]);
    assert_eq!(demo.phase("karmada-1").await, "Running");
    assert!(fault("DELETE").await.status.success());
    eventually(
        Duration::from_secs(90),
        "karmada-2 Running again",
        || async { (demo.phase("karmada-2").await == "Running").then_some(()) },
    )
    .await;
}
