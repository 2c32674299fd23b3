//! A workload's real pods reached through Kairship (issue 41): the host cluster, which has
//! a kubelet-backed node, joined to the real fleet's `karmada-1` through `kairship ctl
//! join`; a busybox Deployment propagated there; then, through Kairship's proxy and
//! Karmada's cluster proxy, `kubectl exec`, `logs`, `logs -f` and `port-forward`, and
//! `karmadactl exec` and `logs`, answering as with the instance's own admin kubeconfig; a
//! viewer reads the logs and may not exec; a Deployment created on the host directly
//! adopted through `kairship ctl promote` with its pod untouched; and the host removed
//! again, left clean.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kairship_test_support::{holds, PROCESS_POLL};
use serde_json::{json, Value};

use crate::ha::ClusterDemo;
use crate::managed::{apply, ctl, kubectl_with, try_kubectl};

pub(crate) const INSTANCE: &str = "karmada-1";
pub(crate) const CLUSTER: &str = "host";
const NS: &str = "sessions";

fn member_path() -> String {
    format!("/apis/cluster.karmada.io/v1alpha1/clusters/{CLUSTER}/proxy")
}

/// A kubeconfig file named `file` for `server` with `token`, trusting `ca_pem`.
pub(crate) fn kubeconfig(
    dir: &Path,
    file: &str,
    server: &str,
    ca_pem: &str,
    token: &str,
) -> PathBuf {
    let path = dir.join(file);
    let kc = kairship_wire::kubeconfig::build(file, server, ca_pem, token);
    std::fs::write(&path, kc.to_string()).expect("write kubeconfig");
    path
}

/// The host's admin kubeconfig as the node's pods (Kairship) and the fleet's Karmada reach
/// it: the machine's end of the node link, which its certificate names.
pub(crate) fn host_join_kubeconfig(demo: &ClusterDemo) -> PathBuf {
    let kc: Value = serde_json::from_str(
        &std::fs::read_to_string(demo.dir.path().join("real/host/admin.kubeconfig"))
            .expect("host kubeconfig"),
    )
    .expect("kubeconfig JSON");
    let server = kc["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server");
    let port = server.rsplit_once(':').map(|(_, p)| p).expect("port");
    let mut kc = kc.clone();
    kc["clusters"][0]["cluster"]["server"] = json!(format!(
        "https://{}:{port}",
        kairship_realfleet::node::net::HOST_IP
    ));
    let path = demo.dir.path().join("host-join.kubeconfig");
    std::fs::write(&path, kc.to_string()).expect("write kubeconfig");
    path
}

/// karmada-1's own admin kubeconfig, aimed at `suffix` on its server.
fn instance_kubeconfig(demo: &ClusterDemo, suffix: &str) -> PathBuf {
    let mut kc: Value = serde_json::from_str(
        &std::fs::read_to_string(
            demo.dir
                .path()
                .join(format!("real/{INSTANCE}/admin.kubeconfig")),
        )
        .expect("instance kubeconfig"),
    )
    .expect("kubeconfig JSON");
    let server = kc["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("server")
        .to_string();
    kc["clusters"][0]["cluster"]["server"] = json!(format!("{server}{suffix}"));
    let path = demo.dir.path().join("instance-member.kubeconfig");
    std::fs::write(&path, kc.to_string()).expect("write kubeconfig");
    path
}

fn workload() -> Vec<Value> {
    // httpd serves /etc, so port-forward's answer for /hostname is the pod's name.
    let script = "echo shell ready in $(hostname); exec httpd -f -p 8080 -h /etc";
    busybox_on(
        CLUSTER,
        NS,
        "shell",
        json!({"command": ["/bin/sh", "-c", script], "ports": [{"containerPort": 8080}]}),
    )
}

/// Namespace `namespace` with one busybox Deployment `name` (label `app: <name>`, the
/// node's imported image) and the PropagationPolicy placing both on `cluster`;
/// `container` adds its fields (command, ports) to the container.
pub(crate) fn busybox_on(
    cluster: &str,
    namespace: &str,
    name: &str,
    container: Value,
) -> Vec<Value> {
    let mut c = json!({"name": name, "image": kairship_realfleet::node::BUSYBOX_IMAGE,
                       "imagePullPolicy": "Never"});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), container.as_object()) {
        c.extend(extra.clone());
    }
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [c]}}}}),
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"resourceSelectors": [
                            {"apiVersion": "v1", "kind": "Namespace", "name": namespace},
                            {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
                        "placement": {"clusterAffinity": {"clusterNames": [cluster]}}}}),
    ]
}

/// The running pod's name on the host, once there is one.
fn running_pod(demo: &ClusterDemo) -> Option<String> {
    let pods = demo.json(&["-n", NS, "get", "pods", "-l", "app=shell"]);
    pods["items"]
        .as_array()?
        .iter()
        .find(|p| p["status"]["phase"] == "Running")
        .and_then(|p| p["metadata"]["name"].as_str().map(String::from))
}

fn spawn(program: &str, args: &[&str]) -> Child {
    Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// The first line of `child`'s output containing `needle`, within `within`; the child
/// is left running.
fn first_line_with(child: &mut Child, needle: &str, within: Duration) -> Option<String> {
    let out = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let needle = needle.to_string();
    // Read to the end: a closed pipe would kill the child at its next line (kubectl
    // port-forward prints one per connection).
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(&needle) {
                let _ = tx.send(line);
            }
        }
    });
    rx.recv_timeout(within).ok()
}

fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = child.wait();
    err
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.0): the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// `kubectl port-forward` of the pod's 8080 through `kubeconfig`: the answer for
/// /hostname through the forwarded port.
fn port_forward(kubeconfig: &Path, pod: &str) -> String {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let config = format!("--kubeconfig={}", kubeconfig.display());
    let target = format!("pod/{pod}");
    let mut child = spawn(
        &kubectl,
        &[&config, "-n", NS, "port-forward", &target, ":8080"],
    );
    let line = first_line_with(
        &mut child,
        "Forwarding from 127.0.0.1:",
        Duration::from_secs(30),
    );
    let Some(line) = line else {
        panic!("kubectl port-forward: {}", stop(child));
    };
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let body = http_get(port, "/hostname");
    let err = stop(child);
    body.unwrap_or_else(|| panic!("nothing through the forwarded port: {err}"))
}

pub async fn exec_logs_and_port_forward(demo: &ClusterDemo) {
    let started = Instant::now();
    let dir = demo.dir.path();
    let e = &demo.endpoints;
    let ca = std::fs::read_to_string(e["ca"].as_str().expect("ca")).expect("ca");
    let http = e["http"].as_str().expect("http");
    let proxy = format!("{http}/apis/kairship.io/v1alpha1/instances/{INSTANCE}/proxy");
    let admin = e["tokens"]["admin"].as_str().expect("admin token");
    let viewer = e["tokens"]["viewer"].as_str().expect("viewer token");
    assert_eq!(e["tokens"]["viewer_instance"], INSTANCE);
    let karmada = kubeconfig(dir, "sessions-admin.kubeconfig", &proxy, &ca, admin);
    let member = format!("{proxy}{}", member_path());
    let as_admin = kubeconfig(dir, "sessions-member-admin.kubeconfig", &member, &ca, admin);
    let as_viewer = kubeconfig(
        dir,
        "sessions-member-viewer.kubeconfig",
        &member,
        &ca,
        viewer,
    );
    let direct = instance_kubeconfig(demo, &member_path());

    // The host joins karmada-1 through Kairship, as its admin.
    let join = host_join_kubeconfig(demo);
    let join = join.display().to_string();
    let out = ctl(
        demo,
        &["join", INSTANCE, CLUSTER, "--cluster-kubeconfig", &join],
    );
    assert!(
        out.status.success(),
        "kairship ctl join: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for obj in workload() {
        apply(&karmada, &obj).await;
    }
    let mut pod = None;
    if !holds(Duration::from_secs(180), PROCESS_POLL, || {
        pod = running_pod(demo);
        pod.is_some()
    })
    .await
    {
        panic!(
            "no Running pod of the workload on the host:\n{}\n{}",
            demo.kubectl(&["-n", NS, "get", "pods,deployments", "-o", "wide"]),
            kubectl_with(
                &karmada,
                &["-n", NS, "get", "resourcebindings", "-o", "yaml"],
                None
            )
        );
    }
    let pod = pod.unwrap_or_default();
    println!(
        "host joined, workload running on its node in {:.0}s",
        started.elapsed().as_secs_f64()
    );

    // Karmada grants the cluster proxy's impersonation on a new member a little after it
    // joins (its unified-auth controller's Work): wait, as a user would.
    for (who, kc) in [
        ("the instance's admin", &direct),
        ("Kairship's admin", &as_admin),
    ] {
        let mut last = String::new();
        let reached = holds(
            Duration::from_secs(120),
            PROCESS_POLL,
            || match try_kubectl(kc, &["-n", NS, "get", "pods"], None) {
                Ok(_) => true,
                Err(e) => {
                    last = e;
                    false
                }
            },
        )
        .await;
        if !reached {
            let verbose = try_kubectl(kc, &["-n", NS, "get", "pods", "-v=8"], None);
            let logs = demo.kubectl(&[
                "-n",
                crate::managed::NS,
                "logs",
                "-l",
                "app.kubernetes.io/name=kairship",
                "--tail=30",
            ]);
            panic!("{who} cannot reach the host through the cluster proxy: {last}\n{verbose:?}\n{logs}");
        }
    }

    // exec and logs: the same answers through Kairship as with the instance's own
    // credentials.
    let exec = ["-n", NS, "exec", &pod, "--", "cat", "/etc/hostname"];
    let through = kubectl_with(&as_admin, &exec, None);
    assert_eq!(through.trim(), pod, "kubectl exec through Kairship");
    assert_eq!(through, kubectl_with(&direct, &exec, None));
    let logs = ["-n", NS, "logs", &pod];
    let through = kubectl_with(&as_admin, &logs, None);
    assert!(through.contains("shell ready in"), "{through}");
    assert_eq!(through, kubectl_with(&direct, &logs, None));

    // logs -f streams until stopped.
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let config = format!("--kubeconfig={}", as_admin.display());
    let mut follow = spawn(&kubectl, &[&config, "-n", NS, "logs", "-f", &pod]);
    let first = first_line_with(&mut follow, "shell ready in", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let still = follow.try_wait().ok().flatten().is_none();
    let err = stop(follow);
    assert!(first.is_some(), "kubectl logs -f: {err}");
    assert!(still, "kubectl logs -f ended by itself: {err}");

    // port-forward to the pod's httpd.
    let served = port_forward(&direct, &pod);
    assert_eq!(served.trim(), pod, "through the forwarded port");
    assert_eq!(port_forward(&as_admin, &pod), served, "through Kairship");

    // karmadactl, with Kairship's proxy as its karmada-apiserver.
    let karmadactl = crate::bin_dir().join("karmadactl");
    let karmadactl = karmadactl.display().to_string();
    let kc = format!("--kubeconfig={}", karmada.display());
    let out = crate::run(Command::new(&karmadactl).args([
        &kc,
        "exec",
        &pod,
        "--operation-scope=members",
        "--cluster",
        CLUSTER,
        "-n",
        NS,
        "--",
        "cat",
        "/etc/hostname",
    ]));
    assert_eq!(crate::stdout(&out).trim(), pod, "karmadactl exec");
    let out =
        crate::run(Command::new(&karmadactl).args([&kc, "logs", &pod, "-C", CLUSTER, "-n", NS]));
    assert!(
        crate::stdout(&out).contains("shell ready in"),
        "karmadactl logs"
    );

    through_the_api(demo, &pod, &ca, http, admin).await;

    // A viewer reads the logs and may not exec.
    assert!(kubectl_with(&as_viewer, &logs, None).contains("shell ready in"));
    let refused = try_kubectl(&as_viewer, &exec, None).expect_err("a viewer's exec");
    assert!(refused.contains("orbidden"), "{refused}");

    crate::promote::adopt_a_running_workload(demo, &karmada).await;

    // Cleanup: the workload, then the host leaves karmada-1 clean.
    for obj in workload().iter().rev() {
        let kind = obj["kind"].as_str().unwrap_or_default().to_lowercase();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let mut args = vec![
            "delete",
            kind.as_str(),
            name,
            "--ignore-not-found",
            "--wait=false",
        ];
        if kind != "namespace" {
            args.extend(["-n", NS]);
        }
        kubectl_with(&karmada, &args, None);
    }
    let out = ctl(
        demo,
        &[
            "remove",
            INSTANCE,
            CLUSTER,
            "--force",
            "--cluster-kubeconfig",
            &join,
        ],
    );
    assert!(
        out.status.success(),
        "kairship ctl remove: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        holds(Duration::from_secs(120), PROCESS_POLL, || demo
            .kubectl(&["get", "namespaces", "-o", "name"])
            .lines()
            .all(
                |l| l != format!("namespace/{NS}") && l != "namespace/karmada-cluster"
            ))
        .await,
        "the host keeps Karmada's leftovers: {}",
        demo.kubectl(&["get", "namespaces"])
    );
    println!(
        "exec, logs, logs -f, port-forward and karmadactl exec/logs through Kairship as with the instance's own credentials; a viewer's exec refused; host joined and removed in {:.0}s",
        started.elapsed().as_secs_f64()
    );
}

/// The same pod through Kairship's own API: `kairship ctl pods`, `logs` (and `logs -f`,
/// which streams) and `events` over gRPC, and the log over REST as JSON lines.
async fn through_the_api(demo: &ClusterDemo, pod: &str, ca: &str, http: &str, admin: &str) {
    let pods = crate::managed::ctl_ok(demo, &["pods", INSTANCE, "shell", "-n", NS]);
    let on_host = pods["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["cluster"] == CLUSTER)
        .unwrap_or_else(|| panic!("no pods of the host: {pods}"));
    assert_eq!(on_host["pods"][0]["name"], pod, "{pods}");
    assert_eq!(on_host["pods"][0]["phase"], "Running", "{pods}");
    assert_eq!(on_host["pods"][0]["readyContainers"], 1, "{pods}");
    let out = ctl(
        demo,
        &[
            "logs", INSTANCE, pod, "-C", CLUSTER, "-n", NS, "--tail", "20",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("shell ready in"), "kairship ctl logs: {text}");
    // Followed, it keeps streaming until stopped.
    let dir = demo.dir.path().display().to_string();
    let mut follow = spawn(
        env!("CARGO_BIN_EXE_kairship"),
        &[
            "ctl",
            "--state-dir",
            &dir,
            "logs",
            INSTANCE,
            pod,
            "-C",
            CLUSTER,
            "-n",
            NS,
            "-f",
        ],
    );
    let first = first_line_with(&mut follow, "shell ready in", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let still = follow.try_wait().ok().flatten().is_none();
    let err = stop(follow);
    assert!(first.is_some() && still, "kairship ctl logs -f: {err}");
    let events = crate::managed::ctl_ok(demo, &["events", INSTANCE, "shell", "-n", NS]);
    let list = events["events"].as_array().cloned().unwrap_or_default();
    assert!(
        list.iter()
            .any(|e| e["cluster"] == CLUSTER && e["objectKind"] == "Pod"),
        "no pod events from the host: {events}"
    );
    assert!(
        list.iter()
            .any(|e| e["cluster"].as_str().unwrap_or_default().is_empty()),
        "no events of the instance (template, binding): {events}"
    );
    // REST: one JSON object per line.
    let kc = kubeconfig(demo.dir.path(), "sessions-rest.kubeconfig", http, ca, admin);
    let client = crate::readers::client_from_path(&kc.display().to_string()).await;
    let path = format!(
        "/apis/kairship.io/v1alpha1/instances/{INSTANCE}/clusters/{CLUSTER}/namespaces/{NS}/pods/{pod}/log?tailLines=5"
    );
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    let text = client.request_text(req).await.expect("REST log");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["result"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("shell ready in"))),
        "{text}"
    );
}
