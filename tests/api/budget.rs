//! Cache budgets: an instance whose objects pass what Kairship may keep of it (by count, or
//! one object by size) loses its caches, shows Degraded naming the budget, and is read
//! through to the instance; the other instance keeps serving from its cache.

use std::time::Duration;

use kairship::crd::Phase;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::ListWorkloadsRequest;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::server::Api as KairshipApi;

fn deployment(name: &str, annotation_bytes: usize) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"filler": "x".repeat(annotation_bytes)}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    }))
    .expect("deployment")
}

async fn set_budget(api: &KairshipApi, instance: &str, budget: serde_json::Value) {
    api.env
        .instances()
        .patch(
            instance,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"cacheBudget": budget}})),
        )
        .await
        .expect("budget set");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_over_its_cache_budget_is_read_through_and_alone_in_it() {
    let api = KairshipApi::start(2).await;
    let deployments = |instance: &str| {
        let api = &api;
        let instance = instance.to_string();
        async move {
            let c = api.env.sim.client(&instance).await;
            Api::<DynamicObject>::namespaced_with(
                c,
                "default",
                &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            )
        }
    };
    // karmada-1 may keep 40 objects; it gets more.
    set_budget(&api, "karmada-1", json!({"maxObjects": 40})).await;
    let on_1 = deployments("karmada-1").await;
    for i in 0..45 {
        on_1.create(&PostParams::default(), &deployment(&format!("d-{i}"), 10))
            .await
            .expect("create");
    }
    let status = api
        .env
        .wait_phase("karmada-1", Phase::Degraded, Duration::from_secs(30))
        .await;
    let said = serde_json::to_string(&status.conditions).expect("json");
    assert!(said.contains("over its cache budget"), "{said}");
    assert!(said.contains("more than its budget of 40"), "{said}");
    // Its reads go to the instance: every Deployment is there, from the instance.
    let kc = api.proxy_kubeconfig("karmada-1");
    let out = api.kubectl_with(&kc, &["get", "deployments", "-o", "name"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.lines().count() >= 45, "{listed}");
    // The views served only from the cache say why they cannot answer.
    let e = WorkloadServiceClient::new(api.channel.clone())
        .list_workloads(ListWorkloadsRequest {
            instance: "karmada-1".into(),
            ..Default::default()
        })
        .await
        .expect_err("no cache to answer from");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("cache budget"), "{e:?}");
    // The other instance does not notice: it serves from its cache as before.
    deployments("karmada-2")
        .await
        .create(&PostParams::default(), &deployment("web", 10))
        .await
        .expect("create");
    kairship_test_support::eventually(
        Duration::from_secs(10),
        "karmada-2's workload from its cache",
        || async {
            let w = WorkloadServiceClient::new(api.channel.clone())
                .list_workloads(ListWorkloadsRequest {
                    instance: "karmada-2".into(),
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            w.workloads
                .iter()
                .any(|w| w.metadata.as_ref().is_some_and(|m| m.name == "web"))
                .then_some(())
        },
    )
    .await;

    // One object larger than an object may be: named in the status.
    set_budget(&api, "karmada-2", json!({"maxObjectBytes": 20000})).await;
    api.env
        .wait_phase("karmada-2", Phase::Running, Duration::from_secs(30))
        .await;
    deployments("karmada-2")
        .await
        .create(&PostParams::default(), &deployment("big", 30_000))
        .await
        .expect("create");
    let status = api
        .env
        .wait_phase("karmada-2", Phase::Degraded, Duration::from_secs(30))
        .await;
    let said = serde_json::to_string(&status.conditions).expect("json");
    assert!(said.contains("Deployment default/big keeps"), "{said}");
    // Raised again, the instance caches and serves as before.
    set_budget(&api, "karmada-2", json!({"maxObjectBytes": 100000})).await;
    api.env
        .wait_phase("karmada-2", Phase::Running, Duration::from_secs(30))
        .await;
    api.stop().await;
}
