//! Hibernation of a managed instance with the real karmada-operator: the control plane's
//! requests Kairship reports match its pods' in the host; `kairship ctl instances
//! hibernate --wait` suspends the operator and scales every component but etcd (its data
//! in an emptyDir) to zero, their pods gone; a `kubectl get deploy` through Kairship's
//! proxy is held, wakes it, and answers with the workload made before. The host memory
//! and CPU of the instance's pods (read from their cgroups) awake and asleep, the time to
//! hibernate and each wake's are printed, not asserted.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kairship_test_support::{poll, PROCESS_POLL};
use serde_json::Value;

use crate::ha::ClusterDemo;
use crate::managed::{ctl_ok, proxy_kubeconfig, try_kubectl, NS};

/// Wakes measured, each after a hibernation.
const WAKES: usize = 3;

fn pods(demo: &ClusterDemo, name: &str) -> Vec<Value> {
    let listed = demo.json(&[
        "-n",
        NS,
        "get",
        "pods",
        "-l",
        &format!("app.kubernetes.io/instance={name}"),
    ]);
    listed["items"].as_array().cloned().unwrap_or_default()
}

/// A pod's cgroup directory in hierarchy `kind` (kubelet's cgroupfs layout under the
/// node's root: `kubepods[/burstable|/besteffort]/pod<uid>`).
fn cgroup(kind: &str, uid: &str) -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup")
        .join(kind)
        .join(kairship_realfleet::node::janitor::CGROUP)
        .join("kubepods");
    ["", "burstable", "besteffort"]
        .iter()
        .map(|qos| root.join(qos).join(format!("pod{uid}")))
        .find(|p| p.exists())
}

fn read_u64(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Working set (usage less inactive file pages, as kubelet counts it).
fn working_set(dir: &Path) -> u64 {
    let usage = read_u64(&dir.join("memory.usage_in_bytes"));
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let inactive = stat
        .lines()
        .find_map(|l| l.strip_prefix("total_inactive_file "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    usage.saturating_sub(inactive)
}

/// The instance's pods in the host: how many, their memory, their CPU over 10 s.
struct HostUsage {
    pods: usize,
    memory_mib: f64,
    cpu_millicores: f64,
}

async fn host_usage(demo: &ClusterDemo, name: &str) -> HostUsage {
    let uids: Vec<String> = pods(demo, name)
        .iter()
        .filter_map(|p| p["metadata"]["uid"].as_str().map(String::from))
        .collect();
    let cpu = |uids: &[String]| -> u64 {
        uids.iter()
            .filter_map(|u| cgroup("cpuacct", u))
            .map(|d| read_u64(&d.join("cpuacct.usage")))
            .sum()
    };
    let before = cpu(&uids);
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let used_ns = cpu(&uids).saturating_sub(before);
    // Pods whose cgroup is gone (finished, or deleted and not yet removed from the list)
    // hold nothing on the node.
    let live: Vec<PathBuf> = uids.iter().filter_map(|u| cgroup("memory", u)).collect();
    let memory: u64 = live.iter().map(|d| working_set(d)).sum();
    HostUsage {
        pods: live.len(),
        memory_mib: memory as f64 / (1024.0 * 1024.0),
        cpu_millicores: used_ns as f64 / window.as_nanos() as f64 * 1000.0,
    }
}

/// Kairship's control-plane figures against the requests of the pods kubectl lists.
async fn usage_matches_the_host(demo: &ClusterDemo, name: &str) {
    let checked = poll(Duration::from_secs(120), PROCESS_POLL, || {
        let listed = pods(demo, name);
        // Pods that have not finished, as the host's scheduler keeps room for them.
        let running: Vec<&Value> = listed
            .iter()
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect();
        let phases: Vec<String> = listed
            .iter()
            .map(|p| format!("{}={}", p["metadata"]["name"].as_str().unwrap_or_default(), p["status"]["phase"].as_str().unwrap_or_default()))
            .collect();
        let (mut cpu, mut memory) = (0i128, 0i128);
        for c in running.iter().flat_map(|p| {
            p["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        }) {
            let q = |r: &str| {
                c["resources"]["requests"][r]
                    .as_str()
                    .and_then(|q| kairship::quantity::parse(q).ok())
                    .map_or(0, |m| m.0)
            };
            cpu += q("cpu");
            memory += q("memory");
        }
        let shown = ctl_ok(demo, &["instances", "get", name]);
        let plane = shown["status"]["controlPlane"].clone();
        let parse = |v: &Value| {
            v.as_str()
                .and_then(|q| kairship::quantity::parse(q).ok())
                .map_or(-1, |m| m.0)
        };
        let matched = plane["pods"].as_i64() == Some(running.len() as i64)
            && parse(&plane["cpuRequests"]) == cpu
            && parse(&plane["memoryRequests"]) == memory;
        let seen = format!(
            "Kairship {plane}; host: {} pods not finished of {phases:?}, cpu {cpu}m/1000, memory {memory}m/1000",
            running.len()
        );
        async move { matched.then_some(seen.clone()).ok_or(seen) }
    })
    .await;
    match checked {
        Ok(seen) => println!("control plane usage matches the host: {seen}"),
        Err(seen) => panic!("control plane usage does not match the host: {seen}"),
    }
}

/// What Kairship's replicas logged about `name`'s hibernation and its requests.
fn kairship_log(demo: &ClusterDemo, name: &str) -> String {
    let logs = demo.kubectl(&[
        "-n",
        NS,
        "logs",
        "-l",
        "app.kubernetes.io/name=kairship",
        "--prefix",
        "--tail=2000",
    ]);
    logs.lines()
        .filter(|l| l.contains(name))
        .filter(|l| {
            ["hibernat", "wak", "held", "actor", "Unavailable", "503"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub async fn asleep_and_woken_by_kubectl(demo: &ClusterDemo, name: &str) {
    usage_matches_the_host(demo, name).await;
    let awake = host_usage(demo, name).await;
    let proxy = proxy_kubeconfig(demo);
    let mut wakes = Vec::new();
    for round in 0..WAKES {
        let started = Instant::now();
        let slept = ctl_ok(demo, &["instances", "hibernate", name, "--wait"]);
        let took = started.elapsed();
        assert_eq!(slept["status"]["phase"], "Hibernated", "{slept}");
        let h = &slept["status"]["hibernation"];
        assert!(
            h["etcd"].as_str().is_some_and(|e| e.contains("emptyDir")),
            "{h}"
        );
        let karmada = demo.json(&["-n", NS, "get", "karmada", name]);
        assert_eq!(
            karmada["spec"]["suspend"], true,
            "the operator is suspended"
        );
        let deployments = demo.json(&[
            "-n",
            NS,
            "get",
            "deployments",
            "-l",
            &format!("app.kubernetes.io/instance={name}"),
        ]);
        for d in deployments["items"].as_array().into_iter().flatten() {
            assert_eq!(d["spec"]["replicas"], 0, "{}", d["metadata"]["name"]);
        }
        // Their pods stop (each within its grace period); etcd's stays.
        let left = poll(Duration::from_secs(120), PROCESS_POLL, || {
            let names: Vec<String> = pods(demo, name)
                .iter()
                .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
                .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
                .collect();
            let only_etcd = names.iter().all(|n| n.contains("-etcd-"));
            async move { only_etcd.then_some(names.clone()).ok_or(names) }
        })
        .await
        .unwrap_or_else(|left| panic!("pods left after hibernation: {left:?}"));
        println!(
            "hibernation {}: {:.1}s to Hibernated ({:.1}s by the leader's count); pods left {left:?}",
            round + 1,
            took.as_secs_f64(),
            h["lastHibernateSeconds"].as_f64().unwrap_or_default()
        );
        if round == 0 {
            let asleep = host_usage(demo, name).await;
            println!(
                "host usage of {name}'s control plane: awake {} pods, {:.0} MiB, {:.0}m CPU; hibernated {} pods, {:.0} MiB, {:.0}m CPU",
                awake.pods, awake.memory_mib, awake.cpu_millicores,
                asleep.pods, asleep.memory_mib, asleep.cpu_millicores
            );
        }
        // kubectl through Kairship: held while the instance wakes, then answered with the
        // workload made before it slept.
        let started = Instant::now();
        let got = try_kubectl(
            &proxy,
            &[
                "-v=6",
                "get",
                "deployments",
                "-n",
                "managed-app",
                "-o",
                "name",
            ],
            None,
        );
        let waited = started.elapsed();
        let got = got.unwrap_or_else(|e| {
            panic!(
                "kubectl through Kairship after {waited:?}: {e}\nKairship's log of {name}:\n{}",
                kairship_log(demo, name)
            )
        });
        assert_eq!(got.trim(), "deployment.apps/web", "{got}");
        println!(
            "wake {}: kubectl answered after {:.1}s",
            round + 1,
            waited.as_secs_f64()
        );
        wakes.push(waited);
        let shown = ctl_ok(demo, &["instances", "get", name]);
        let h = &shown["status"]["hibernation"];
        // proto3 JSON writes an int64 as a string.
        let wakes = h["wakes"].as_str().and_then(|w| w.parse::<i64>().ok());
        assert_eq!(wakes, Some(round as i64 + 1), "{h}");
        assert!(
            h["reason"].as_str().is_some_and(|r| r.contains("request")),
            "{h}"
        );
    }
    wakes.sort();
    println!(
        "time to wake by kubectl over {WAKES}: p50 {:.1}s, p99 {:.1}s",
        percentile(&wakes, 0.5).as_secs_f64(),
        percentile(&wakes, 0.99).as_secs_f64()
    );
}
