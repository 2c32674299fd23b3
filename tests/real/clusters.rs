//! Member clusters joined and removed through Kairship on real Karmada (issue 41): a new
//! member joined over REST as an admin (a viewer and an editor refused, audited; an
//! existing name, a wrong CA and an unreachable server refused with errors naming them),
//! a workload propagated to it and seen in stats and placement, removal refused while it
//! runs there, forced removal through `kairship ctl` (Karmada moves it, the member is left
//! clean), and the member joined again through `kairship ctl`.

use std::time::Duration;

use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use kairship_realfleet::apiserver::ApiServer;
use kairship_test_support::{holds, PROCESS_POLL};
use serde_json::{json, Value};

use crate::{eventually, Demo};

const CLUSTER: &str = "member3";

fn ctl(demo: &Demo, args: &[&str]) -> std::process::Output {
    kairship_test_support::process::ctl(env!("CARGO_BIN_EXE_kairship"), demo.dir.path(), args)
}

fn ctl_json(demo: &Demo, args: &[&str]) -> Value {
    kairship_test_support::process::ctl_json(env!("CARGO_BIN_EXE_kairship"), demo.dir.path(), args)
}

/// POSTs `body` to REST `path` as `token`: the HTTP status and the answer's text.
async fn post(demo: &Demo, token: &str, path: &str, body: &Value) -> (u16, String) {
    use http_body_util::BodyExt;
    let client = crate::identity::rest(demo, token).await;
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .expect("request");
    let resp = client.send(req).await.expect("REST answers");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn join_body(kubeconfig: &str) -> Value {
    json!({"name": CLUSTER, "kubeconfig": kubeconfig, "region": "eu-west"})
}

/// Joins `member` to karmada-1 as `member3` over REST, after the refusals.
pub async fn join_over_rest(demo: &Demo, alice: &str, member: &ApiServer) {
    let kubeconfig = std::fs::read_to_string(&member.kubeconfig).expect("member kubeconfig");
    let path = "/apis/kairship.io/v1alpha1/instances/karmada-1/clusters";
    // A viewer of karmada-1 and an editor of karmada-2 may not.
    let (code, text) = post(demo, &demo.token("viewer"), path, &join_body(&kubeconfig)).await;
    assert!(
        code == 403 && text.contains("admin"),
        "viewer: {code} {text}"
    );
    let editor_path = "/apis/kairship.io/v1alpha1/instances/karmada-2/clusters";
    let (code, text) = post(demo, alice, editor_path, &join_body(&kubeconfig)).await;
    assert!(
        code == 403 && text.contains("admin"),
        "editor: {code} {text}"
    );
    // Wrong input, named.
    let admin = demo.token("admin");
    let host_ca = kairship_wire::kubeconfig::build("x", &member.url, &other_ca(demo), "t");
    let wrong_ca = serde_json::to_string(&host_ca).expect("kubeconfig");
    let (code, text) = post(demo, &admin, path, &join_body(&wrong_ca)).await;
    assert!(
        code == 400 && text.contains("certificate"),
        "wrong CA: {code} {text}"
    );
    let unreachable =
        kairship_wire::kubeconfig::build("x", "https://127.0.0.1:1", &member.ca_pem, "t");
    let unreachable = serde_json::to_string(&unreachable).expect("kubeconfig");
    let (code, text) = post(demo, &admin, path, &join_body(&unreachable)).await;
    assert!(
        code == 400 && text.contains("unreachable"),
        "unreachable: {code} {text}"
    );
    let mut exec = kairship_wire::kubeconfig::build("x", &member.url, &member.ca_pem, "t");
    exec["users"][0]["user"] =
        json!({"exec": {"command": "/bin/sh", "apiVersion": "client.authentication.k8s.io/v1"}});
    let (code, text) = post(demo, &admin, path, &join_body(&exec.to_string())).await;
    assert!(
        code == 400 && text.contains("exec"),
        "a kubeconfig with an exec plugin: {code} {text}"
    );
    // The admin joins it.
    let (code, text) = post(demo, &admin, path, &join_body(&kubeconfig)).await;
    assert_eq!(code, 200, "join: {text}");
    let joined: Value = serde_json::from_str(&text).expect("a Cluster");
    assert_eq!(joined["metadata"]["name"], CLUSTER, "{joined}");
    assert_eq!(joined["syncMode"], "Push", "{joined}");
    // Again: the name is taken.
    let (code, text) = post(demo, &admin, path, &join_body(&kubeconfig)).await;
    assert!(
        code == 409 && text.contains("already"),
        "joined twice: {code} {text}"
    );
    // Audited: the refusals and the join.
    let log = demo.endpoints["audit_log"].as_str().expect("audit_log");
    let events: Vec<Value> = std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| {
            e["objectRef"]["resource"] == "clusters" && e["objectRef"]["name"] == CLUSTER
        })
        .collect();
    for code in [403, 200, 409] {
        assert!(
            events
                .iter()
                .any(|e| e["responseStatus"]["code"] == code && e["verb"] == "create"),
            "no audit event of a join answered {code}: {events:?}"
        );
    }
    println!("join over REST: viewer and editor refused (audited), wrong CA, unreachable server, exec plugin and a taken name refused with errors naming them; admin joined {CLUSTER}");
}

/// A CA that did not sign `member`'s certificate (karmada-1's own).
fn other_ca(demo: &Demo) -> String {
    let kc = std::fs::read_to_string(demo.direct("karmada-1")).expect("karmada-1 kubeconfig");
    // Written by kairship_wire: JSON, which is YAML too.
    let kc: Value = serde_json::from_str(&kc).expect("kubeconfig as JSON");
    let b64 = kc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("CA data");
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    String::from_utf8(pem).expect("PEM")
}

fn member_kubectl(demo: &Demo, member: &ApiServer, args: &[&str]) -> std::process::Output {
    demo.kubectl(&member.kubeconfig, args)
}

/// A workload on `member3` and `member1`, removal refused while it runs on member3, then
/// forced through `kairship ctl`: Karmada moves it, the Cluster goes, the member is clean;
/// then joined again through `kairship ctl`, and removed (nothing left there) over gRPC.
pub async fn workload_then_remove(demo: &Demo, member: &ApiServer) {
    let channel = demo.channel().await;
    let mut clusters = ClusterServiceClient::new(channel.clone());
    eventually(Duration::from_secs(90), "member3 Ready in Kairship", || {
        let mut c = clusters.clone();
        let req = demo.request(GetClusterRequest {
            instance: "karmada-1".into(),
            name: CLUSTER.into(),
        });
        async move {
            let got = c.get_cluster(req).await.ok()?.into_inner();
            got.ready.then_some(())
        }
    })
    .await;
    let kc = demo.kubeconfig("karmada-1");
    let manifest = demo.dir.path().join("moving.json");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "moving", "namespace": "default", "labels": {"app": "moving"}},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "moving"}},
                  "template": {"metadata": {"labels": {"app": "moving"}},
                               "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}},
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
         "metadata": {"name": "moving", "namespace": "default"},
         "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "moving"}],
                  "placement": {"clusterAffinity": {"clusterNames": ["member1", CLUSTER]},
                                "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}},
    ]});
    std::fs::write(&manifest, objects.to_string()).expect("manifest");
    demo.ok(&kc, &["apply", "-f", &manifest.display().to_string()]);
    let placed = |want: &'static [&'static str]| {
        let channel = channel.clone();
        move || {
            let mut w = WorkloadServiceClient::new(channel.clone());
            let req = demo.request(GetWorkloadRequest {
                instance: "karmada-1".into(),
                namespace: "default".into(),
                kind: "Deployment".into(),
                name: "moving".into(),
            });
            async move {
                let got = w.get_workload(req).await.ok()?.into_inner();
                let mut cs: Vec<String> = got
                    .placement?
                    .clusters
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                cs.sort();
                (cs == want).then_some(())
            }
        }
    };
    eventually(
        Duration::from_secs(90),
        "moving placed on member1 and member3",
        placed(&["member1", "member3"]),
    )
    .await;
    eventually(Duration::from_secs(60), "moving on member3 itself", || {
        let out = member_kubectl(demo, member, &["get", "deploy", "moving", "-n", "default"]);
        async move { out.status.success().then_some(()) }
    })
    .await;
    // Stats are recounted at the instance's next tick after the Cluster appears.
    let instances = InstanceServiceClient::new(channel.clone());
    let stats = eventually(Duration::from_secs(20), "3 clusters in the stats", || {
        let mut instances = instances.clone();
        async move {
            let stats = instances
                .get_instance_stats(demo.request(GetInstanceStatsRequest {
                    name: "karmada-1".into(),
                }))
                .await
                .ok()?
                .into_inner();
            (stats.clusters_total == 3).then_some(stats)
        }
    })
    .await;
    assert_eq!(stats.clusters_total, 3, "{stats:?}");

    // Refused while it runs there, naming it.
    let refused = clusters
        .remove_cluster(demo.request(RemoveClusterRequest {
            instance: "karmada-1".into(),
            name: CLUSTER.into(),
            ..Default::default()
        }))
        .await
        .expect_err("removal refused");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("default/Deployment/moving"),
        "{}",
        refused.message()
    );

    // Another cluster's kubeconfig is refused before anything is removed: its
    // kube-system uid is not the Cluster's id.
    let other = demo
        .dir
        .path()
        .join("real/karmada-1-member1/admin.kubeconfig");
    let wrong = clusters
        .remove_cluster(demo.request(RemoveClusterRequest {
            instance: "karmada-1".into(),
            name: CLUSTER.into(),
            force: true,
            kubeconfig: std::fs::read_to_string(&other).expect("member1's kubeconfig"),
            ..Default::default()
        }))
        .await
        .expect_err("another member's kubeconfig refused");
    assert_eq!(wrong.code(), tonic::Code::InvalidArgument, "{wrong:?}");
    assert!(
        wrong.message().contains("is not member")
            && wrong.message().contains("nothing was removed"),
        "{}",
        wrong.message()
    );
    let still = member_kubectl(demo, member, &["get", "deploy", "moving", "-n", "default"]);
    assert!(
        still.status.success(),
        "the refused removal touched the member"
    );

    // Forced, through kairship ctl, with the member's kubeconfig to clean it.
    let kubeconfig = member.kubeconfig.display().to_string();
    let removed = ctl_json(
        demo,
        &[
            "remove",
            "karmada-1",
            CLUSTER,
            "--force",
            "--wait",
            "120",
            "--cluster-kubeconfig",
            &kubeconfig,
        ],
    );
    let list = |k: &str| -> Vec<String> {
        removed[k]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    assert!(
        list("workloads").contains(&"default/Deployment/moving".to_string()),
        "{removed}"
    );
    assert!(
        list("notMoved").is_empty(),
        "Karmada did not move: {removed}"
    );
    let role = format!("ClusterRole karmada-controller-manager:karmada-{CLUSTER}");
    assert!(list("memberCleaned").contains(&role), "{removed}");
    eventually(
        Duration::from_secs(60),
        "moving placed on member1 only",
        placed(&["member1"]),
    )
    .await;
    let clean = holds(Duration::from_secs(60), PROCESS_POLL, || {
        let deploy = member_kubectl(demo, member, &["get", "deploy", "moving", "-n", "default"]);
        let role = member_kubectl(
            demo,
            member,
            &[
                "get",
                "clusterrole",
                &format!("karmada-controller-manager:karmada-{CLUSTER}"),
            ],
        );
        let ns = member_kubectl(
            demo,
            member,
            &["get", "ns", "karmada-cluster", "-o", "json"],
        );
        let ns_gone = !ns.status.success()
            || serde_json::from_slice::<Value>(&ns.stdout)
                .is_ok_and(|n| n["status"]["phase"] == "Terminating");
        !deploy.status.success() && !role.status.success() && ns_gone
    })
    .await;
    assert!(clean, "member3 was not left clean after its removal");
    let listed = clusters
        .list_clusters(demo.request(ListClustersRequest {
            instance: "karmada-1".into(),
            ..Default::default()
        }))
        .await
        .expect("clusters")
        .into_inner();
    assert!(
        listed
            .clusters
            .iter()
            .all(|c| c.metadata.as_ref().is_none_or(|m| m.name != CLUSTER)),
        "member3 still listed"
    );

    // Joined again through kairship ctl (once its namespace is gone), then removed with
    // nothing of the caller's there: Kairship's own roles do not hold it back.
    eventually(
        Duration::from_secs(60),
        "karmada-cluster gone from member3",
        || {
            let out = member_kubectl(demo, member, &["get", "ns", "karmada-cluster"]);
            async move { (!out.status.success()).then_some(()) }
        },
    )
    .await;
    let joined = ctl_json(
        demo,
        &[
            "join",
            "karmada-1",
            CLUSTER,
            "--cluster-kubeconfig",
            &kubeconfig,
        ],
    );
    assert_eq!(joined["metadata"]["name"], CLUSTER, "{joined}");
    eventually(Duration::from_secs(90), "member3 Ready again", || {
        let mut c = clusters.clone();
        let req = demo.request(GetClusterRequest {
            instance: "karmada-1".into(),
            name: CLUSTER.into(),
        });
        async move {
            c.get_cluster(req)
                .await
                .ok()?
                .into_inner()
                .ready
                .then_some(())
        }
    })
    .await;
    demo.ok(&kc, &["delete", "-f", &manifest.display().to_string()]);
    println!("remove: refused while default/Deployment/moving ran on {CLUSTER}; forced through kairship ctl, Karmada moved it to member1, the member was left clean; joined again through kairship ctl");
}

/// Pull mode: `kairship ctl register-command` writes a bootstrap token to karmada-1 and
/// prints the `karmadactl register` command; the token authenticates against the real
/// karmada-apiserver as Karmada's registering group, and the CA pin is the one kubeadm's
/// recipe computes with openssl. A viewer may not.
pub async fn pull_mode_token(demo: &Demo) {
    let out = ctl(demo, &["register-command", "karmada-1", "--ttl-hours", "1"]);
    assert!(
        out.status.success(),
        "register-command: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let command = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let words: Vec<&str> = command.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .map(|w| w.to_string())
            .unwrap_or_else(|| panic!("{flag} missing in {command:?}"))
    };
    assert!(
        words.starts_with(&["karmadactl", "register"]) && words[2].starts_with("127.0.0.1:"),
        "{command}"
    );
    let (token, pin) = (after("--token"), after("--discovery-token-ca-cert-hash"));
    // kubeadm's recipe for the pin, from karmada-1's CA file.
    let ca = demo.dir.path().join("real/karmada-1/ca.crt");
    let recipe = format!(
        "openssl x509 -pubkey -noout -in {} | openssl pkey -pubin -outform der | sha256sum",
        ca.display()
    );
    let sum = std::process::Command::new("sh")
        .args(["-c", &recipe])
        .output()
        .expect("openssl runs");
    let hex = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert_eq!(pin, format!("sha256:{hex}"), "{command}");
    // The token is who karmada-agent registers as.
    let server = format!("https://{}", words[2]);
    let whoami =
        std::process::Command::new(std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into()))
            .args([
                "--server",
                &server,
                "--token",
                &token,
                "--certificate-authority",
            ])
            .arg(&ca)
            .args(["auth", "whoami", "-o", "json"])
            .output()
            .expect("kubectl runs");
    assert!(
        whoami.status.success(),
        "the token does not authenticate: {}",
        String::from_utf8_lossy(&whoami.stderr)
    );
    let me: Value = serde_json::from_slice(&whoami.stdout).expect("SelfSubjectReview");
    let id = token.split('.').next().unwrap_or_default();
    assert_eq!(
        me["status"]["userInfo"]["username"],
        format!("system:bootstrap:{id}"),
        "{me}"
    );
    assert!(
        me["status"]["userInfo"]["groups"]
            .as_array()
            .is_some_and(|g| g
                .iter()
                .any(|x| x == "system:bootstrappers:karmada:default-cluster-token")),
        "{me}"
    );
    let path = "/apis/kairship.io/v1alpha1/instances/karmada-1/registrationtokens";
    let (code, text) = post(demo, &demo.token("viewer"), path, &json!({})).await;
    assert!(
        code == 403 && text.contains("admin"),
        "viewer: {code} {text}"
    );
    println!("pull mode: register-command printed `karmadactl register` with a bootstrap token that authenticates as system:bootstrap:{id} and the CA pin openssl computes; the viewer refused");
}
