//! InstanceClasses on the simulated fleet: managed instances made from a class carry its
//! release and spec under what each sets itself; when the class changes, each Instance's
//! status lists where it now differs, field by field; a FleetRollout of the class brings
//! its instances (and no other) in line, what each set itself kept.

use std::time::Duration;

use kairship::crd::{InstanceClass, InstanceClassSpec};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{
    ClassDrift, CreateInstanceRequest, PlanRolloutRequest, RolloutOptions, RolloutSpec,
    StartRolloutRequest,
};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::eventually;

fn fields(d: &[ClassDrift]) -> Vec<(String, bool)> {
    d.iter().map(|d| (d.field.clone(), d.overridden)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_from_a_class_show_their_drift_and_a_class_rollout_brings_them_in_line() {
    let api = crate::server::Api::start(1).await;
    let host = api.env.host.clone();
    let classes: kube::Api<InstanceClass> = kube::Api::all(host.clone());
    let mut class = InstanceClass::new(
        "standard",
        InstanceClassSpec {
            description: "what every team instance runs".into(),
            karmada_version: Some("v1.12.0".into()),
            karmada_spec: Some(json!({
                "featureGates": {"Failover": true},
                "components": {"karmadaScheduler": {"replicas": 2}}
            })),
            ..Default::default()
        },
    );
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("class created");
    let c = InstanceServiceClient::new(api.channel.clone());
    let made = |name: &str, class: &str, own_replicas: Option<i32>| {
        let mut i = crate::server::managed_instance(name);
        if let Some(s) = i.spec.as_mut() {
            s.class_name = class.into();
            if let Some(r) = own_replicas {
                s.component_replicas = [("karmadaScheduler".to_string(), r)].into();
            }
        }
        CreateInstanceRequest { instance: Some(i) }
    };
    let e = c
        .clone()
        .create_instance(made("std-x", "no-such-class", None))
        .await
        .expect_err("an unknown class");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("instance.spec.class_name"), "{e:?}");
    // The class reaches Kairship's watch first.
    eventually(Duration::from_secs(10), "std-a made from the class", || {
        let c = c.clone();
        async move {
            c.clone()
                .create_instance(made("std-a", "standard", None))
                .await
                .ok()
        }
    })
    .await;
    c.clone()
        .create_instance(made("std-b", "standard", Some(3)))
        .await
        .expect("std-b");
    let instances = api.env.instances();
    let b = instances.get("std-b").await.expect("std-b");
    let managed = b.spec.managed.clone().expect("managed");
    let ks = managed.karmada_spec.expect("karmada spec");
    assert_eq!(ks["featureGates"]["Failover"], true, "from the class: {ks}");
    assert_eq!(
        ks["components"]["karmadaScheduler"]["replicas"], 3,
        "its own wins: {ks}"
    );
    assert_eq!(ks["components"]["karmadaScheduler"]["imageTag"], "v1.12.0");
    assert_eq!(
        managed.overrides,
        Some(json!({"components": {"karmadaScheduler": {"replicas": 3}}}))
    );
    for n in ["std-a", "std-b"] {
        eventually(
            Duration::from_secs(60),
            &format!("{n} Running v1.12.0"),
            || {
                let c = c.clone();
                async move {
                    let s = crate::server::status_of(&c, n).await?;
                    (s.phase == "Running" && s.karmada_version == "v1.12.0").then_some(())
                }
            },
        )
        .await;
    }
    let s = crate::server::status_of(&c, "std-b").await.expect("status");
    assert_eq!(
        fields(&s.drift),
        [("/components/karmadaScheduler/replicas".to_string(), true)],
        "only its own setting differs"
    );
    assert!(crate::server::status_of(&c, "std-a")
        .await
        .expect("status")
        .drift
        .is_empty());

    // The class moves on: v1.13.0 and the gate off. Nothing changes by itself; each
    // instance shows where it now differs.
    class.spec.karmada_version = Some("v1.13.0".into());
    class.spec.karmada_spec = Some(json!({
        "featureGates": {"Failover": false},
        "components": {"karmadaScheduler": {"replicas": 2}}
    }));
    classes
        .patch(
            "standard",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": class.spec})),
        )
        .await
        .expect("class changed");
    let drift = eventually(Duration::from_secs(30), "std-a drifts", || {
        let c = c.clone();
        async move {
            let d = crate::server::status_of(&c, "std-a").await?.drift;
            d.iter()
                .any(|x| x.field == "/featureGates/Failover")
                .then_some(d)
        }
    })
    .await;
    let gate = drift
        .iter()
        .find(|d| d.field == "/featureGates/Failover")
        .expect("the gate");
    assert_eq!(
        (gate.class_value.as_str(), gate.instance_value.as_str()),
        ("false", "true")
    );
    assert!(drift
        .iter()
        .any(|d| d.field == "/components/karmadaScheduler/imageTag"
            && d.class_value == "\"v1.13.0\""));
    assert_eq!(
        crate::server::status_of(&c, "std-a")
            .await
            .expect("status")
            .karmada_version,
        "v1.12.0",
        "a class change moves nothing by itself"
    );

    // The rollout of the class: its two instances, not karmada-1.
    let mut r = RolloutServiceClient::new(api.channel.clone());
    let spec = RolloutSpec {
        class_name: "standard".into(),
        canary: 1,
        percentages: vec![100],
        ..Default::default()
    };
    let plan = r
        .plan_rollout(PlanRolloutRequest {
            spec: Some(spec.clone()),
        })
        .await
        .expect("plan")
        .into_inner();
    let planned: Vec<(String, String)> = plan
        .waves
        .iter()
        .flat_map(|w| &w.instances)
        .map(|i| (i.name.clone(), i.to_version.clone()))
        .collect();
    assert_eq!(
        planned,
        [
            ("std-a".to_string(), "v1.13.0".to_string()),
            ("std-b".to_string(), "v1.13.0".to_string())
        ]
    );
    r.start_rollout(StartRolloutRequest {
        name: "standard-2".into(),
        spec: Some(spec),
        options: Some(RolloutOptions {
            soak_seconds: 1,
            ..Default::default()
        }),
    })
    .await
    .expect("started");
    crate::rollouts::rollout_in(&r, "standard-2", "Completed", Duration::from_secs(180)).await;
    for n in ["std-a", "std-b"] {
        let i = instances.get(n).await.expect(n);
        let ks = i.spec.managed.and_then(|m| m.karmada_spec).expect("spec");
        assert_eq!(ks["featureGates"]["Failover"], false, "{n}: {ks}");
        let want = if n == "std-b" { 3 } else { 2 };
        assert_eq!(
            ks["components"]["karmadaScheduler"]["replicas"], want,
            "{n}: {ks}"
        );
        let s = eventually(Duration::from_secs(30), &format!("{n} in line"), || {
            let c = c.clone();
            async move {
                let s = crate::server::status_of(&c, n).await?;
                (s.drift.iter().all(|d| d.overridden)).then_some(s)
            }
        })
        .await;
        assert_eq!(
            (s.phase.as_str(), s.karmada_version.as_str()),
            ("Running", "v1.13.0"),
            "{n}"
        );
    }
    api.stop().await;
}
