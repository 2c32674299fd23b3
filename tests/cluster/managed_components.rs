//! A managed instance's control plane through Kairship (issue 39): each component
//! karmada-operator runs for it listed with its readiness and health, a component's log
//! read, a restart asked for through `kairship ctl` that replaces its pods, a component
//! made to crash-loop degrading the instance (naming it) until it is rolled back, its
//! replicas raised to 2 and back through `kairship ctl instances update --replicas`, its
//! leaf certificates renewed (the serving certificate new, same CA) with the instance
//! Running on them; an unknown component and an External instance refused, named.

use std::time::{Duration, Instant};

use kairship_test_support::{holds, PROCESS_POLL};
use serde_json::Value;

use crate::ha::ClusterDemo;
use crate::managed::{ctl, ctl_ok};

fn components(demo: &ClusterDemo, name: &str) -> Vec<Value> {
    let out = ctl(demo, &["instances", "components", name, "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["components"].as_array().cloned().unwrap_or_default()
}

fn pod_names(c: &Value) -> Vec<String> {
    c["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect()
}

pub async fn health_logs_and_restart(demo: &ClusterDemo, name: &str) {
    let started = Instant::now();
    let mut seen = Vec::new();
    let healthy = holds(Duration::from_secs(120), PROCESS_POLL, || {
        seen = components(demo, name);
        seen.len() >= 5
            && seen
                .iter()
                .all(|c| c["health"] == "Healthy" && c["readyReplicas"] == c["replicas"])
    })
    .await;
    assert!(healthy, "components not all Healthy: {seen:#?}");
    let named = |part: &str| {
        seen.iter()
            .find(|c| c["name"].as_str().is_some_and(|n| n.contains(part)))
            .cloned()
            .unwrap_or_else(|| panic!("no component named *{part}*: {seen:#?}"))
    };
    assert_eq!(named("etcd")["kind"], "StatefulSet");
    let scheduler = named("scheduler");
    let component = scheduler["name"].as_str().unwrap_or_default().to_string();
    assert_eq!(scheduler["kind"], "Deployment");
    assert!(
        scheduler["images"]
            .as_array()
            .is_some_and(|i| !i.is_empty()),
        "{scheduler}"
    );

    // Its log, through Kairship from the host.
    let out = ctl(
        demo,
        &[
            "instances",
            "component-logs",
            name,
            &component,
            "--tail",
            "20",
        ],
    );
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "component-logs: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A restart replaces its pods, and it comes back Healthy.
    let before = pod_names(&scheduler);
    let restarted = ctl_ok(demo, &["instances", "restart-component", name, &component]);
    assert_eq!(restarted["name"], component.as_str(), "{restarted}");
    let mut now = Value::Null;
    let replaced = holds(Duration::from_secs(180), PROCESS_POLL, || {
        now = components(demo, name)
            .into_iter()
            .find(|c| c["name"] == component.as_str())
            .unwrap_or_default();
        let pods = pod_names(&now);
        now["health"] == "Healthy" && !pods.is_empty() && pods.iter().all(|p| !before.contains(p))
    })
    .await;
    assert!(replaced, "restart did not replace {before:?}: {now:#}");

    crash_loop_degrades_the_instance(demo, name, &scheduler, &component).await;
    scaled_through_ctl(demo, name, &component).await;

    // Refusals name what is wrong.
    let out = ctl(
        demo,
        &["instances", "restart-component", name, "no-such-thing"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no component") && err.contains(&component),
        "{err}"
    );
    let out = ctl(demo, &["instances", "components", "karmada-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("External"), "{err}");
    println!(
        "{} components of {name} Healthy; {component}'s log read and its pods replaced by a restart, in {:.0}s",
        seen.len(),
        started.elapsed().as_secs_f64()
    );
}

/// The scheduler given a flag it refuses crash-loops in its new pod: the instance turns
/// Degraded naming the component, and Running again once the rollout is undone.
async fn crash_loop_degrades_the_instance(
    demo: &ClusterDemo,
    name: &str,
    scheduler: &Value,
    component: &str,
) {
    let started = Instant::now();
    let deployment = scheduler["pods"][0]["name"]
        .as_str()
        .and_then(|p| p.rsplitn(3, '-').nth(2))
        .unwrap_or_else(|| panic!("no pod to name the Deployment: {scheduler:#}"))
        .to_string();
    let ns = crate::managed::NS;
    let patch = r#"[{"op":"add","path":"/spec/template/spec/containers/0/command/-","value":"--no-such-flag"}]"#;
    demo.kubectl(&[
        "-n",
        ns,
        "patch",
        "deployment",
        &deployment,
        "--type=json",
        "-p",
        patch,
    ]);
    let get = || {
        let out = ctl(demo, &["instances", "get", name, "-o", "json"]);
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default()
    };
    let mut seen = Value::Null;
    let degraded = holds(Duration::from_secs(150), PROCESS_POLL, || {
        seen = get();
        let (phase, message) = crate::managed::phase_and_message(&seen);
        phase == "Degraded"
            && message.contains(&format!("component {component}"))
            && message.contains("CrashLoopBackOff")
    })
    .await;
    assert!(
        degraded,
        "{component} crash-looping did not degrade {name}: {seen:#}\n{}",
        demo.kubectl(&["-n", ns, "get", "pods", "-o", "wide"])
    );
    let took = started.elapsed();
    demo.kubectl(&["-n", ns, "rollout", "undo", "deployment", &deployment]);
    let recovered = holds(Duration::from_secs(150), PROCESS_POLL, || {
        seen = get();
        seen["status"]["phase"] == "Running"
    })
    .await;
    assert!(recovered, "{name} not Running after the rollback: {seen:#}");
    // Both changes are Events on the Instance, as `kubectl describe instance` lists them,
    // written by Kairship's service account (the chart's `-events` Role).
    let events = || {
        let out = demo.kubectl(&[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            &format!("involvedObject.kind=Instance,involvedObject.name={name}"),
            "-o",
            "json",
        ]);
        serde_json::from_str::<Value>(&out).unwrap_or_default()
    };
    let mut listed = Value::Null;
    let both = holds(Duration::from_secs(30), PROCESS_POLL, || {
        listed = events();
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let has = |reason: &str, type_: &str, text: &str| {
            items.iter().any(|e| {
                e["reason"] == reason
                    && e["type"] == type_
                    && e["message"].as_str().is_some_and(|m| m.contains(text))
            })
        };
        has("Degraded", "Warning", &format!("component {component}"))
            && has("Running", "Normal", "to Running")
    })
    .await;
    assert!(both, "no Degraded and Running events on {name}: {listed:#}");
    println!(
        "{component} crash-looping: {name} Degraded naming it after {:.0}s, Running again {:.0}s after the rollback",
        took.as_secs_f64(),
        (started.elapsed() - took).as_secs_f64()
    );
}

/// `--replicas karmadaScheduler=2`: karmada-operator runs two ready schedulers; back to 1.
async fn scaled_through_ctl(demo: &ClusterDemo, name: &str, component: &str) {
    let started = Instant::now();
    let out = ctl(demo, &["instances", "update", name, "--replicas", "etcd=2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("odd count"), "{err}");
    let mut now = Value::Null;
    for n in [2, 1] {
        let replicas = format!("karmadaScheduler={n}");
        ctl_ok(
            demo,
            &["instances", "update", name, "--replicas", &replicas],
        );
        let scaled = holds(Duration::from_secs(240), PROCESS_POLL, || {
            now = components(demo, name)
                .into_iter()
                .find(|c| c["name"] == component)
                .unwrap_or_default();
            now["replicas"] == n
                && now["readyReplicas"] == n
                && pod_names(&now).len() == n as usize
                && now["health"] == "Healthy"
        })
        .await;
        assert!(scaled, "{component} not at {n} ready replicas: {now:#}");
    }
    println!(
        "{component} scaled to 2 ready replicas and back to 1 through ctl in {:.0}s",
        started.elapsed().as_secs_f64()
    );
}

/// The operator Secret's apiserver.crt: (notBefore, public key).
fn apiserver_leaf(demo: &ClusterDemo, name: &str) -> (i64, Vec<u8>) {
    use base64::Engine;
    let b64 = demo.kubectl(&[
        "-n",
        crate::managed::NS,
        "get",
        "secret",
        &format!("{name}-karmada-cert"),
        "-o",
        "jsonpath={.data.apiserver\\.crt}",
    ]);
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .expect("base64");
    let (_, p) = x509_parser::pem::parse_x509_pem(&pem).expect("pem");
    let c = p.parse_x509().expect("x509");
    (
        c.validity().not_before.timestamp(),
        c.public_key().raw.to_vec(),
    )
}

/// `renew-certificates` against the real operator: refused while the operator applies
/// the last change, then the Secret's leaves re-signed (same key, issued now) and
/// karmada-apiserver rolled onto them. The whole roll is not awaited: on this one-node
/// cluster the surge pods of every component at once do not all fit (kube-controller-
/// manager's stays Pending), which Kairship reports as Upgrading, naming it; so this runs
/// last, before the instance is deleted.
pub async fn certificates_renewed(demo: &ClusterDemo, name: &str) {
    let started = Instant::now();
    let before = apiserver_leaf(demo, name);
    let apiserver = |demo: &ClusterDemo| {
        components(demo, name)
            .into_iter()
            .find(|c| c["name"] == "karmada-apiserver")
            .unwrap_or_default()
    };
    let old_pods = pod_names(&apiserver(demo));
    // Refused, naming why, while karmada-operator still applies the last change (its
    // workflow would write back the certificates it loaded): retried until it is done.
    let mut r = Value::Null;
    let mut refusal = String::new();
    let accepted = holds(Duration::from_secs(180), PROCESS_POLL, || {
        let out = ctl(
            demo,
            &["instances", "renew-certificates", name, "-o", "json"],
        );
        match out.status.success() {
            true => r = serde_json::from_slice(&out.stdout).unwrap_or_default(),
            false => refusal = String::from_utf8_lossy(&out.stderr).into_owned(),
        }
        out.status.success() || !refusal.contains("is applying a change")
    })
    .await;
    assert!(accepted && r.is_object(), "renewal refused: {refusal}");
    assert_eq!(r["certificates"].as_array().map(Vec::len), Some(5), "{r:#}");
    assert!(
        r["rolled"].as_array().is_some_and(|c| {
            c.iter().any(|c| c == "karmadaAPIServer") && !c.iter().any(|c| c == "etcd")
        }),
        "{r:#}"
    );
    let after = apiserver_leaf(demo, name);
    assert!(
        after.0 > before.0,
        "apiserver.crt not re-issued: {before:?} -> {after:?}"
    );
    assert_eq!(after.1, before.1, "apiserver.crt's key changed");
    let mut now = Value::Null;
    let rolled = holds(Duration::from_secs(300), PROCESS_POLL, || {
        now = apiserver(demo);
        let pods = pod_names(&now);
        !pods.is_empty()
            && pods.iter().all(|p| !old_pods.contains(p))
            && now["readyReplicas"] == now["replicas"]
    })
    .await;
    assert!(
        rolled,
        "karmada-apiserver not rolled onto the renewed certificates: {now:#}\n{}",
        demo.kubectl(&["-n", crate::managed::NS, "get", "pods", "-o", "wide"])
    );
    // The operator kept the renewal through its workflow.
    let kept = apiserver_leaf(demo, name);
    assert_eq!(kept, after, "the operator wrote back other certificates");
    println!(
        "{name}'s certificates renewed and karmada-apiserver rolled onto them in {:.0}s",
        started.elapsed().as_secs_f64()
    );
}
