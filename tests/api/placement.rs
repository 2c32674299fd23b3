//! Where workloads run, as Kairship shows it: the nginx sample applied to a simulated
//! instance (whose Karmada controllers bind, schedule, override and aggregate), read back
//! through WorkloadService over gRPC and REST.

use std::time::Duration;

use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;

use crate::common::{eventually, shared_karmada};
use crate::rest::{call, P};
use crate::server::Api;

fn get(name: &str) -> GetWorkloadRequest {
    GetWorkloadRequest {
        instance: "karmada-1".into(),
        namespace: "default".into(),
        kind: "Deployment".into(),
        name: name.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_sample_placement_through_grpc_and_rest() {
    let api = Api::start(1).await;
    for f in [
        "nginx-deployment.yaml",
        "nginx-propagationpolicy.yaml",
        "nginx-overridepolicy.yaml",
    ] {
        let path = shared_karmada(&format!("samples/{f}"));
        api.env.sim.kubectl(
            "karmada-1",
            &["apply", "-n", "default", "-f", &path.display().to_string()],
        );
    }
    let w = WorkloadServiceClient::new(api.channel.clone());
    let got = eventually(
        Duration::from_secs(30),
        "nginx placed 1/1, ready 2, with both clusters' overrides",
        || {
            let mut w = w.clone();
            async move {
                let x = w.get_workload(get("nginx")).await.ok()?.into_inner();
                let p = x.placement.as_ref()?;
                let placed: Vec<(String, i32)> = p
                    .clusters
                    .iter()
                    .map(|c| (c.name.clone(), c.replicas))
                    .collect();
                let ready = p.aggregated_status.iter().all(|a| a.ready_replicas == 1)
                    && p.aggregated_status.len() == 2;
                let overridden = p.overrides.iter().any(|o| {
                    o.changes
                        .iter()
                        .any(|c| c == "+ /metadata/labels/env: skoala-dev")
                });
                (placed == vec![("member1".into(), 1), ("member2".into(), 1)]
                    && x.ready_replicas == 2
                    && ready
                    && overridden)
                    .then_some(x)
            }
        },
    )
    .await;
    let p = got.placement.expect("placement");
    assert_eq!(p.binding_name, "nginx-deployment");
    let scheduled = p
        .conditions
        .iter()
        .find(|c| c.r#type == "Scheduled")
        .expect("Scheduled condition");
    assert_eq!(scheduled.status, "True");
    let kinds: Vec<(String, String)> = got
        .policies
        .iter()
        .map(|x| (x.kind.clone(), x.name.clone()))
        .collect();
    assert!(
        kinds.contains(&("PropagationPolicy".into(), "nginx-propagation".into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("OverridePolicy".into(), "nginx-op".into())),
        "{kinds:?}"
    );
    let on = |cluster: &str| {
        p.overrides
            .iter()
            .find(|o| o.cluster == cluster)
            .unwrap_or_else(|| panic!("overrides of {cluster}: {:?}", p.overrides))
    };
    assert_eq!(
        on("member2").changes,
        vec![
            "+ /metadata/labels/env: skoala-dev",
            "+ /metadata/labels/env-stat: skoala-stage"
        ]
    );
    assert_eq!(on("member2").policies, vec!["OverridePolicy/nginx-op"]);
    assert_eq!(
        on("member1").changes,
        vec!["+ /metadata/annotations/env: skoala-stage"]
    );

    // The same through REST, in proto3 JSON.
    let c = api.https_client("rest-test-token").await;
    let (code, body) = call(
        &c,
        "GET",
        &format!("{P}/instances/karmada-1/namespaces/default/workloads/Deployment/nginx"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["readyReplicas"], 2);
    assert_eq!(body["placement"]["clusters"][0]["name"], "member1");
    assert_eq!(body["placement"]["clusters"][1]["replicas"], 1);
    assert_eq!(body["placement"]["aggregatedStatus"][0]["readyReplicas"], 1);
    let overrides = body["placement"]["overrides"]
        .as_array()
        .expect("overrides");
    assert_eq!(overrides.len(), 2, "{body}");
    let (code, list) = call(
        &c,
        "GET",
        &format!("{P}/instances/karmada-1/workloads"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let nginx = list["workloads"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["metadata"]["name"] == "nginx"))
        .expect("nginx listed");
    assert_eq!(
        nginx["placement"]["clusters"].as_array().map(Vec::len),
        Some(2)
    );
    pods_and_events(&api, &c).await;
    api.stop().await;
}

/// nginx's pods on both members (the simulator's members run them), read through
/// Karmada's cluster proxy over gRPC and REST; its events; a log the member cannot give,
/// refused naming the pod.
async fn pods_and_events(api: &Api, c: &kube::Client) {
    let mut w = WorkloadServiceClient::new(api.channel.clone());
    let pods = eventually(
        Duration::from_secs(30),
        "nginx's pods Running on both members",
        || {
            let mut w = w.clone();
            async move {
                let r = w
                    .list_workload_pods(ListWorkloadPodsRequest {
                        instance: "karmada-1".into(),
                        namespace: "default".into(),
                        kind: "Deployment".into(),
                        name: "nginx".into(),
                    })
                    .await
                    .ok()?
                    .into_inner();
                let running = r.clusters.len() == 2
                    && r.clusters.iter().all(|c| {
                        c.error.is_empty()
                            && c.pods.len() == 1
                            && c.pods
                                .iter()
                                .all(|p| p.phase == "Running" && p.name.starts_with("nginx-"))
                    });
                running.then_some(r)
            }
        },
    )
    .await;
    let clusters: Vec<&str> = pods.clusters.iter().map(|c| c.cluster.as_str()).collect();
    assert_eq!(clusters, ["member1", "member2"]);
    let first = &pods.clusters[0].pods[0];
    assert_eq!(first.cluster, "member1");
    assert_eq!(first.container_names, ["nginx"]);
    let (code, body) = call(
        c,
        "GET",
        &format!("{P}/instances/karmada-1/namespaces/default/workloads/Deployment/nginx/pods"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["clusters"][1]["pods"][0]["phase"], "Running", "{body}");
    let events = w
        .list_workload_events(ListWorkloadEventsRequest {
            instance: "karmada-1".into(),
            namespace: "default".into(),
            kind: "Deployment".into(),
            name: "nginx".into(),
        })
        .await
        .expect("events")
        .into_inner();
    assert!(events.unavailable.is_empty(), "{:?}", events.unavailable);
    // A workload that is not there is named.
    let missing = w
        .list_workload_pods(ListWorkloadPodsRequest {
            instance: "karmada-1".into(),
            namespace: "default".into(),
            kind: "Deployment".into(),
            name: "absent".into(),
        })
        .await
        .expect_err("no such workload");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    assert!(missing.message().contains("absent"), "{missing:?}");
    // The pod's log: a stream of chunks over gRPC, JSON lines over REST; a container the
    // pod does not have is refused, named.
    let mut logs = w
        .get_pod_logs(GetPodLogsRequest {
            instance: "karmada-1".into(),
            cluster: "member1".into(),
            namespace: "default".into(),
            pod: first.name.clone(),
            tail_lines: 5,
            ..Default::default()
        })
        .await
        .expect("log")
        .into_inner();
    let mut text = String::new();
    while let Some(chunk) = logs.message().await.expect("log chunk") {
        text.push_str(&chunk.text);
    }
    assert!(
        text.contains(&first.name) && text.ends_with('\n'),
        "{text:?}"
    );
    let log = format!(
        "{P}/instances/karmada-1/clusters/member1/namespaces/default/pods/{}/log",
        first.name
    );
    let resp = c
        .send(
            http::Request::get(&log)
                .body(kube::client::Body::empty())
                .expect("request"),
        )
        .await
        .expect("REST log");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    let line: serde_json::Value =
        serde_json::from_slice(body.split(|b| *b == b'\n').next().unwrap_or_default())
            .expect("a JSON line");
    assert_eq!(line["result"]["text"].as_str(), Some(text.as_str()));
    let (code, body) = call(c, "GET", &format!("{log}?container=sidecar"), None).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("sidecar")),
        "{body}"
    );
}

fn deployment_and_policy(name: &str) -> (String, String) {
    let d = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let p = serde_json::json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}});
    (d.to_string(), p.to_string())
}

async fn place(api: &Api, name: &str) -> Vec<String> {
    use kairship::proto::policy_service_client::PolicyServiceClient;
    let mut w = WorkloadServiceClient::new(api.channel.clone());
    let mut p = PolicyServiceClient::new(api.channel.clone());
    let (d, pp) = deployment_and_policy(name);
    w.create_workload(CreateWorkloadRequest {
        instance: "karmada-1".into(),
        object_json: d,
    })
    .await
    .expect("create workload");
    p.create_policy(CreatePolicyRequest {
        instance: "karmada-1".into(),
        object_json: pp,
    })
    .await
    .expect("create policy");
    eventually(
        Duration::from_secs(30),
        &format!("{name} scheduled"),
        || {
            let mut w = w.clone();
            async move {
                let x = w.get_workload(get(name)).await.ok()?.into_inner();
                let p = x.placement?;
                let scheduled = p
                    .conditions
                    .iter()
                    .any(|c| c.r#type == "Scheduled" && c.status == "True");
                scheduled.then(|| p.clusters.into_iter().map(|c| c.name).collect())
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_moves_new_placements_away_and_taints_are_checked() {
    use kairship::proto::cluster_service_client::ClusterServiceClient;
    let api = Api::start(1).await;
    let mut c = ClusterServiceClient::new(api.channel.clone());
    let req = |name: &str| CordonClusterRequest {
        instance: "karmada-1".into(),
        name: name.into(),
    };
    let cordoned = c
        .cordon_cluster(req("member1"))
        .await
        .expect("cordon")
        .into_inner();
    assert!(cordoned.unschedulable);
    assert!(cordoned
        .taints
        .iter()
        .any(|t| t.key == "cluster.karmada.io/unschedulable" && t.effect == "NoSchedule"));
    // Cordoning twice keeps one taint.
    let again = c
        .cordon_cluster(req("member1"))
        .await
        .expect("cordon")
        .into_inner();
    assert_eq!(again.taints.len(), 1, "{:?}", again.taints);
    assert_eq!(place(&api, "web-a").await, vec!["member2"]);

    let open = c
        .uncordon_cluster(req("member1"))
        .await
        .expect("uncordon")
        .into_inner();
    assert!(!open.unschedulable);
    assert!(open.taints.is_empty(), "{:?}", open.taints);
    assert_eq!(place(&api, "web-b").await, vec!["member1", "member2"]);

    // Taints: replaced as given, checked first.
    let bad = c
        .set_cluster_taints(SetClusterTaintsRequest {
            instance: "karmada-1".into(),
            name: "member2".into(),
            taints: vec![Taint {
                key: "k".into(),
                effect: "Sometimes".into(),
                ..Default::default()
            }],
        })
        .await
        .expect_err("bad effect");
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    assert!(
        bad.message().contains("taints[0].effect"),
        "{}",
        bad.message()
    );
    let tainted = c
        .set_cluster_taints(SetClusterTaintsRequest {
            instance: "karmada-1".into(),
            name: "member2".into(),
            taints: vec![Taint {
                key: "dedicated".into(),
                value: "gpu".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }],
        })
        .await
        .expect("taints")
        .into_inner();
    assert_eq!(tainted.taints.len(), 1);
    assert_eq!(place(&api, "web-c").await, vec!["member1"]);
    let missing = c
        .cordon_cluster(req("member9"))
        .await
        .expect_err("no such cluster");
    assert_eq!(missing.code(), tonic::Code::NotFound, "{missing:?}");

    // A member's Nodes through the instance's Cluster proxy.
    let nodes = eventually(Duration::from_secs(30), "member1's nodes", || {
        let mut c = c.clone();
        async move {
            let l = c
                .list_cluster_nodes(ListClusterNodesRequest {
                    instance: "karmada-1".into(),
                    name: "member1".into(),
                })
                .await
                .ok()?
                .into_inner();
            (!l.nodes.is_empty()).then_some(l.nodes)
        }
    })
    .await;
    let cluster = c
        .get_cluster(GetClusterRequest {
            instance: "karmada-1".into(),
            name: "member1".into(),
        })
        .await
        .expect("cluster")
        .into_inner();
    assert_eq!(nodes.len() as i32, cluster.nodes_total);
    assert!(nodes
        .iter()
        .all(|n| n.ready && n.name.starts_with("member1-node-")));
    let err = c
        .list_cluster_nodes(ListClusterNodesRequest {
            instance: "karmada-1".into(),
            name: "member9".into(),
        })
        .await
        .expect_err("no such cluster");
    assert_eq!(err.code(), tonic::Code::NotFound, "{err:?}");

    // REST: the custom verb.
    let h = api.https_client("rest-test-token").await;
    let (code, body) = call(
        &h,
        "POST",
        &format!("{P}/instances/karmada-1/clusters/member2:cordon"),
        Some(serde_json::json!({})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["unschedulable"], true);
    api.stop().await;
}

/// Karmada's claim, not a guess: of two PropagationPolicies selecting a workload (one by
/// `matchExpressions`) the workload view names only the one that claimed it (the shared
/// scenario tests/real runs against real Karmada).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workload_view_names_the_claiming_policy_only() {
    let api = Api::start(1).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubectl = |args: &[&str]| api.env.sim.kubectl_raw("karmada-1", args);
    kairship_test_support::scenarios::claims::claiming_policy_only(
        &kubectl,
        WorkloadServiceClient::new(api.channel.clone()),
        tonic::Request::new,
        dir.path(),
        Duration::from_secs(30),
    )
    .await;
}

/// Failover as Karmada >= 1.14: NotReady alone evicts nothing, a ClusterTaintPolicy's
/// NoExecute taint does, and the workload view's failover history names the eviction (the
/// scenario tests/real runs against real Karmada).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_cluster_taint_policy_evicts_and_the_history_says_so() {
    let api = Api::start(1).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubectl = |args: &[&str]| api.env.sim.kubectl_raw("karmada-1", args);
    kairship_test_support::scenarios::failover::only_a_taint_policy_evicts(
        &kubectl,
        &api.env.sim.fleet.admin_url(),
        WorkloadServiceClient::new(api.channel.clone()),
        tonic::Request::new,
        dir.path(),
        Duration::from_secs(30),
    )
    .await;
}
