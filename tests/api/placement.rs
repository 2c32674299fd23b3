//! Where workloads run, as Kairship shows it: Karmada's nginx sample created over gRPC is
//! placed by the instance's Karmada, and WorkloadService, REST and `kairship ctl
//! workloads` show the per-cluster replicas and readiness; cordoning a cluster keeps new
//! placements off it.

use std::time::Duration;

use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::policy_service_client::PolicyServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use serde_json::{json, Value};

use crate::common::eventually;
use crate::rest::{call, P};
use crate::server::Api;

fn sample(file: &str) -> Value {
    let path = format!(
        "{}/../shared/karmada/samples/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("the upstream sample");
    let mut v: Value = serde_saphyr::from_str(&text).expect("YAML");
    v["metadata"]["namespace"] = json!("default");
    v
}

fn placed(w: &Workload) -> Vec<(String, i32, i32)> {
    let Some(p) = &w.placement else { return vec![] };
    let mut out: Vec<(String, i32, i32)> = p
        .clusters
        .iter()
        .map(|c| {
            let ready = p
                .aggregated_status
                .iter()
                .find(|a| a.cluster_name == c.name)
                .map_or(0, |a| a.ready_replicas);
            (c.name.clone(), c.replicas, ready)
        })
        .collect();
    out.sort();
    out
}

async fn workload(api: &Api, name: &str) -> Option<Workload> {
    WorkloadServiceClient::new(api.channel.clone())
        .get_workload(GetWorkloadRequest {
            instance: "karmada-1".into(),
            namespace: "default".into(),
            kind: "Deployment".into(),
            name: name.into(),
        })
        .await
        .ok()
        .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_readiness_and_cordon() {
    let api = Api::start(1).await;
    let mut policies = PolicyServiceClient::new(api.channel.clone());
    for file in ["nginx-propagationpolicy.yaml", "nginx-overridepolicy.yaml"] {
        policies
            .create_policy(CreatePolicyRequest {
                instance: "karmada-1".into(),
                object_json: sample(file).to_string(),
            })
            .await
            .expect("policy created");
    }
    WorkloadServiceClient::new(api.channel.clone())
        .create_workload(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: sample("nginx-deployment.yaml").to_string(),
        })
        .await
        .expect("workload created");

    // 1 replica on member1 and 1 on member2, both ready; the template aggregates 2.
    let w = eventually(
        Duration::from_secs(30),
        "nginx placed and ready",
        || async {
            let w = workload(&api, "nginx").await?;
            (placed(&w) == vec![("member1".into(), 1, 1), ("member2".into(), 1, 1)]
                && w.ready_replicas == 2)
                .then_some(w)
        },
    )
    .await;
    let p = w.placement.clone().expect("placement");
    assert_eq!(p.binding_name, "nginx-deployment");
    assert!(
        p.conditions
            .iter()
            .any(|c| c.r#type == "Scheduled" && c.status == "True"),
        "{p:?}"
    );
    let names: Vec<&str> = w.policies.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"nginx-propagation") && names.contains(&"nginx-op"),
        "{names:?}"
    );

    // The same through REST.
    let c = crate::rest::client(&api).await;
    let (code, body) = call(
        &c,
        "GET",
        &format!("{P}/instances/karmada-1/namespaces/default/workloads/Deployment/nginx"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let clusters: Vec<&str> = body["placement"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(clusters, ["member1", "member2"], "{body}");
    assert_eq!(
        body["placement"]["aggregatedStatus"][0]["readyReplicas"], 1,
        "{body}"
    );

    // And through `kairship ctl`.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args([
            "ctl",
            "--grpc",
            &api.grpc_addr.to_string(),
            "workloads",
            "get",
            "karmada-1",
            "nginx",
        ])
        .output()
        .expect("kairship ctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("member1") && l.contains("Healthy")),
        "{text}"
    );
    assert!(
        text.contains("nginx-deployment") && text.contains("ready 2/2"),
        "{text}"
    );

    // Cordon member2: a new workload is placed on member1 only.
    let mut clusters = ClusterServiceClient::new(api.channel.clone());
    let cordoned = clusters
        .cordon_cluster(CordonClusterRequest {
            instance: "karmada-1".into(),
            name: "member2".into(),
        })
        .await
        .expect("cordoned")
        .into_inner();
    assert!(
        cordoned.unschedulable && cordoned.taints.iter().any(|t| t.effect == "NoSchedule"),
        "{cordoned:?}"
    );
    let missing = clusters
        .cordon_cluster(CordonClusterRequest {
            instance: "karmada-1".into(),
            name: "member9".into(),
        })
        .await
        .expect_err("no such cluster");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let pp = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}});
    policies
        .create_policy(CreatePolicyRequest {
            instance: "karmada-1".into(),
            object_json: pp.to_string(),
        })
        .await
        .expect("policy");
    let mut web = sample("nginx-deployment.yaml");
    web["metadata"]["name"] = json!("web");
    WorkloadServiceClient::new(api.channel.clone())
        .create_workload(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: web.to_string(),
        })
        .await
        .expect("workload");
    eventually(
        Duration::from_secs(30),
        "web placed on member1 only",
        || async {
            let w = workload(&api, "web").await?;
            (placed(&w).iter().map(|p| p.0.as_str()).collect::<Vec<_>>() == ["member1"])
                .then_some(())
        },
    )
    .await;
    let back = clusters
        .uncordon_cluster(CordonClusterRequest {
            instance: "karmada-1".into(),
            name: "member2".into(),
        })
        .await
        .expect("uncordoned")
        .into_inner();
    assert!(!back.unschedulable && back.taints.is_empty(), "{back:?}");
    api.stop().await;
}
