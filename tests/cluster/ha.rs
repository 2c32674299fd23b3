//! `kairship demo --fleet cluster` end to end: Kairship installed by its chart as three
//! pods on a kubelet-backed node, then, in order: the pods as a user checks them (Ready
//! through their own probes, one Lease holder, UID 65532 on a read-only root, JSON logs,
//! metrics); every surface through the Service; a Pull mode member registered by a
//! karmada-agent on the node (`pull_mode.rs`); the leader's loss (pod force-deleted,
//! then its container killed) with a client reading all along; a rolling upgrade to a new
//! image tag with clients reading, writing and watching; a managed instance through the
//! real karmada-operator (`managed.rs`); `helm uninstall`; and the machine
//! left as it was found once the demo stops. Each figure is printed with its goal and
//! asserted within that goal times `NOISY` (a shared, noisy machine).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kairship_test_support::{holds, poll, process, POLL, PROCESS_POLL};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::readers::{Readers, Tally};
use crate::{bin_dir, helm, helm_path, image_archive, image_name, repo, run, skip_unless, stdout};

pub(crate) const NS: &str = "kairship-system";
const LEASE: &str = "kairship-controller-manager";
/// What the leader-loss goals are multiplied by when asserted: this node shares two cores
/// with the control planes, the fleet and the test itself.
const NOISY: u32 = 2;
/// The takeover goal: the lease (15 s) plus two 2 s retry periods.
const TAKEOVER_GOAL: Duration = Duration::from_secs(19);
/// The longest a client through the Service may fail while the leader is lost.
const OUTAGE_GOAL: Duration = Duration::from_secs(1);

fn prerequisites() -> Result<(), String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        });
    if uid != Some(true) {
        return Err("the cluster tier needs root (network namespaces, mounts, cgroups)".into());
    }
    for b in [
        "kubelet",
        "kube-proxy",
        "kube-scheduler",
        "kube-apiserver",
        "etcd",
        "helm",
    ] {
        if !bin_dir().join(b).is_file() {
            return Err(format!(
                "{} is missing: run scripts/real-fleet/build.sh",
                bin_dir().join(b).display()
            ));
        }
    }
    if !image_archive().is_file() {
        return Err(format!(
            "{} is missing: run scripts/image/build.sh",
            image_archive().display()
        ));
    }
    if Command::new("containerd")
        .arg("--version")
        .output()
        .is_err()
    {
        return Err("containerd is not installed: run scripts/install-test-deps.sh".into());
    }
    Ok(())
}

pub struct ClusterDemo {
    child: Child,
    pub dir: tempfile::TempDir,
    pub endpoints: Value,
    pub(crate) host: PathBuf,
}

impl ClusterDemo {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = std::fs::File::create(dir.path().join("demo.log")).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_kairship"))
            .current_dir(repo())
            .args([
                "demo",
                "--fleet",
                "cluster",
                "--instances",
                "2",
                "--clusters",
                "2",
            ])
            .arg("--image-archive")
            .arg(image_archive())
            .arg("--state-dir")
            .arg(dir.path())
            .env("RUST_LOG", "warn,kube_client=off")
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("kairship demo starts");
        let mut demo = Self {
            child,
            endpoints: Value::Null,
            host: PathBuf::new(),
            dir,
        };
        let started = Instant::now();
        let path = demo.dir.path().join("endpoints.json");
        match process::endpoints(&mut demo.child, &path, Duration::from_secs(900)).await {
            Ok(v) => demo.endpoints = v,
            Err(e) => panic!("kairship demo --fleet cluster: {e}:\n{}", demo.log_tail()),
        }
        println!("cluster demo up in {:.0}s", started.elapsed().as_secs_f64());
        demo.host = PathBuf::from(
            demo.endpoints["host_kubeconfig"]
                .as_str()
                .expect("host_kubeconfig"),
        );
        demo
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("demo.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
        stdout(&run(Command::new(kubectl)
            .arg(format!("--kubeconfig={}", self.host.display()))
            .args(args)))
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&a)).expect("kubectl -o json")
    }

    pub(crate) fn pods(&self) -> Vec<Value> {
        self.json(&[
            "-n",
            NS,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=kairship",
        ])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The Lease's holder: a replica's process (`<pod>_<suffix>`).
    pub(crate) fn holder(&self) -> String {
        self.json(&["-n", NS, "get", "lease", LEASE])["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The pod of the Lease's holder.
    pub(crate) fn leader_pod(&self) -> Option<Value> {
        let holder = self.holder();
        let pod = holder
            .rsplit_once('_')
            .map_or(holder.as_str(), |(p, _)| p)
            .to_string();
        self.pods().into_iter().find(|p| name(p) == pod)
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("real/node/containerd/containerd.sock")
    }

    /// Tags Kairship's image `<version>-<suffix>` in the node's containerd (a new tag
    /// rolls the pods); the tag.
    pub(crate) fn tag_image(&self, suffix: &str) -> String {
        let next = format!("{}-{suffix}", env!("CARGO_PKG_VERSION"));
        let (repo_name, _) = image_name()
            .rsplit_once(':')
            .map(|(r, t)| (r.to_string(), t.to_string()))
            .expect("image");
        self.ctr(&[
            "images",
            "tag",
            "--force",
            &image_name(),
            &format!("{repo_name}:{next}"),
        ]);
        next
    }

    pub(crate) fn ctr(&self, args: &[&str]) -> String {
        stdout(&run(Command::new("ctr")
            .arg(format!("--address={}", self.socket().display()))
            .args(["--namespace", "k8s.io"])
            .args(args)))
    }

    /// Waits until `ok` (which runs kubectl) holds; how long it took.
    pub(crate) async fn until(
        &self,
        what: &str,
        within: Duration,
        ok: impl FnMut() -> bool,
    ) -> Duration {
        let started = Instant::now();
        if !holds(within, PROCESS_POLL, ok).await {
            panic!("{what}: not within {within:?}\n{}", self.log_tail());
        }
        started.elapsed()
    }

    /// SIGTERM, then waits for the demo to remove everything it started.
    fn stop(&mut self) -> Option<std::process::ExitStatus> {
        process::stop(&mut self.child, Duration::from_secs(90))
    }
}

impl Drop for ClusterDemo {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    }) && pod["metadata"]["deletionTimestamp"].is_null()
}

pub(crate) fn name(pod: &Value) -> String {
    pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A plain-HTTP GET (the pods' probes port): the body on 200.
pub(crate) async fn http_get(addr: &str, path: &str) -> Option<String> {
    let (code, body) = http_get_status(addr, path).await?;
    (code == 200).then_some(body)
}

/// A plain-HTTP GET: the status code and body.
pub async fn http_get_status(addr: &str, path: &str) -> Option<(u16, String)> {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(3), io)
        .await
        .ok()
        .flatten()
}

pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

pub(crate) async fn pod_metrics(pod: &Value) -> Option<String> {
    let ip = pod["status"]["podIP"].as_str()?;
    http_get(&format!("{ip}:8080"), "/metrics").await
}

/// The host PID of a pod's container, through containerd.
pub(crate) fn container_pid(demo: &ClusterDemo, pod: &Value) -> (String, u32) {
    let id = pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|c| c.strip_prefix("containerd://"))
        .expect("a containerd container id")
        .to_string();
    let tasks = demo.ctr(&["tasks", "ls"]);
    let pid = tasks
        .lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no task {id} in {tasks}"));
    (id, pid)
}

pub fn service_ip(endpoints: &Value) -> String {
    endpoints["grpc"]
        .as_str()
        .and_then(|g| g.rsplit_once(':'))
        .map(|(ip, _)| ip.to_string())
        .expect("grpc address")
}

pub(crate) fn print_tallies(title: &str, tallies: &[Tally]) {
    println!("{title}:");
    for t in tallies {
        println!("  {t}");
    }
}

/// Each pod's count of status writes, by pod name.
async fn status_writes(demo: &ClusterDemo) -> std::collections::HashMap<String, f64> {
    let mut out = std::collections::HashMap::new();
    for p in demo.pods() {
        if let Some(m) = pod_metrics(&p).await {
            out.insert(
                name(&p),
                metric(&m, "kairship_instance_status_writes_total").unwrap_or(0.0),
            );
        }
    }
    out
}

/// Waits for another process to hold the Lease and for status writes to resume there:
/// (takeover, writes resumed, the new leader's pod). `before` holds each pod's count of
/// writes before the loss; `lost` is the pod whose leader was lost (its process is new).
async fn takeover(
    demo: &ClusterDemo,
    old: &str,
    lost_at: Instant,
    before: &std::collections::HashMap<String, f64>,
    lost: &str,
) -> (Duration, Duration, String) {
    demo.until(
        "another replica holds the Lease",
        Duration::from_secs(90),
        || {
            let h = demo.holder();
            !h.is_empty() && h != old && demo.leader_pod().is_some_and(|p| ready(&p))
        },
    )
    .await;
    let took = lost_at.elapsed();
    let leader = demo.holder();
    let pod = demo.leader_pod().expect("the new leader's pod");
    let writes = || async {
        pod_metrics(&pod)
            .await
            .and_then(|m| metric(&m, "kairship_instance_status_writes_total"))
    };
    let before = match name(&pod) == lost {
        true => 0.0,
        false => before.get(&name(&pod)).copied().unwrap_or(0.0),
    };
    let wrote = poll(Duration::from_secs(90), POLL, || async {
        writes().await.filter(|w| *w > before).ok_or(())
    })
    .await;
    if wrote.is_err() {
        panic!("{leader} never wrote a status\n{}", demo.log_tail());
    }
    (took, lost_at.elapsed(), name(&pod))
}

async fn leader_loss(demo: &ClusterDemo) {
    for how in ["pod force-deleted", "container killed"] {
        demo.until("three Ready pods", Duration::from_secs(180), || {
            demo.pods().iter().filter(|p| ready(p)).count() == 3
        })
        .await;
        let old = demo.holder();
        let pod = demo.leader_pod().expect("the leader's pod");
        let readers = Readers::start(&demo.endpoints).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let writes = status_writes(demo).await;
        let lost_at = Instant::now();
        match how {
            "pod force-deleted" => {
                demo.kubectl(&[
                    "-n",
                    NS,
                    "delete",
                    "pod",
                    &name(&pod),
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                ]);
            }
            _ => {
                let (id, _) = container_pid(demo, &pod);
                demo.ctr(&["tasks", "kill", "--signal", "SIGKILL", &id]);
            }
        }
        let (took, resumed, leader) = takeover(demo, &old, lost_at, &writes, &name(&pod)).await;
        // Reads go on a little longer, through whatever the Service does next.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let tallies = readers.stop().await;
        println!(
            "leader {how}: {leader} took over in {:.1}s, status writes resumed {:.1}s (lease 15 s + two 2 s retry periods: goal 19 s)",
            took.as_secs_f64(),
            resumed.as_secs_f64()
        );
        print_tallies(
            "  clients through the Service (goal: no read fails for more than 1 s)",
            &tallies,
        );
        assert!(
            took <= TAKEOVER_GOAL * NOISY && resumed <= TAKEOVER_GOAL * NOISY,
            "leader {how}: takeover {took:?}, writes resumed {resumed:?}: over {NOISY} x the {TAKEOVER_GOAL:?} goal"
        );
        for t in &tallies {
            assert!(t.ok > 0, "{} never succeeded: {t}", t.what);
            assert!(
                t.longest_outage <= OUTAGE_GOAL * NOISY,
                "leader {how}: {t}: an outage over {NOISY} x the {OUTAGE_GOAL:?} goal"
            );
        }
    }
}

async fn rolling_upgrade(demo: &ClusterDemo) {
    demo.until("three Ready pods", Duration::from_secs(180), || {
        demo.pods().iter().filter(|p| ready(p)).count() == 3
    })
    .await;
    let before: Vec<String> = demo.pods().iter().map(name).collect();
    let next = demo.tag_image("rollout");
    let readers = Readers::start(&demo.endpoints).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    helm(
        Some(&demo.host),
        &[
            "upgrade",
            "kairship",
            &repo().join("deploy/chart/kairship").display().to_string(),
            "--namespace",
            NS,
            "--reuse-values",
            "--set",
            &format!("image.tag={next}"),
            "--wait",
            "--timeout=10m",
        ],
    );
    // `--wait` returns once the new pods are Ready; the old ones may still be draining.
    demo.until("only new pods left", Duration::from_secs(120), || {
        let pods = demo.pods();
        pods.len() == 3 && pods.iter().all(|p| !before.contains(&name(p)) && ready(p))
    })
    .await;
    let rolled = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tallies = readers.stop().await;
    println!(
        "rolling upgrade to {next}: {:.0}s for three pods",
        rolled.as_secs_f64()
    );
    print_tallies(
        "  clients through the Service (goal: 0 failed, every watch ended cleanly)",
        &tallies,
    );
    for p in demo.pods() {
        let image = p["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(image.ends_with(&next), "{} runs {image}", name(&p));
    }
    let failed: u64 = tallies.iter().map(|t| t.failed).sum();
    let resets: u64 = tallies.iter().map(|t| t.resets).sum();
    let watch_events: u64 = tallies.iter().map(|t| t.events).sum();
    assert!(watch_events > 0, "the watches saw the writers' changes");
    assert_eq!(
        resets, 0,
        "a watch was reset during the upgrade instead of ending cleanly"
    );
    assert_eq!(failed, 0, "requests failed during the rolling upgrade");
}

async fn uninstall(demo: &ClusterDemo) {
    let kinds = "deployments,replicasets,pods,services,serviceaccounts,poddisruptionbudgets,roles,rolebindings,secrets,configmaps";
    let selector = "app.kubernetes.io/instance=kairship";
    helm(
        Some(&demo.host),
        &[
            "uninstall",
            "kairship",
            "--namespace",
            NS,
            "--wait",
            "--timeout=5m",
        ],
    );
    demo.until("the chart's objects gone", Duration::from_secs(120), || {
        demo.kubectl(&["-n", NS, "get", kinds, "-l", selector, "-o", "name"])
            .trim()
            .is_empty()
            && demo
                .kubectl(&[
                    "get",
                    "clusterroles,clusterrolebindings",
                    "-l",
                    selector,
                    "-o",
                    "name",
                ])
                .trim()
                .is_empty()
    })
    .await;
    // Helm keeps CRDs, and the Instances with their registrations are the user's.
    demo.kubectl(&["get", "crd", "instances.kairship.io"]);
    let instances = demo.json(&["get", "instances"]);
    let registrations = demo.json(&["get", "instanceregistrations"]);
    assert_eq!(instances["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(registrations["items"].as_array().map(Vec::len), Some(2));
    let releases = stdout(&helm(Some(&demo.host), &["list", "--namespace", NS, "-q"]));
    assert!(releases.trim().is_empty(), "{releases}");
    println!("helm uninstall: every object of the chart gone; CRDs, 2 Instances and 2 registrations kept");
}

fn assert_machine_clean(dir: &Path) {
    let left = kairship_realfleet::node::janitor::leftovers(&dir.join("real/node"));
    assert!(left.is_empty(), "the demo left behind: {left:#?}");
    let ns = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip");
    assert!(!String::from_utf8_lossy(&ns.stdout).contains("kairship-node"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kairship_runs_as_pods_on_a_real_node() {
    if skip_unless(prerequisites()) {
        return;
    }
    assert!(helm_path().is_file());
    let mut demo = ClusterDemo::start().await;
    crate::surfaces::pods_are_ready_nonroot_and_one_leads(&demo).await;
    crate::surfaces::every_surface_answers_through_the_service(&demo).await;
    crate::sessions::exec_logs_and_port_forward(&demo).await;
    crate::pull_mode::register_run_and_remove(&demo).await;
    leader_loss(&demo).await;
    rolling_upgrade(&demo).await;
    crate::managed::lifecycle(&demo).await;
    crate::sharded::sharded(&demo).await;
    uninstall(&demo).await;
    let stopped = Instant::now();
    let status = demo.stop();
    assert!(
        status.is_some_and(|s| s.success()),
        "the demo did not stop cleanly: {status:?}\n{}",
        demo.log_tail()
    );
    println!(
        "demo stopped and cleaned up in {:.1}s",
        stopped.elapsed().as_secs_f64()
    );
    assert_machine_clean(demo.dir.path());
}
