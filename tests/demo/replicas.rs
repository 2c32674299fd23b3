//! `kairship demo --replicas 3`: the demo's process and two `kairship run` processes share
//! the fleet out (each instance recorded for one of them), every instance answers kubectl
//! through the first, a replica killed with SIGKILL loses its instances to the others
//! while they still answer, and stopping the demo stops the replica left.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use kairship_test_support::process::{self, StopOnDrop};
use kairship_test_support::{holds, poll, PROCESS_POLL};
use serde_json::Value;

/// Each instance's recorded owner, read from the host as `kubectl get instances` shows it.
fn owners(host_kubeconfig: &str) -> BTreeMap<String, String> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let out = Command::new(kubectl)
        .args([
            "--kubeconfig",
            host_kubeconfig,
            "get",
            "instances",
            "-o",
            "json",
        ])
        .output()
        .expect("kubectl");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let owner = i["metadata"]["annotations"]["kairship.io/owner"].as_str()?;
            Some((
                i["metadata"]["name"].as_str()?.to_string(),
                owner.to_string(),
            ))
        })
        .collect()
}

fn alive(pid: u64) -> bool {
    // A zombie (state Z) has ended; only its parent has not reaped it yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split_whitespace().nth(2).is_none_or(|state| state != "Z"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_the_fleet_and_a_killed_ones_instances_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args([
                "demo",
                "--replicas",
                "3",
                "--instances",
                "4",
                "--clusters",
                "1",
                "--grpc-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
                "--probes-addr",
                "127.0.0.1:0",
                "--state-dir",
            ])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("kairship demo starts"),
    );
    let path = dir.path().join("endpoints.json");
    let endpoints = process::endpoints(&mut demo.0, &path, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("kairship demo --replicas 3: {e}"));
    let others = endpoints["replicas"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(others.len(), 2, "{endpoints}");
    let host = endpoints["host_kubeconfig"]
        .as_str()
        .expect("host")
        .to_string();
    let before = owners(&host);
    println!("owners: {before:?}");
    assert_eq!(before.len(), 4, "every instance owned: {before:?}");
    let distinct: std::collections::BTreeSet<&String> = before.values().collect();
    assert!(distinct.len() >= 2, "shared out: {before:?}");
    assert!(
        distinct
            .iter()
            .all(|o| ["demo-1", "demo-2", "demo-3"].contains(&o.as_str())),
        "{before:?}"
    );
    // A replica in a process of its own that owns something, killed outright.
    let victim = others
        .iter()
        .find(|r| {
            before
                .values()
                .any(|o| Some(o.as_str()) == r["name"].as_str())
        })
        .expect("a child replica owns an instance");
    let (name, pid) = (
        victim["name"].as_str().expect("name").to_string(),
        victim["pid"].as_u64().expect("pid"),
    );
    let moved: Vec<String> = before
        .iter()
        .filter(|(_, o)| **o == name)
        .map(|(i, _)| i.clone())
        .collect();
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let after = poll(Duration::from_secs(90), PROCESS_POLL, || {
        let now = owners(&host);
        let done = moved.iter().all(|i| now.get(i).is_some_and(|o| *o != name));
        async move {
            match done {
                true => Ok(now),
                false => Err(now),
            }
        }
    })
    .await
    .unwrap_or_else(|now| panic!("{name}'s instances {moved:?} never moved: {now:?}"));
    println!("{name} killed: {moved:?} moved, owners now {after:?}");
    // Every instance, the moved ones too, answers kubectl through the first replica.
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    for i in endpoints["instances"].as_array().expect("instances") {
        let kubeconfig = i["kubeconfig"].as_str().expect("kubeconfig");
        let answered = holds(Duration::from_secs(30), PROCESS_POLL, || {
            let out = Command::new(&kubectl)
                .args(["--kubeconfig", kubeconfig, "get", "clusters", "-o", "name"])
                .output()
                .expect("kubectl");
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("member1")
        })
        .await;
        assert!(answered, "{} through the first replica", i["name"]);
    }
    // Stopping the demo stops the replica left.
    let left = others
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .find(|p| *p != pid)
        .expect("the other child");
    let status = process::stop(&mut demo.0, Duration::from_secs(60));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let gone = holds(Duration::from_secs(30), PROCESS_POLL, || !alive(left)).await;
    assert!(gone, "replica pid {left} outlived the demo");
}
