//! deploy/ is valid against the Kubernetes schemas, and its RBAC allows exactly the host
//! API calls Kairship makes: a scenario exercising every controller and API path runs with
//! the host auditing Kairship's own user, then tests/python/check_deploy.py compares.

use std::time::Duration;

use kairship::actors::leader::LeaderConfig;
use kairship::crd::{InstanceRegistration, InstanceRegistrationSpec, Phase};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use kube::api::{Api, PostParams};

use crate::common::eventually;
use crate::harness::NS;
use crate::server::Api as KairshipApi;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_manifests_are_valid_and_rbac_covers_exactly_the_calls_made() {
    let lease = LeaderConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
        ..LeaderConfig::new(NS, "kairship-controller-manager", "kairship-test")
    };
    let api = KairshipApi::start_with(1, Some(lease)).await;
    let mut c = InstanceServiceClient::new(api.channel.clone());

    // A stale registration for an instance about to be created: the registry updates it.
    let regs: Api<InstanceRegistration> = Api::all(api.env.host.clone());
    let stale = InstanceRegistration::new(
        "late",
        InstanceRegistrationSpec {
            instance_name: "late".into(),
            instance_uid: "old".into(),
            mode: "External".into(),
            api_endpoint: None,
        },
    );
    regs.create(&PostParams::default(), &stale)
        .await
        .expect("stale registration");
    let external = InstanceSpec {
        mode: InstanceMode::External as i32,
        kubeconfig_secret_ref: Some(SecretKeyRef {
            namespace: NS.into(),
            name: "karmada-1-kubeconfig".into(),
            key: String::new(),
        }),
        ..Default::default()
    };
    let meta = |n: &str| {
        Some(ObjectMeta {
            name: n.into(),
            ..Default::default()
        })
    };
    c.create_instance(CreateInstanceRequest {
        instance: Some(Instance {
            metadata: meta("late"),
            spec: Some(external.clone()),
            status: None,
        }),
    })
    .await
    .expect("create late");
    let managed = InstanceSpec {
        mode: InstanceMode::Managed as i32,
        ..Default::default()
    };
    c.create_instance(CreateInstanceRequest {
        instance: Some(Instance {
            metadata: meta("team-m"),
            spec: Some(managed),
            status: None,
        }),
    })
    .await
    .expect("create managed");
    api.env
        .wait_phase("late", Phase::Running, Duration::from_secs(20))
        .await;
    api.env
        .wait_phase("team-m", Phase::Running, Duration::from_secs(30))
        .await;
    eventually(
        Duration::from_secs(10),
        "the stale registration updated",
        || async {
            regs.get("late")
                .await
                .ok()
                .filter(|r| r.spec.instance_uid != "old")
        },
    )
    .await;
    let paused = InstanceSpec {
        paused: true,
        ..external
    };
    c.update_instance(UpdateInstanceRequest {
        instance: Some(Instance {
            metadata: meta("late"),
            spec: Some(paused),
            status: None,
        }),
    })
    .await
    .expect("update");
    for name in ["late", "team-m"] {
        c.delete_instance(DeleteInstanceRequest { name: name.into() })
            .await
            .expect("delete");
    }
    let instances = api.env.instances();
    eventually(
        Duration::from_secs(30),
        "both deleted instances cleaned up",
        || async {
            (instances.get_opt("late").await.ok()?.is_none()
                && instances.get_opt("team-m").await.ok()?.is_none())
            .then_some(())
        },
    )
    .await;
    let host = api.env.sim.fleet.host().clone();
    api.stop().await;

    let calls: Vec<_> = host
        .audit()
        .into_iter()
        .filter(|e| e.user == "kairship")
        .collect();
    assert!(!calls.is_empty(), "the audit recorded Kairship's calls");
    let scratch = tempfile::tempdir().expect("tempdir");
    let audit = scratch.path().join("kairship-audit.json");
    std::fs::write(&audit, serde_json::to_vec_pretty(&calls).expect("json")).expect("write audit");
    let deploy = crate::common::repo_path("deploy");
    crate::common::run_python(
        "check_deploy.py",
        vec![deploy.display().to_string(), audit.display().to_string()],
    )
    .await;
}
