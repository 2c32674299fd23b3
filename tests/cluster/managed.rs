//! A managed instance through the real karmada-operator on the node, as a user drives it
//! with `kairship ctl`: created at the previous Karmada minor from images imported under
//! one registry and a CRD tarball Kairship serves (the node has no way out); Provisioning
//! with the operator's own words, then Running once its admin kubeconfig answers from the
//! in-cluster Service; a real member joined through Kairship's proxy and a workload placed
//! on it; hibernated and woken by kubectl through Kairship (`managed_hibernation`);
//! upgraded to the pinned release (Upgrading from/to, then Running on the new
//! images, the workload still placed); a failure (a CRD tarball that does not exist) shown
//! with the operator's message and fixed by an update; deleted, with nothing left but the
//! namespace. Timings are printed, not asserted. The upgrade is a FleetRollout of the
//! instance's class (`managed_rollouts`).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kairship_test_support::{holds, poll, PROCESS_POLL};
use serde_json::{json, Value};

use crate::ha::ClusterDemo;
use crate::{run, stdout};

const NAME: &str = "team-m";
pub(crate) const NS: &str = "kairship-system";
const PREVIOUS: &str = kairship_realfleet::operator::PREVIOUS_VERSION;
const CURRENT: &str = kairship_realfleet::operator::KARMADA_VERSION;

pub(crate) fn ctl(demo: &ClusterDemo, args: &[&str]) -> std::process::Output {
    kairship_test_support::process::ctl(env!("CARGO_BIN_EXE_kairship"), demo.dir.path(), args)
}

pub(crate) fn ctl_ok(demo: &ClusterDemo, args: &[&str]) -> Value {
    kairship_test_support::process::ctl_json(env!("CARGO_BIN_EXE_kairship"), demo.dir.path(), args)
}

fn instance(demo: &ClusterDemo) -> Option<Value> {
    let out = ctl(demo, &["instances", "get", NAME, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

pub(crate) fn phase_and_message(i: &Value) -> (String, String) {
    let phase = i["status"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let message = i["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["message"].as_str())
        .collect::<Vec<_>>()
        .join("; ");
    (phase, message)
}

/// Polls the Instance until `done` holds, recording each (phase, message) seen.
async fn watch_until(
    demo: &ClusterDemo,
    what: &str,
    within: Duration,
    seen: &mut Vec<(String, String)>,
    done: impl Fn(&Value) -> bool,
) -> Duration {
    let started = Instant::now();
    let reached = holds(within, PROCESS_POLL, || {
        let i = instance(demo);
        if let Some(pm) = i.as_ref().map(phase_and_message) {
            if seen.last() != Some(&pm) {
                seen.push(pm);
            }
        }
        i.as_ref().is_some_and(&done)
    })
    .await;
    if !reached {
        panic!(
            "{what}: not within {within:?}; seen {seen:#?}\noperator: {}\npods: {}\n{}",
            demo.kubectl(&["-n", NS, "get", "karmada", NAME, "-o", "yaml"]),
            demo.kubectl(&["-n", NS, "get", "pods", "-o", "wide"]),
            demo.log_tail()
        );
    }
    started.elapsed()
}

fn running_at(version: &'static str) -> impl Fn(&Value) -> bool {
    move |i| i["status"]["phase"] == "Running" && i["status"]["karmadaVersion"] == version
}

/// `kubectl apply` through Kairship's proxy, retried for up to a minute: right after the
/// operator's Ready the metrics adapter's APIServices may not be Available yet, and
/// kubectl's schema download answers 503 until they are (a user would retry too).
pub(crate) async fn apply(kubeconfig: &std::path::Path, obj: &Value) {
    // Each try downloads the schema: retried less often than a read.
    let applied = poll(Duration::from_secs(60), PROCESS_POLL * 4, || {
        let tried = try_kubectl(kubeconfig, &["apply", "-f", "-"], Some(obj));
        if let Err(e) = &tried {
            println!("  kubectl apply retried: {}", e.trim());
        }
        async move { tried }
    })
    .await;
    if let Err(e) = applied {
        panic!("kubectl apply {obj}: {e}");
    }
}

/// kubectl with a kubeconfig file, `stdin` piped in when given.
pub(crate) fn kubectl_with(
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: Option<&Value>,
) -> String {
    try_kubectl(kubeconfig, args, stdin).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
}

pub(crate) fn try_kubectl(
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: Option<&Value>,
) -> Result<String, String> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let mut cmd = Command::new(kubectl);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl");
    if let Some(body) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(body.to_string().as_bytes())
            .expect("write stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl");
    if out.status.success() {
        Ok(stdout(&out))
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The images the operator's pods of this instance run.
fn component_images(demo: &ClusterDemo) -> Vec<String> {
    let pods = demo.json(&[
        "-n",
        NS,
        "get",
        "pods",
        "-l",
        &format!("app.kubernetes.io/instance={NAME}"),
    ]);
    let mut images: Vec<String> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .flat_map(|p| {
            p["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["image"].as_str().map(String::from))
        .collect();
    images.sort();
    images.dedup();
    images
}

/// A kubeconfig for the managed instance through Kairship's proxy, as the admin.
pub(crate) fn proxy_kubeconfig(demo: &ClusterDemo) -> std::path::PathBuf {
    let e = &demo.endpoints;
    let ca = std::fs::read_to_string(e["ca"].as_str().expect("ca")).expect("ca");
    let server = format!(
        "{}/apis/kairship.io/v1alpha1/instances/{NAME}/proxy",
        e["http"].as_str().expect("http")
    );
    let token = e["tokens"]["admin"].as_str().expect("token");
    let path = demo.dir.path().join(format!("{NAME}.kubeconfig"));
    std::fs::write(
        &path,
        kairship_wire::kubeconfig::build(NAME, &server, &ca, token).to_string(),
    )
    .expect("write kubeconfig");
    path
}

/// A member of the real fleet, as the node's pods reach it: its Cluster and Secret.
fn member_join(demo: &ClusterDemo) -> Vec<Value> {
    let kc: Value = serde_json::from_str(
        &std::fs::read_to_string(
            demo.dir
                .path()
                .join("real/karmada-1-member1/admin.kubeconfig"),
        )
        .expect("member kubeconfig"),
    )
    .expect("kubeconfig JSON");
    let cluster = &kc["clusters"][0]["cluster"];
    let port = cluster["server"]
        .as_str()
        .and_then(|s| s.rsplit_once(':'))
        .map(|(_, p)| p.to_string())
        .expect("member port");
    let url = format!("https://{}:{port}", kairship_realfleet::node::net::HOST_IP);
    let token = kc["users"][0]["user"]["token"].as_str().expect("token");
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(token);
    let ca = cluster["certificate-authority-data"].as_str().expect("ca");
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "member1", "namespace": "karmada-cluster"},
               "data": {"token": b64, "caBundle": ca}}),
        json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "member1"},
               "spec": {"syncMode": "Push", "apiEndpoint": url,
                        "secretRef": {"namespace": "karmada-cluster", "name": "member1"}}}),
    ]
}

fn workload() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "managed-app"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "managed-app", "labels": {"app": "web"}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": "web", "namespace": "managed-app"},
               "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                        "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}}),
    ]
}

/// The clusters Karmada placed the workload on, as Kairship's WorkloadService reports
/// them (from its caches) through `kairship ctl`.
pub(crate) fn placed_on(demo: &ClusterDemo) -> Vec<String> {
    let out = ctl(
        demo,
        &[
            "workloads",
            "get",
            NAME,
            "web",
            "-n",
            "managed-app",
            "-o",
            "json",
        ],
    );
    if !out.status.success() {
        eprintln!(
            "kairship ctl workloads get: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return Vec::new();
    }
    let w: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    w["placement"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect()
}

pub async fn lifecycle(demo: &ClusterDemo) {
    crate::managed_broken::broken_instance_stays_provisioning(demo).await;
    // An unknown version's tarball is refused by Kairship's server with a clear answer.
    let e = &demo.endpoints;
    let ip = crate::ha::service_ip(e);
    let missing =
        crate::ha::http_get_status(&format!("{ip}:8080"), "/karmada-crds/v9.9.9/crds.tar.gz")
            .await
            .expect("Kairship's probes port answers");
    assert_eq!(missing.0, 404, "{missing:?}");
    assert!(
        missing.1.contains("kairship.io/karmada-crds=v9.9.9"),
        "{missing:?}"
    );

    // Create at the previous minor: Kairship's chart defaults fill in registry, tags and
    // the CRD tarball's URL (this node has no way to GitHub or a registry).
    // Both of one class at the previous release: a FleetRollout of the class upgrades them.
    crate::managed_rollouts::set_class(demo, PREVIOUS, Value::Null).await;
    let created = crate::managed_rollouts::create(demo, NAME).await;
    crate::managed_rollouts::create(demo, crate::managed_rollouts::SECOND).await;
    assert_eq!(
        created["spec"]["imageRegistry"],
        kairship_realfleet::operator::REGISTRY
    );
    assert!(
        created["spec"]["crdTarballUrl"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!("/karmada-crds/{PREVIOUS}/crds.tar.gz"))),
        "{created}"
    );
    let mut seen = Vec::new();
    let took = watch_until(
        demo,
        "the managed instance Running",
        Duration::from_secs(420),
        &mut seen,
        running_at(PREVIOUS),
    )
    .await;
    println!(
        "managed instance {NAME} {PREVIOUS}: Running {:.0}s after create; seen {seen:?}",
        took.as_secs_f64()
    );
    assert!(
        seen.iter()
            .any(|(p, m)| p == "Provisioning" && m.contains("karmada-operator")),
        "Provisioning showed the operator's progress: {seen:?}"
    );
    // Every certificate the operator generated, and the serving one, with its expiry.
    let certs = kairship_test_support::poll(
        Duration::from_secs(60),
        kairship_test_support::PROCESS_POLL,
        || {
            let got = ctl_ok(demo, &["instances", "certificates", NAME]);
            let names: Vec<String> = got["certificates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect();
            let done = names.iter().any(|n| n == "karmada-apiserver serving")
                && names
                    .iter()
                    .filter(|n| n.starts_with(&format!("{NAME}-karmada-cert/")))
                    .count()
                    >= 2;
            async move {
                if done {
                    Ok(names)
                } else {
                    Err(names)
                }
            }
        },
    )
    .await
    .unwrap_or_else(|seen| panic!("the operator's certificates were not listed: {seen:?}"));
    println!(
        "managed instance {NAME}: {} certificates listed with their expiry",
        certs.len()
    );
    let images = component_images(demo);
    assert!(
        images
            .iter()
            .any(|i| i.ends_with(&format!("karmada-controller-manager:{PREVIOUS}"))),
        "{images:?}"
    );
    let karmada = demo.json(&["-n", NS, "get", "karmada", NAME]);
    assert_eq!(
        karmada["status"]["secretRef"]["name"],
        format!("{NAME}-karmada-admin-config"),
        "the operator's own Secret"
    );

    // The instance's admin applies Kairship's role bindings (deploy/instance-rbac.yaml),
    // as for any instance; then a member joins and a workload is placed, all through
    // Kairship's proxy as the Kairship admin.
    let admin_config = demo.dir.path().join(format!("{NAME}-admin.kubeconfig"));
    let secret = demo.json(&[
        "-n",
        NS,
        "get",
        "secret",
        &format!("{NAME}-karmada-admin-config"),
    ]);
    let config = secret["data"]["karmada.config"]
        .as_str()
        .expect("karmada.config");
    use base64::Engine;
    let config = base64::engine::general_purpose::STANDARD
        .decode(config)
        .expect("base64");
    std::fs::write(&admin_config, &config).expect("write");
    let svc = demo.json(&[
        "-n",
        NS,
        "get",
        "service",
        &format!("{NAME}-karmada-apiserver"),
    ]);
    let cluster_ip = svc["spec"]["clusterIP"].as_str().expect("clusterIP");
    let dns = format!("{NAME}-karmada-apiserver.{NS}.svc.cluster.local");
    // This machine reaches Service IPs through the node's link, not cluster DNS.
    kubectl_with(
        &admin_config,
        &[
            &format!("--server=https://{cluster_ip}:5443"),
            &format!("--tls-server-name={dns}"),
            "apply",
            "-f",
            &crate::repo()
                .join("deploy/instance-rbac.yaml")
                .display()
                .to_string(),
        ],
        None,
    );
    let proxy = proxy_kubeconfig(demo);
    for obj in member_join(demo) {
        apply(&proxy, &obj).await;
    }
    watch_until(
        demo,
        "member1 counted",
        Duration::from_secs(180),
        &mut seen,
        |i| i["status"]["stats"]["clustersReady"] == 1,
    )
    .await;
    for obj in workload() {
        apply(&proxy, &obj).await;
    }
    poll(Duration::from_secs(120), PROCESS_POLL, || {
        let placed = placed_on(demo);
        async move { (placed == ["member1"]).then_some(()).ok_or(placed) }
    })
    .await
    .unwrap_or_else(|on| panic!("the workload was not placed on member1 (on {on:?})"));
    // Asleep and woken while its control plane is as the operator made it; the upgrade
    // below then runs on a woken instance.
    crate::managed_hibernation::asleep_and_woken_by_kubectl(demo, NAME).await;

    // Upgrade to the pinned release by a rollout of the class, this instance its canary:
    // Upgrading from/to, then Running on the new images.
    let rollout = crate::managed_rollouts::start_upgrade(demo, CURRENT).await;
    let mut upgrade = Vec::new();
    let took = watch_until(
        demo,
        "the upgrade",
        Duration::from_secs(420),
        &mut upgrade,
        running_at(CURRENT),
    )
    .await;
    println!("managed instance {NAME} {PREVIOUS} -> {CURRENT}: Running {:.0}s after the update; seen {upgrade:?}", took.as_secs_f64());
    assert!(
        upgrade
            .iter()
            .any(|(p, m)| p == "Upgrading" && m.contains(&format!("from {PREVIOUS} to {CURRENT}"))),
        "{upgrade:?}"
    );
    crate::managed_rollouts::upgrade_completed(demo, NAME, CURRENT, rollout).await;
    let updated = ctl_ok(demo, &["instances", "get", NAME]);
    assert!(
        updated["spec"]["crdTarballUrl"]
            .as_str()
            .is_some_and(|u| u.contains(&format!("/{CURRENT}/"))),
        "the default CRD tarball follows the version: {updated}"
    );
    crate::managed_components::health_logs_and_restart(demo, NAME).await;
    let images = component_images(demo);
    for c in [
        "karmada-controller-manager",
        "karmada-scheduler",
        "karmada-webhook",
        "karmada-aggregated-apiserver",
    ] {
        assert!(
            images
                .iter()
                .any(|i| i.ends_with(&format!("{c}:{CURRENT}")))
                && !images
                    .iter()
                    .any(|i| i.ends_with(&format!("{c}:{PREVIOUS}"))),
            "{c} runs {CURRENT} alone: {images:?}"
        );
    }
    // Kairship's view of it may lag the new control plane by a few seconds; Karmada's
    // placement itself must not change.
    let survived = poll(Duration::from_secs(60), PROCESS_POLL, || {
        let on = placed_on(demo);
        async move { (on == ["member1"]).then_some(()).ok_or(on) }
    })
    .await;
    if let Err(on) = survived {
        panic!("placement survives the upgrade: on {on:?}");
    }
    crate::managed_rollouts::bad_image_halts_at_the_canary(demo, NAME, CURRENT).await;
    crate::managed_backups::restored_after_loss(demo, NAME).await;

    // A failure: a CRD tarball nobody serves. The instance says what the operator says,
    // and an update fixes it.
    let e_http = format!(
        "http://{}.{NS}.svc:8080/karmada-crds/v9.9.9/crds.tar.gz",
        "kairship"
    );
    ctl_ok(
        demo,
        &["instances", "update", NAME, "--crd-tarball-url", &e_http],
    );
    let mut failing = Vec::new();
    watch_until(
        demo,
        "the operator's failure shown",
        Duration::from_secs(180),
        &mut failing,
        |i| {
            phase_and_message(i)
                .1
                .contains("failed to download CRD tar")
        },
    )
    .await;
    println!("a missing CRD tarball shows as {:?}", failing.last());
    let fixed = format!("http://kairship.{NS}.svc:8080/karmada-crds/{CURRENT}/crds.tar.gz");
    ctl_ok(
        demo,
        &["instances", "update", NAME, "--crd-tarball-url", &fixed],
    );
    watch_until(
        demo,
        "Running again",
        Duration::from_secs(300),
        &mut failing,
        running_at(CURRENT),
    )
    .await;

    crate::managed_components::certificates_renewed(demo, NAME).await;

    // Delete: the operator removes the control plane; the Karmada object goes.
    crate::managed_rollouts::delete_second(demo).await;
    let started = Instant::now();
    run(Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args(["ctl", "--state-dir"])
        .arg(demo.dir.path())
        .args(["instances", "delete", NAME]));
    poll(Duration::from_secs(180), PROCESS_POLL, || {
        // Everything the operator made is named after the instance, labelled or not.
        let left: Vec<String> = demo
            .kubectl(&[
                "-n",
                NS,
                "get",
                "karmadas,deployments,statefulsets,services,secrets,configmaps,pods",
                "-o",
                "name",
            ])
            .lines()
            .filter(|l| l.contains(&format!("/{NAME}")))
            .map(String::from)
            .collect();
        let gone = left.is_empty() && instance(demo).is_none();
        async move { gone.then_some(()).ok_or(left) }
    })
    .await
    .unwrap_or_else(|left| panic!("left behind: {left:?}"));
    println!(
        "managed instance {NAME} deleted in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    let registrations = demo.kubectl(&["get", "instanceregistrations", "-o", "name"]);
    assert!(!registrations.contains(NAME), "{registrations}");
    let others = ctl_ok(demo, &["instances", "list"]);
    let phases: Vec<&str> = others["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["status"]["phase"].as_str())
        .collect();
    assert_eq!(
        phases,
        ["Running", "Running"],
        "the other instances untouched"
    );
}
