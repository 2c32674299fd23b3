//! A fleet rollout's plan over gRPC and REST on the simulated fleet: the instances a
//! selector picks, in waves, with their maintenance windows and what blocks them (the
//! simulated instances are External: their owners upgrade them); a caller who does not
//! see the whole fleet gets no plan.

use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{PlanRolloutRequest, RolloutSpec};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::auth::{signer, start, ADMIN, VIEWER};

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    let v = format!("Bearer {token}").parse().expect("metadata");
    r.metadata_mut().insert("authorization", v);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_before_anything_moves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let instances = api.env.instances();
    for (name, env) in [("karmada-1", "prod"), ("karmada-2", "staging")] {
        let patch = json!({"metadata": {"labels": {"env": env}}});
        instances
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label");
    }
    let window = json!({"spec": {"maintenanceWindow": {"days": ["Sun"], "start": "03:00", "duration": "1h", "timeZone": "UTC"}}});
    instances
        .patch("karmada-1", &PatchParams::default(), &Patch::Merge(&window))
        .await
        .expect("a window");
    let spec = RolloutSpec {
        karmada_version: "v1.18.2".into(),
        match_labels: [("env".to_string(), "prod".to_string())].into(),
        canary: 1,
        percentages: vec![100],
        ..Default::default()
    };
    let mut c = RolloutServiceClient::new(api.channel.clone());
    let plan = crate::common::eventually(
        std::time::Duration::from_secs(10),
        "the window in the Instance cache",
        || {
            let (mut c, spec) = (c.clone(), spec.clone());
            async move {
                let p = c
                    .plan_rollout(with(ADMIN, PlanRolloutRequest { spec: Some(spec) }))
                    .await
                    .expect("a plan")
                    .into_inner();
                let next = p.waves.first()?.instances.first()?.next_window.clone();
                next.contains("T03:00:00Z").then_some(p)
            }
        },
    )
    .await;
    assert_eq!(plan.waves.len(), 1, "{plan:?}");
    let one = &plan.waves[0].instances[0];
    assert_eq!(one.name, "karmada-1");
    assert!(
        one.blocking.iter().any(|b| b.starts_with("External")),
        "{one:?}"
    );
    assert_eq!(plan.blocked, 1);
    // REST, the same plan.
    let rest = api.https_client(ADMIN).await;
    let (code, body) = kairship_test_support::http::json(
        &rest,
        "POST",
        "/apis/kairship.io/v1alpha1/rollouts:plan",
        &json!({"spec": {"karmadaVersion": "v1.18.2", "canary": 1}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["waves"].as_array().map(Vec::len), Some(2), "{v}");
    // A plan with no release is refused, naming the field.
    let e = c
        .plan_rollout(with(
            ADMIN,
            PlanRolloutRequest {
                spec: Some(RolloutSpec::default()),
            },
        ))
        .await
        .expect_err("no release");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("karmada_version"), "{e:?}");
    // A viewer of one instance does not see the fleet: no plan.
    let e = c
        .plan_rollout(with(VIEWER, PlanRolloutRequest { spec: Some(spec) }))
        .await
        .expect_err("not the whole fleet");
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e:?}");
    api.stop().await;
}
