//! Adopting a workload that already runs in a member (issue 41), on real pods: a
//! Deployment and its ConfigMap made on the host directly, then promoted through `kairship
//! ctl promote` (the host joined to karmada-1 by `sessions`).

use std::path::Path;
use std::time::{Duration, Instant};

use kairship_test_support::{holds, PROCESS_POLL};
use serde_json::{json, Value};

use crate::ha::ClusterDemo;
use crate::managed::{ctl, kubectl_with};
use crate::sessions::{CLUSTER, INSTANCE};

const ADOPTED_NS: &str = "adopted";

fn pod_uids(demo: &ClusterDemo) -> Vec<(String, String)> {
    let pods = demo.json(&["-n", ADOPTED_NS, "get", "pods", "-l", "app=legacy"]);
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A Deployment and its ConfigMap made on the host directly, then promoted through
/// `kairship ctl promote`: Karmada takes them over in place (the pod keeps its UID) and the
/// workload view shows them placed on the host under the new policy.
pub async fn adopt_a_running_workload(demo: &ClusterDemo, karmada: &Path) {
    let started = Instant::now();
    let host = demo.dir.path().join("real/host/admin.kubeconfig");
    let objects = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ADOPTED_NS}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "legacy-settings", "namespace": ADOPTED_NS},
               "data": {"greeting": "hello"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "legacy", "namespace": ADOPTED_NS, "labels": {"app": "legacy"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "legacy"}},
                        "template": {"metadata": {"labels": {"app": "legacy"}},
                                     "spec": {"containers": [{"name": "legacy",
                                        "image": kairship_realfleet::node::BUSYBOX_IMAGE,
                                        "imagePullPolicy": "Never",
                                        "command": ["/bin/sh", "-c", "exec sleep 100000"]}]}}}}),
    ];
    for obj in &objects {
        kubectl_with(&host, &["apply", "-f", "-"], Some(obj));
    }
    let mut before = Vec::new();
    assert!(
        holds(Duration::from_secs(120), PROCESS_POLL, || {
            before = pod_uids(demo);
            before.len() == 1
        })
        .await,
        "the host's own Deployment did not run: {}",
        demo.kubectl(&["-n", ADOPTED_NS, "get", "pods", "-o", "wide"])
    );
    let out = ctl(
        demo,
        &[
            "promote",
            INSTANCE,
            "legacy",
            "-C",
            CLUSTER,
            "-n",
            ADOPTED_NS,
            "--with",
            "ConfigMap/legacy-settings",
            "-o",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "kairship ctl promote: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let promoted: Value = serde_json::from_slice(&out.stdout).expect("promote's JSON");
    assert_eq!(promoted["policyName"], "legacy-deployment", "{promoted}");
    // Karmada takes the running Deployment over: applied and healthy on the host, under
    // the new policy, as the workload view shows.
    let mut seen = Value::Null;
    let placed = holds(Duration::from_secs(120), PROCESS_POLL, || {
        let out = ctl(
            demo,
            &[
                "workloads",
                "get",
                INSTANCE,
                "legacy",
                "-n",
                ADOPTED_NS,
                "-o",
                "json",
            ],
        );
        seen = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let applied = seen["placement"]["aggregatedStatus"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["clusterName"] == CLUSTER && s["applied"] == true);
        let claimed = seen["policies"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == "legacy-deployment" && p["claimed"] == true);
        applied && claimed
    })
    .await;
    assert!(placed, "not taken over by Karmada: {seen}");
    let managed = demo.json(&["-n", ADOPTED_NS, "get", "deployment", "legacy"]);
    assert_eq!(
        managed["metadata"]["labels"]["karmada.io/managed"], "true",
        "{managed}"
    );
    assert_eq!(pod_uids(demo), before, "the pod was restarted or replaced");
    // A second promotion is refused, naming the template.
    let again = ctl(
        demo,
        &[
            "promote", INSTANCE, "legacy", "-C", CLUSTER, "-n", ADOPTED_NS,
        ],
    );
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && err.contains("already"), "{err}");
    // The policy preserves what it adopted: deleting it from the instance leaves the
    // host's Deployment running; then it goes from both.
    for (kind, name) in [
        ("propagationpolicy", "legacy-deployment"),
        ("deployment", "legacy"),
        ("configmap", "legacy-settings"),
    ] {
        kubectl_with(
            karmada,
            &["-n", ADOPTED_NS, "delete", kind, name, "--wait=false"],
            None,
        );
    }
    kubectl_with(
        karmada,
        &["delete", "namespace", ADOPTED_NS, "--wait=false"],
        None,
    );
    kubectl_with(
        &host,
        &["delete", "namespace", ADOPTED_NS, "--wait=false"],
        None,
    );
    println!(
        "promoted a running Deployment (and its ConfigMap) from the host: taken over in place, pod {} kept, in {:.0}s",
        before[0].0,
        started.elapsed().as_secs_f64()
    );
}
