//! Fleet rollouts through the real karmada-operator: two managed instances of one
//! InstanceClass, created at the previous release, moved to the pinned one by one
//! FleetRollout of the class (the canary backed up, changed and soaked before the second
//! starts); then a class change whose scheduler image cannot be pulled halts at its
//! canary, which is rolled back to the spec it had, Running on its release with its
//! workload still placed, the second instance never touched.

use std::time::{Duration, Instant};

use kairship_test_support::{poll, PROCESS_POLL};
use serde_json::{json, Value};

use crate::ha::ClusterDemo;
use crate::managed::{apply, ctl, ctl_ok, placed_on, NS};

pub const CLASS: &str = "cluster-fleet";
/// The class's second instance, beside `managed::NAME`; only rollouts change it.
pub const SECOND: &str = "team-m2";

fn host_kubeconfig(demo: &ClusterDemo) -> std::path::PathBuf {
    demo.host.clone()
}

/// The class at `version`, with `karmada_spec` (null: none), applied on the host.
pub async fn set_class(demo: &ClusterDemo, version: &str, karmada_spec: Value) {
    let mut spec = json!({"description": "the cluster tier's rollout class",
                          "karmadaVersion": version});
    if !karmada_spec.is_null() {
        spec["karmadaSpec"] = karmada_spec;
    }
    let class = json!({"apiVersion": "kairship.io/v1alpha1", "kind": "InstanceClass",
        "metadata": {"name": CLASS}, "spec": spec});
    apply(&host_kubeconfig(demo), &class).await;
}

/// `kairship ctl instances create NAME --mode managed --class CLASS`, retried while
/// Kairship's cache has not seen the class yet.
pub async fn create(demo: &ClusterDemo, name: &str) -> Value {
    let args = [
        "instances",
        "create",
        name,
        "--mode",
        "managed",
        "--class",
        CLASS,
        "-o",
        "json",
    ];
    poll(Duration::from_secs(60), PROCESS_POLL, || {
        let out = ctl(demo, &args);
        let r = match out.status.success() {
            true => serde_json::from_slice::<Value>(&out.stdout).map_err(|e| e.to_string()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        };
        async move { r }
    })
    .await
    .unwrap_or_else(|e| panic!("kairship ctl {args:?}: {e}"))
}

fn rollout(demo: &ClusterDemo, name: &str) -> Value {
    demo.json(&["get", "fleetrollout", name])
}

/// Starts a rollout of the class: a canary, then the rest, a short soak; its plan.
fn start(demo: &ClusterDemo, name: &str) -> Value {
    let plan = ctl_ok(demo, &["rollouts", "plan", "--class", CLASS]);
    println!("rollout {name}: plan {plan}");
    ctl_ok(
        demo,
        &[
            "rollouts",
            "start",
            name,
            "--class",
            CLASS,
            "--canary",
            "1",
            "--percentages",
            "100",
            "--soak-seconds",
            "20",
            "--progress-deadline-seconds",
            "900",
        ],
    );
    plan
}

/// Waits until the rollout's phase is one of `phases`; its status.
async fn until_phase(demo: &ClusterDemo, name: &str, phases: &[&str], within: Duration) -> Value {
    let mut seen: Vec<String> = Vec::new();
    let got = poll(within, PROCESS_POLL * 2, || {
        let r = rollout(demo, name);
        let line = format!("{} {}", r["status"]["phase"], r["status"]["reason"]);
        if seen.last() != Some(&line) {
            seen.push(line);
        }
        let done = phases.iter().any(|p| r["status"]["phase"] == *p);
        async move { done.then_some(r.clone()).ok_or(r) }
    })
    .await;
    got.unwrap_or_else(|r| {
        panic!(
            "rollout {name} not {phases:?} within {within:?}; seen {seen:#?}\nnow {r:#}\npods: {}\n{}",
            demo.kubectl(&["-n", NS, "get", "pods", "-o", "wide"]),
            demo.log_tail()
        )
    })
}

/// The start time of backup `backup` of `instance`.
fn backup_started(demo: &ClusterDemo, instance: &str, backup: &str) -> String {
    let list = ctl_ok(demo, &["backups", "list", instance]);
    list["backups"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["name"] == backup)
        .and_then(|b| b["started"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("no backup {backup} of {instance}: {list}"))
}

/// Waits until `instance` is Running: a rollout changes Running instances only.
async fn running(demo: &ClusterDemo, instance: &str) {
    let running = poll(Duration::from_secs(300), PROCESS_POLL, || {
        let i = ctl_ok(demo, &["instances", "get", instance]);
        let phase = i["status"]["phase"].clone();
        async move { (phase == "Running").then_some(()).ok_or(phase) }
    })
    .await;
    if let Err(phase) = running {
        panic!("{instance} not Running before the rollout: {phase}");
    }
}

/// The class moved to `to`, and its rollout started (the caller watches the canary).
pub async fn start_upgrade(demo: &ClusterDemo, to: &str) -> Instant {
    running(demo, SECOND).await;
    set_class(demo, to, Value::Null).await;
    let plan = start(demo, "cluster-upgrade");
    // Both releases' CRD tarballs are on the host: their differences are known, and
    // v1.17.1 to v1.18.2 only adds (the reverse would drop overflowAffinities).
    let crd = plan["crdChanges"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["toVersion"] == to)
        .unwrap_or_else(|| panic!("no CRD changes in the plan: {plan}"));
    assert!(crd.get("unknown").is_none_or(|u| u == ""), "{crd}");
    assert!(crd.get("changes").is_none_or(|c| c == &json!([])), "{crd}");
    Instant::now()
}

/// The upgrade rollout Completed, the canary done before the second started.
pub async fn upgrade_completed(demo: &ClusterDemo, first: &str, to: &str, started: Instant) {
    let r = until_phase(
        demo,
        "cluster-upgrade",
        &["Completed", "Halted"],
        Duration::from_secs(900),
    )
    .await;
    let status = &r["status"];
    assert_eq!(status["phase"], "Completed", "{r:#}");
    assert_eq!(
        status["waves"],
        json!([[first], [SECOND]]),
        "the canary is a wave of its own"
    );
    for n in [first, SECOND] {
        assert_eq!(status["instances"][n]["step"], "Done", "{r:#}");
    }
    // Resumable record: the canary's Done came before the second's backup was taken.
    let canary_done = status["instances"][first]["since"]
        .as_str()
        .expect("since")
        .to_string();
    let backup = status["instances"][SECOND]["backup"]
        .as_str()
        .expect("the second instance was backed up first");
    let second_started = backup_started(demo, SECOND, backup);
    assert!(
        canary_done <= second_started,
        "{SECOND} was backed up at {second_started}, before the canary was done at {canary_done}"
    );
    let second = ctl_ok(demo, &["instances", "get", SECOND]);
    assert_eq!(second["status"]["karmadaVersion"], to, "{second}");
    assert_eq!(second["status"]["phase"], "Running", "{second}");
    println!(
        "rollout of class {CLASS} to {to}: {first} then {SECOND} in {:.0}s",
        started.elapsed().as_secs_f64()
    );
}

/// A class change whose scheduler image does not exist halts at the canary `first`,
/// which gets its spec back and runs `version` again with its workload placed; the
/// second instance is never touched.
pub async fn bad_image_halts_at_the_canary(demo: &ClusterDemo, first: &str, version: &str) {
    let bad = "v0.0.0-absent";
    set_class(
        demo,
        version,
        json!({"components": {"karmadaScheduler": {"imageTag": bad}}}),
    )
    .await;
    // The component restarts just before may still have the canary reconnecting.
    running(demo, first).await;
    let started = Instant::now();
    start(demo, "cluster-bad-image");
    let r = until_phase(
        demo,
        "cluster-bad-image",
        &["Halted", "Completed"],
        Duration::from_secs(600),
    )
    .await;
    let status = &r["status"];
    assert_eq!(status["phase"], "Halted", "{r:#}");
    let reason = status["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(first) && reason.contains("karmada-scheduler"),
        "the halt names the canary and the component: {reason}"
    );
    assert_eq!(status["instances"][SECOND]["step"], "Pending", "{r:#}");
    println!(
        "bad image halted at {first} in {:.0}s: {reason}",
        started.elapsed().as_secs_f64()
    );
    // Rolled back: the scheduler runs the release's image again, the instance Running.
    let back = poll(Duration::from_secs(600), PROCESS_POLL * 2, || {
        let r = rollout(demo, "cluster-bad-image");
        let i = ctl_ok(demo, &["instances", "get", first]);
        let step = r["status"]["instances"][first]["step"].clone();
        let ok = step == "RolledBack"
            && i["status"]["phase"] == "Running"
            && i["status"]["karmadaVersion"] == version;
        async move { ok.then_some(()).ok_or((step, i["status"].clone())) }
    })
    .await;
    if let Err(last) = back {
        panic!(
            "{first} not rolled back and Running: {last:#?}\npods: {}",
            demo.kubectl(&["-n", NS, "get", "pods", "-o", "wide"])
        );
    }
    for n in [first, SECOND] {
        let image = scheduler_image(demo, n);
        assert!(image.ends_with(&format!(":{version}")), "{n} runs {image}");
        assert!(!image.contains(bad), "{n} still runs {image}");
    }
    let on = poll(Duration::from_secs(120), PROCESS_POLL, || {
        let on = placed_on(demo);
        async move { (on == ["member1"]).then_some(()).ok_or(on) }
    })
    .await;
    assert!(on.is_ok(), "the workload survives the rollback: {on:?}");
    println!(
        "{first} rolled back, Running at {version}, {:.0}s after the rollout began",
        started.elapsed().as_secs_f64()
    );
    // The class back as it was, so the instances do not drift from it.
    set_class(demo, version, Value::Null).await;
}

/// The image the operator's karmada-scheduler Deployment of `instance` runs.
fn scheduler_image(demo: &ClusterDemo, instance: &str) -> String {
    let d = demo.json(&[
        "-n",
        NS,
        "get",
        "deployment",
        &format!("{instance}-karmada-scheduler"),
    ]);
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The second instance deleted, and gone.
pub async fn delete_second(demo: &ClusterDemo) {
    let out = ctl(demo, &["instances", "delete", SECOND]);
    assert!(
        out.status.success(),
        "deleting {SECOND}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    poll(Duration::from_secs(180), PROCESS_POLL, || {
        let gone = !ctl(demo, &["instances", "get", SECOND]).status.success();
        async move { gone.then_some(()).ok_or(()) }
    })
    .await
    .unwrap_or_else(|()| panic!("{SECOND} not deleted"));
}
