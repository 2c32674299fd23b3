//! The real-fleet tier: `kairship demo --fleet real` on upstream kube-apiserver, etcd and
//! Karmada (built by scripts/real-fleet/build.sh), checked through Kairship's own
//! surfaces: stats equal to the real Clusters' summaries, kubectl through the proxy with
//! server-side Tables, validation, server-side apply, patch, watch and explain, a
//! workload and policy created over gRPC and scheduled by real Karmada, the caller's
//! identity meeting real RBAC, Clusterpedia registration against its CRDs, and one
//! instance's karmada-apiserver killed without disturbing the other, then deleted.
//!
//! One fleet serves every check (it takes about a minute to start). Without the binaries
//! the tier fails, unless KAIRSHIP_SKIP_TIERS names it.

mod backups;
mod certificates;
mod clusterpedia;
mod clusters;
use kairship_test_support::fleet as common;
mod differential;
mod faults;
mod identity;
mod member_roles;
mod roles;
use kairship_test_support::process;
use kairship_test_support::scenarios::{cluster_scoped, nginx, tables};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::policy_service_client::PolicyServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use serde_json::{json, Value};

struct Demo {
    child: Child,
    dir: tempfile::TempDir,
    endpoints: Value,
    /// The OIDC provider the demo trusts, and a token of it obtained before the demo
    /// started (expired by the time the identity checks run, or waited on).
    dex: kairship_realfleet::dex::Dex,
    early_token: (String, Instant),
}

impl Drop for Demo {
    fn drop(&mut self) {
        // SIGTERM: the demo stops its fleet (every child process) on the way out.
        process::stop(&mut self.child, Duration::from_secs(30));
    }
}

pub(crate) fn binaries_present() -> bool {
    let bin = kairship_realfleet::default_bin_dir();
    [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "karmada-aggregated-apiserver",
        "karmada-controller-manager",
        "karmada-scheduler",
    ]
    .iter()
    .all(|b| bin.join(b).is_file())
}

async fn start() -> Option<Demo> {
    if !binaries_present() {
        let msg = format!(
            "the real-fleet binaries are not in {}: run scripts/real-fleet/build.sh",
            kairship_realfleet::default_bin_dir().display()
        );
        kairship_test_support::missing_prerequisite("real", &msg);
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let dex = identity::start_dex(
        &dir.path().join("dex"),
        vec![identity::dana(), identity::alice()],
    )
    .await;
    let early_token = (
        dex.password_token(identity::CLIENT, &dex.users[0])
            .await
            .expect("a Dex token"),
        Instant::now(),
    );
    let log = std::fs::File::create(dir.path().join("demo.log")).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args([
            "demo",
            "--fleet",
            "real",
            "--instances",
            "2",
            "--clusters",
            "2",
            "--instance-degraded-after-secs",
            "5",
            "--clusterpedia",
        ])
        .args([
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--probes-addr",
            "127.0.0.1:0",
        ])
        .args(identity::demo_flags(&dex))
        .arg("--state-dir")
        .arg(dir.path())
        // Audit lines too: the identity checks read them.
        .env(
            "RUST_LOG",
            "warn,kube_client=off,kairship::audit=info,kairship::actors::manager=info",
        )
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("kairship demo starts");
    let mut demo = Demo {
        child,
        dir,
        endpoints: Value::Null,
        dex,
        early_token,
    };
    let path = demo.dir.path().join("endpoints.json");
    let up = process::endpoints(&mut demo.child, &path, Duration::from_secs(420)).await;
    match up {
        Ok(v) => demo.endpoints = v,
        Err(e @ process::NotUp::Exited(_)) => {
            let log = std::fs::read_to_string(demo.dir.path().join("demo.log")).unwrap_or_default();
            panic!("kairship demo --fleet real: {e}:\n{log}");
        }
        Err(e) => panic!(
            "the real fleet never came up ({e}); see {}",
            demo.dir.path().display()
        ),
    }
    Some(demo)
}

impl Demo {
    fn kubeconfig(&self, instance: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("kubeconfigs/{instance}.kubeconfig"))
    }

    /// The instance's own karmada-apiserver, bypassing Kairship.
    fn direct(&self, instance: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("real/{instance}/admin.kubeconfig"))
    }

    fn token(&self, which: &str) -> String {
        self.endpoints["tokens"][which]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn kubectl(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        Command::new(std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    fn ok(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let out = self.kubectl(kubeconfig, args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, kubeconfig: &Path, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(kubeconfig, args)).expect("kubectl prints JSON")
    }

    /// kubectl's JSON once it succeeds (the object may not be there yet).
    async fn eventually_json(
        &self,
        within: Duration,
        what: &str,
        kubeconfig: &Path,
        args: &[&str],
    ) -> Value {
        eventually(within, what, || {
            let out = self.kubectl(kubeconfig, args);
            async move {
                out.status
                    .success()
                    .then(|| serde_json::from_slice(&out.stdout).ok())
                    .flatten()
            }
        })
        .await
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        let v = format!("Bearer {}", self.token("admin"));
        r.metadata_mut()
            .insert("authorization", v.parse().expect("metadata"));
        r
    }

    async fn channel(&self) -> tonic::transport::Channel {
        let grpc = self.endpoints["grpc"].as_str().expect("grpc");
        tonic::transport::Channel::from_shared(format!("http://{grpc}"))
            .expect("uri")
            .timeout(Duration::from_secs(15))
            .connect()
            .await
            .expect("grpc connects")
    }

    async fn phase(&self, name: &str) -> String {
        let mut c = InstanceServiceClient::new(self.channel().await);
        c.get_instance(self.request(GetInstanceRequest { name: name.into() }))
            .await
            .ok()
            .and_then(|i| i.into_inner().status.map(|s| s.phase))
            .unwrap_or_default()
    }
}

use common::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kairship_against_real_karmada() {
    let Some(demo) = start().await else { return };
    let proxy1 = demo.kubeconfig("karmada-1");

    // Stats equal to what real Karmada reports in its Clusters' summaries.
    let clusters = demo.json(
        &demo.direct("karmada-1"),
        &["get", "clusters", "-o", "json"],
    );
    let items = clusters["items"].as_array().cloned().unwrap_or_default();
    let nodes: i64 = items
        .iter()
        .map(|c| c["status"]["nodeSummary"]["totalNum"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(items.len(), 2, "{clusters}");
    let channel = demo.channel().await;
    let stats = eventually(
        Duration::from_secs(60),
        "stats equal to the real clusters",
        || {
            let (mut c, req) = (
                InstanceServiceClient::new(channel.clone()),
                demo.request(GetInstanceStatsRequest {
                    name: "karmada-1".into(),
                }),
            );
            async move {
                let s = c.get_instance_stats(req).await.ok()?.into_inner();
                (s.clusters_ready == 2 && i64::from(s.nodes_total) == nodes && s.nodes_total > 0)
                    .then_some(s)
            }
        },
    )
    .await;
    assert_eq!(stats.cpu_allocatable, "32", "{stats:?}");

    // kubectl through the proxy, unchanged: server-side Tables, validation on, server-side
    // apply, patch, explain, watch.
    let table = demo.ok(&proxy1, &["get", "clusters"]);
    assert!(
        table.contains("member1") && table.contains("Push"),
        "{table}"
    );
    let manifest = demo.dir.path().join("cm.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: real-cm, namespace: default}\ndata: {a: \"1\"}\n").expect("write");
    let m = manifest.to_string_lossy().to_string();
    demo.ok(&proxy1, &["apply", "--validate=strict", "-f", &m]);
    demo.ok(&proxy1, &["apply", "--server-side", "-f", &m]);
    demo.ok(
        &proxy1,
        &[
            "patch",
            "configmap",
            "real-cm",
            "-n",
            "default",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ],
    );
    let cm = demo.json(
        &proxy1,
        &["get", "configmap", "real-cm", "-n", "default", "-o", "json"],
    );
    assert_eq!(cm["data"], json!({"a": "1", "b": "2"}));
    let bad = std::fs::write(&manifest, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad-cm, namespace: default}\nnotAField: 1\n");
    assert!(bad.is_ok());
    let out = demo.kubectl(&proxy1, &["apply", "--validate=strict", "-f", &m]);
    assert!(
        !out.status.success(),
        "validation let an unknown field through"
    );
    let explained = demo.ok(&proxy1, &["explain", "propagationpolicy.spec.placement"]);
    assert!(explained.contains("clusterAffinity"), "{explained}");
    let watched = demo.kubectl(
        &proxy1,
        &[
            "get",
            "configmaps",
            "-n",
            "default",
            "--watch",
            "--request-timeout=3s",
        ],
    );
    assert!(String::from_utf8_lossy(&watched.stdout).contains("real-cm"));

    // get --raw, which drops the kubeconfig server's path, reaches the instance by the
    // host the demo's kubeconfig names (tls-server-name), answering as it does directly.
    let kc: Value = serde_json::from_str(&std::fs::read_to_string(&proxy1).expect("kubeconfig"))
        .expect("kubeconfig is JSON");
    assert_eq!(
        kc["clusters"][0]["cluster"]["tls-server-name"],
        "karmada-1.kairship.localtest"
    );
    let direct1 = demo.direct("karmada-1");
    let raw = |kubeconfig: &Path, path: &str| demo.json(kubeconfig, &["get", "--raw", path]);
    assert_eq!(raw(&proxy1, "/version"), raw(&direct1, "/version"));
    let names = |v: Value| -> Vec<Value> {
        v["items"]
            .as_array()
            .map(|a| a.iter().map(|i| i["metadata"]["name"].clone()).collect())
            .unwrap_or_default()
    };
    let member_nodes = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/nodes";
    let through = names(raw(&proxy1, member_nodes));
    assert!(
        !through.is_empty(),
        "member1's nodes through Karmada's cluster proxy"
    );
    assert_eq!(through, names(raw(&direct1, member_nodes)));
    let cm_path = "/api/v1/namespaces/default/configmaps/real-cm";
    assert_eq!(
        raw(&proxy1, cm_path)["data"],
        raw(&direct1, cm_path)["data"]
    );
    println!("host form: kubectl get --raw /version, member1's nodes through the cluster proxy and a ConfigMap answer through Kairship as directly");

    // The nginx sample the demo seeds, as real Karmada leaves it (the same scenario runs
    // against the simulator in tests/sim_conformance), through Kairship's proxy.
    let kubectl = |args: &[&str]| demo.kubectl(&proxy1, args);
    let scenario = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tokio::task::block_in_place(|| nginx::nginx_sample(&kubectl, None, Duration::from_secs(90)))
    }));
    if let Err(failed) = scenario {
        // What the instance itself holds next to what the proxy showed, to tell a cache
        // behind the instance from Karmada placing differently.
        let direct1 = demo.direct("karmada-1");
        for (from, kubeconfig) in [("instance", &direct1), ("proxy", &proxy1)] {
            let rb = demo.kubectl(
                kubeconfig,
                &[
                    "get",
                    "rb",
                    "nginx-deployment",
                    "-n",
                    "default",
                    "-o",
                    "yaml",
                ],
            );
            eprintln!(
                "--- ResourceBinding from the {from}:\n{}{}",
                String::from_utf8_lossy(&rb.stdout),
                String::from_utf8_lossy(&rb.stderr)
            );
        }
        let clusters = demo.kubectl(&direct1, &["get", "clusters", "-o", "wide"]);
        eprintln!(
            "--- Clusters:\n{}",
            String::from_utf8_lossy(&clusters.stdout)
        );
        let log = std::fs::read_to_string(demo.dir.path().join("demo.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        eprintln!(
            "--- demo.log (last lines, newest first):\n{}",
            tail.join("\n")
        );
        std::panic::resume_unwind(failed);
    }
    tokio::task::block_in_place(|| {
        cluster_scoped::cluster_role(&kubectl, demo.dir.path(), Duration::from_secs(90))
    });
    kairship_test_support::scenarios::claims::claiming_policy_only(
        &kubectl,
        WorkloadServiceClient::new(channel.clone()),
        |r| demo.request(r),
        demo.dir.path(),
        Duration::from_secs(90),
    )
    .await;
    // kubectl's Tables from Kairship's cache print what real kube-apiserver prints.
    let client = common::client_from(&proxy1).await;
    tables::tables_match(&client, Duration::from_secs(60)).await;

    // A Deployment and its PropagationPolicy created through the gRPC API are scheduled by
    // real Karmada; WorkloadService shows the real placement.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let policy = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                               "replicaScheduling": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted",
                                   "weightPreference": {"staticWeightList": [
                                       {"targetCluster": {"clusterNames": ["member1"]}, "weight": 2},
                                       {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}}});
    PolicyServiceClient::new(channel.clone())
        .create_policy(demo.request(CreatePolicyRequest {
            instance: "karmada-1".into(),
            object_json: policy.to_string(),
        }))
        .await
        .expect("policy created");
    WorkloadServiceClient::new(channel.clone())
        .create_workload(demo.request(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: deployment.to_string(),
        }))
        .await
        .expect("workload created");
    let placed = eventually(
        Duration::from_secs(90),
        "real Karmada's placement of web",
        || {
            let (mut c, req) = (
                WorkloadServiceClient::new(channel.clone()),
                demo.request(GetWorkloadRequest {
                    instance: "karmada-1".into(),
                    namespace: "default".into(),
                    kind: "Deployment".into(),
                    name: "web".into(),
                }),
            );
            async move {
                let w = c.get_workload(req).await.ok()?.into_inner();
                let p = w.placement.clone()?;
                let mut got: Vec<(String, i32)> = p
                    .clusters
                    .iter()
                    .map(|c| (c.name.clone(), c.replicas))
                    .collect();
                got.sort();
                (got == vec![("member1".to_string(), 2), ("member2".to_string(), 1)]).then_some(w)
            }
        },
    )
    .await;
    assert!(
        placed.policies.iter().any(|p| p.name == "web"),
        "{placed:?}"
    );
    // ...and the members run what Karmada sent them (the execution controller applies it
    // shortly after the scheduler's placement).
    let member1 = demo
        .dir
        .path()
        .join("real/karmada-1-member1/admin.kubeconfig");
    let on_member1 = demo
        .eventually_json(
            Duration::from_secs(60),
            "web on member1",
            &member1,
            &["get", "deployment", "web", "-n", "default", "-o", "json"],
        )
        .await;
    assert_eq!(on_member1["spec"]["replicas"], 2);
    backups::restored_after_loss(&demo, &channel, &member1).await;

    // The caller's identity meets the instance's real RBAC: the viewer reads workloads,
    // never Secrets.
    let viewer = demo.ok(&proxy1, &["config", "view", "--raw", "-o", "json"]);
    let mut kc: Value = serde_json::from_str(&viewer).expect("kubeconfig");
    kc["users"][0]["user"]["token"] = json!(demo.token("viewer"));
    let viewer_kc = demo.dir.path().join("viewer.kubeconfig");
    std::fs::write(&viewer_kc, kc.to_string()).expect("write");
    demo.ok(&viewer_kc, &["get", "deployments", "-A"]);
    demo.ok(&viewer_kc, &["get", "deployments", "-A", "-o", "json"]);
    let out = demo.kubectl(&viewer_kc, &["get", "secrets", "-A"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.to_lowercase().contains("forbidden"),
        "{err}"
    );

    // The Python client's checks, as against the simulated demo, through the proxy and
    // straight against a real karmada-apiserver.
    crate::common::run_python("sim_client.py", vec![proxy1.display().to_string()]).await;
    crate::common::run_python(
        "sim_client.py",
        vec![demo.direct("karmada-2").display().to_string()],
    )
    .await;

    // A Karmada CRD deleted on a real karmada-apiserver, and restored.
    faults::crd_deleted_and_restored(&demo, &proxy1).await;

    // Leader election on the real host's Lease.
    let host = demo.dir.path().join("real/host/admin.kubeconfig");
    let lease = demo.json(
        &host,
        &[
            "get",
            "lease",
            "kairship-controller-manager",
            "-n",
            "kube-system",
            "-o",
            "json",
        ],
    );
    assert_eq!(lease["spec"]["holderIdentity"], "kairship-demo", "{lease}");

    // Fleet search on real Karmada: the nginx sample in both instances, as placed there.
    let found = eventually(
        Duration::from_secs(60),
        "nginx found in both instances",
        || {
            let mut s =
                kairship::proto::search_service_client::SearchServiceClient::new(channel.clone());
            let req = demo.request(SearchRequest {
                kinds: vec!["Deployment".into()],
                label_selector: "app=nginx".into(),
                ..Default::default()
            });
            async move {
                let r = s.search(req).await.ok()?.into_inner();
                let placed = r.hits.iter().filter(|h| {
                    h.placement.as_ref().is_some_and(|p| {
                        let mut cs: Vec<&str> =
                            p.clusters.iter().map(|c| c.name.as_str()).collect();
                        cs.sort();
                        cs == ["member1", "member2"]
                    })
                });
                (placed.count() == 2).then_some(r)
            }
        },
    )
    .await;
    let mut where_: Vec<&str> = found.hits.iter().map(|h| h.instance.as_str()).collect();
    where_.sort();
    assert_eq!(where_, ["karmada-1", "karmada-2"]);

    certificates::listed(&demo).await;
    clusters::pull_mode_token(&demo).await;

    // Each instance registered with Clusterpedia, against its real CRDs.
    clusterpedia::registered(&demo, &["karmada-1", "karmada-2"]).await;

    // The caller's identity: Dex tokens everywhere, and an editor narrowed by the
    // instance's RBAC.
    identity::bind(&demo, "dex-admins", "admin", &["*"], "oidc:kairship-admins");
    identity::narrowed_editor(&demo, &demo.dex).await;
    member_roles::roles_on_members(&demo, &demo.dex).await;
    roles::matrix_and_guardrails(&demo, &demo.dex).await;
    identity::dex_tokens_on_every_surface(&demo, &demo.dex, demo.early_token.clone()).await;

    // Failover by ClusterTaintPolicy, then karmada-2's apiserver killed and restarted.
    let admin = demo.endpoints["sim_admin"]
        .as_str()
        .expect("fault API")
        .to_string();
    faults::failover(&demo, &kubectl, &admin).await;
    faults::instance_killed(&demo, &proxy1, &admin).await;

    // Deleting an Instance takes its Clusterpedia registration along, and only its.
    clusterpedia::removed_with_the_instance(&demo, "karmada-2", "karmada-1").await;
}
