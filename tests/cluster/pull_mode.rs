//! Pull mode end to end (issue 59): `kairship ctl register-command` prints the command a
//! member's administrator runs; `karmadactl register`, run as printed against the host
//! cluster (which has a kubelet-backed node), deploys a real karmada-agent pod there
//! (built from Karmada's module, as the other components are); the agent registers the
//! member with karmada-1, Kairship shows it Ready, a busybox Deployment propagated
//! through Kairship's proxy runs on the node and its trace names the member's Work; then
//! `kairship ctl remove` with the member's kubeconfig takes it all away, as `karmadactl
//! unregister` would: the workload, the Cluster, the agent's RBAC in karmada-1 and the
//! agent itself on the host.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kairship_test_support::{holds, PROCESS_POLL};
use serde_json::{json, Value};

use crate::ha::ClusterDemo;
use crate::managed::{apply, ctl, ctl_ok, try_kubectl};
use crate::sessions::{busybox_on, host_join_kubeconfig, kubeconfig, INSTANCE};

const CLUSTER: &str = "pull";
const NS: &str = "pull-demo";
/// How long the agent has from `karmadactl register` to a Ready member.
const READY_WITHIN: Duration = Duration::from_secs(180);

fn agent_image() -> String {
    format!(
        "kairship.local/karmada/karmada-agent:{}",
        kairship_realfleet::operator::KARMADA_VERSION
    )
}

/// The clusters Kairship lists for karmada-1; `None` while ctl cannot answer.
fn cluster_list(demo: &ClusterDemo) -> Option<Vec<Value>> {
    let out = ctl(demo, &["clusters", INSTANCE, "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let list: Value = serde_json::from_slice(&out.stdout).ok()?;
    list["clusters"].as_array().cloned()
}

/// The `pull` Cluster as Kairship lists it, if it does.
fn listed(demo: &ClusterDemo) -> Option<Value> {
    cluster_list(demo)?
        .into_iter()
        .find(|c| c["metadata"]["name"] == CLUSTER)
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// Whether kubectl with `kubeconfig` finds `args`' object (NotFound is `false`; anything
/// else failing fails the test).
fn exists(kubeconfig: &Path, args: &[&str]) -> bool {
    match try_kubectl(kubeconfig, &[&["get"], args].concat(), None) {
        Ok(_) => true,
        Err(e) if e.contains("NotFound") || e.contains("not found") => false,
        Err(e) => panic!("kubectl get {args:?}: {e}"),
    }
}

/// The agent's last lines, for a failure's message.
fn agent_log(demo: &ClusterDemo) -> String {
    let args = [
        "-n",
        "karmada-system",
        "logs",
        "deploy/karmada-agent",
        "--tail=60",
    ];
    try_kubectl(&demo.host, &args, None).unwrap_or_else(|e| e)
}

pub async fn register_run_and_remove(demo: &ClusterDemo) {
    let started = Instant::now();
    let e = &demo.endpoints;
    let ca = std::fs::read_to_string(e["ca"].as_str().expect("ca")).expect("ca");
    let http = e["http"].as_str().expect("http");
    let proxy = format!("{http}/apis/kairship.io/v1alpha1/instances/{INSTANCE}/proxy");
    let admin = e["tokens"]["admin"].as_str().expect("admin token");
    let karmada = kubeconfig(demo.dir.path(), "pull-admin.kubeconfig", &proxy, &ca, admin);

    // The command, as a user gets it, run as printed plus the member's side.
    let token = ctl_ok(demo, &["register-command", INSTANCE, "--ttl-hours", "1"]);
    let command = token["registerCommand"].as_str().expect("registerCommand");
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[..2], ["karmadactl", "register"], "{command}");
    let image = agent_image();
    let out = Command::new(crate::bin_dir().join("karmadactl"))
        .args(&words[1..])
        .arg(format!("--kubeconfig={}", demo.host.display()))
        .args(["--cluster-name", CLUSTER, "--karmada-agent-image", &image])
        .args(["--discovery-timeout", "3m"])
        .output()
        .expect("karmadactl runs");
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains("is joined successfully"),
        "karmadactl register: {}{}\nagent pods: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        demo.kubectl(&["-n", "karmada-system", "get", "pods", "-o", "wide"])
    );
    let registered = started.elapsed();

    let ready = holds(READY_WITHIN, PROCESS_POLL, || {
        listed(demo).is_some_and(|c| c["ready"] == true && c["syncMode"] == "Pull")
    })
    .await;
    assert!(
        ready,
        "cluster {CLUSTER:?} not Ready in Kairship within {READY_WITHIN:?}: {:?}\nagent: {}",
        listed(demo),
        agent_log(demo)
    );
    let ready_after = started.elapsed();

    for obj in busybox_on(CLUSTER, NS, "hello", json!({"command": ["sleep", "3600"]})) {
        apply(&karmada, &obj).await;
    }
    let running = holds(Duration::from_secs(120), PROCESS_POLL, || {
        // Not there at first: the agent creates it.
        let args = ["-n", NS, "get", "deployments", "hello", "-o", "json"];
        try_kubectl(&demo.host, &args, None)
            .ok()
            .and_then(|out| serde_json::from_str::<Value>(&out).ok())
            .is_some_and(|d| d["status"]["readyReplicas"] == 1)
    })
    .await;
    assert!(
        running,
        "hello is not running on the node: {}",
        demo.kubectl(&["-n", NS, "get", "deploy,pods", "-o", "wide"])
    );
    // The trace names the member's Work, applied, as Kairship reads it.
    let applied = holds(Duration::from_secs(60), PROCESS_POLL, || {
        let out = ctl(
            demo,
            &[
                "trace",
                INSTANCE,
                "deployment/hello",
                "-n",
                NS,
                "-o",
                "json",
            ],
        );
        let t: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        t["works"].as_array().into_iter().flatten().any(|w| {
            w["cluster"] == CLUSTER
                && w["health"] == "Healthy"
                && w["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Applied" && c["status"] == "True")
        })
    })
    .await;
    assert!(
        applied,
        "the trace shows no applied, healthy Work on {CLUSTER}"
    );
    let workload_after = started.elapsed();

    // Removal through Kairship, with the member's kubeconfig as Kairship's pods reach it.
    let member = host_join_kubeconfig(demo);
    let member = member.display().to_string();
    let out = ctl(
        demo,
        &[
            "remove",
            INSTANCE,
            CLUSTER,
            "--force",
            "--wait",
            "30",
            "--cluster-kubeconfig",
            &member,
            "-o",
            "json",
        ],
    );
    if !out.status.success() {
        let works = try_kubectl(
            &karmada,
            &["get", "works", "-n", "karmada-es-pull", "-o", "yaml"],
            None,
        );
        panic!(
            "kairship ctl remove: {}\nWorks left: {works:?}\nagent: {}",
            String::from_utf8_lossy(&out.stderr),
            agent_log(demo)
        );
    }
    let removed: Value = serde_json::from_slice(&out.stdout).expect("ctl -o json");
    assert!(
        strings(&removed, "workloads").contains(&format!("{NS}/Deployment/hello")),
        "{removed}"
    );
    let cleaned = strings(&removed, "memberCleaned");
    for what in [
        "Deployment karmada-system/karmada-agent",
        "ServiceAccount karmada-system/karmada-agent-sa",
        "Secret karmada-system/karmada-kubeconfig",
        "ClusterRole karmada-agent",
        "ClusterRoleBinding karmada-agent",
    ] {
        assert!(
            cleaned.iter().any(|c| c == what),
            "{what} not cleaned: {removed}"
        );
    }
    let instance_cleaned = strings(&removed, "instanceCleaned");
    assert!(
        instance_cleaned
            .iter()
            .any(|c| c == &format!("ClusterRole system:karmada:{CLUSTER}:agent")),
        "{removed}"
    );
    // Kairship lists what its cache holds: gone there within a tick or two.
    let unlisted = holds(Duration::from_secs(30), PROCESS_POLL, || {
        cluster_list(demo).is_some_and(|l| l.iter().all(|c| c["metadata"]["name"] != CLUSTER))
    })
    .await;
    assert!(unlisted, "{CLUSTER} still listed: {:?}", cluster_list(demo));
    // Nothing of it left, read with karmada-1's own admin kubeconfig: the agent's identity
    // may no longer act there, and the host runs neither the agent nor the workload.
    let direct = demo
        .dir
        .path()
        .join(format!("real/{INSTANCE}/admin.kubeconfig"));
    for gone in [
        vec!["clusterrole", "system:karmada:pull:agent"],
        vec!["clusterrolebinding", "system:karmada:pull:agent"],
        vec![
            "-n",
            "karmada-cluster",
            "role",
            "system:karmada:pull:agent-secret",
        ],
        vec!["namespace", "karmada-es-pull"],
    ] {
        assert!(!exists(&direct, &gone), "karmada-1 keeps {gone:?}");
    }
    let host_clean = holds(Duration::from_secs(120), PROCESS_POLL, || {
        let pods = demo.json(&[
            "-n",
            "karmada-system",
            "get",
            "pods",
            "-l",
            "app=karmada-agent",
        ]);
        pods["items"].as_array().is_some_and(Vec::is_empty)
            && !exists(&demo.host, &["-n", NS, "deployment", "hello"])
    })
    .await;
    assert!(
        host_clean,
        "the host keeps the agent or the workload: {}",
        demo.kubectl(&["get", "pods", "-A", "-o", "wide"])
    );
    for gone in [
        vec!["-n", "karmada-system", "deployment", "karmada-agent"],
        vec!["clusterrole", "karmada-agent"],
        vec!["-n", "karmada-system", "secret", "karmada-kubeconfig"],
    ] {
        assert!(!exists(&demo.host, &gone), "the host keeps {gone:?}");
    }
    // The template goes too, so later steps see the instance as before.
    try_kubectl(&karmada, &["delete", "namespace", NS, "--wait=false"], None)
        .expect("delete the workload's namespace");
    println!(
        "pull mode: karmadactl register as printed in {:.0}s, Ready in Kairship after {:.0}s, workload on the node after {:.0}s, removed with the agent in {:.0}s",
        registered.as_secs_f64(),
        ready_after.as_secs_f64(),
        workload_after.as_secs_f64(),
        (started.elapsed() - workload_after).as_secs_f64()
    );
}
