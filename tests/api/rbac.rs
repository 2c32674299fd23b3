//! deploy/ is valid against the Kubernetes schemas, and its RBAC allows exactly the host
//! API calls Kairship makes: a scenario exercising every controller and API path runs with
//! the host auditing Kairship's own user, then tests/python/check_deploy.py compares.

use std::time::Duration;

use kairship::auth::AuthConfig;
use kairship::crd::{
    InstanceRegistration, InstanceRegistrationSpec, InstanceRoleBinding, InstanceRoleBindingSpec,
    Phase, Role, Subject, SubjectKind,
};
use kairship::host::leader::LeaderConfig;
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
    // With authentication on, so the binding watch and the webhook's writes are audited.
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "rbac-admin-token,root,0,\"ops\"\n").expect("tokens");
    let secret = dir.path().join("webhook.secret");
    std::fs::write(&secret, "rbac-test-webhook-secret").expect("secret");
    let auth = AuthConfig {
        token_file: Some(tokens),
        webhook_secret_file: Some(secret),
        ..Default::default()
    };
    // Sharded, as the chart's defaults run it: its own Lease, the others' watched.
    let settings = kairship::context::Settings {
        shards: Some(kairship::host::shards::ShardConfig {
            lease_duration: lease.lease_duration,
            renew_deadline: lease.renew_deadline,
            retry_period: lease.retry_period,
            ..kairship::host::shards::ShardConfig::new(NS, "kairship-test", "kairship-test")
        }),
        ..crate::harness::fast_settings()
    };
    let api = KairshipApi::start_settings(1, Some(lease), Some(auth), settings).await;
    let bindings: Api<InstanceRoleBinding> = Api::all(api.env.host.clone());
    bindings
        .create(
            &PostParams::default(),
            &InstanceRoleBinding::new(
                "ops",
                InstanceRoleBindingSpec {
                    role: Role::Admin,
                    instances: vec!["*".into()],
                    subjects: vec![Subject {
                        kind: SubjectKind::Group,
                        name: "ops".into(),
                    }],
                },
            ),
        )
        .await
        .expect("binding");
    let mut c = InstanceServiceClient::with_interceptor(api.channel.clone(), as_rbac_admin);
    eventually(Duration::from_secs(10), "the admin binding cached", || {
        let mut c = c.clone();
        async move {
            c.list_instances(ListInstancesRequest::default())
                .await
                .ok()
                .filter(|l| !l.get_ref().instances.is_empty())
        }
    })
    .await;
    // A role event from global management, bound then unbound.
    let https = api.https_client("").await;
    for kind in ["bind", "unbind"] {
        let event = serde_json::json!({"id": kind, "type": kind, "instance": "karmada-1",
            "role": "view", "subject": {"kind": "User", "name": "gm-user"}})
        .to_string();
        let ts = jiff::Timestamp::now().as_second();
        let sig = kairship::auth::webhook::sign(b"rbac-test-webhook-secret", ts, event.as_bytes());
        let req = http::Request::post("/apis/kairship.io/v1alpha1/webhooks/global-management")
            .header("x-kairship-timestamp", ts.to_string())
            .header("x-kairship-signature", sig)
            .body(kube::client::Body::from(event.into_bytes()))
            .expect("request");
        let resp = https.send(req).await.expect("webhook answers");
        assert_eq!(resp.status(), 200, "{kind}");
    }
    // A signed but malformed event: refused, and its replay marker removed again.
    let ts = jiff::Timestamp::now().as_second();
    let bad = br#"{"id": "x"}"#;
    let sig = kairship::auth::webhook::sign(b"rbac-test-webhook-secret", ts, bad);
    let req = http::Request::post("/apis/kairship.io/v1alpha1/webhooks/global-management")
        .header("x-kairship-timestamp", ts.to_string())
        .header("x-kairship-signature", sig)
        .body(kube::client::Body::from(bad.to_vec()))
        .expect("request");
    assert_eq!(https.send(req).await.expect("answers").status(), 400);

    // The operator lets the ops group read kubeconfig Secrets on the host, so its members
    // may attach External instances (Kairship asks the host before reading one for them).
    kairship_test_support::harness::grant_kubeconfig_reads(&api.env.host, "Group", "ops").await;
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
            spec: Some(managed.clone()),
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
    // An upgrade patches the Karmada object; the operator's tarball server reads its
    // ConfigMaps (none here: a 404 that says which label to use).
    let mut upgrade = managed.clone();
    upgrade.karmada_version = "v1.13.0".into();
    c.update_instance(UpdateInstanceRequest {
        instance: Some(Instance {
            metadata: meta("team-m"),
            spec: Some(upgrade),
            status: None,
        }),
    })
    .await
    .expect("upgrade managed");
    eventually(Duration::from_secs(30), "team-m upgraded", || async {
        let i = c
            .clone()
            .get_instance(GetInstanceRequest {
                name: "team-m".into(),
            })
            .await
            .ok()?
            .into_inner();
        let s = i.status?;
        (s.phase == "Running" && s.karmada_version == "v1.13.0").then_some(())
    })
    .await;
    rollout_with_the_charts_role(&api).await;
    // The managed instance's components: listed, a Deployment and the StatefulSet
    // restarted, a log read.
    let components = c
        .list_components(ListComponentsRequest {
            name: "team-m".into(),
        })
        .await
        .expect("components")
        .into_inner()
        .components;
    assert_eq!(components.len(), 6, "{components:?}");
    for component in ["karmada-scheduler", "etcd"] {
        c.restart_component(RestartComponentRequest {
            name: "team-m".into(),
            component: component.into(),
        })
        .await
        .expect("restart");
    }
    let mut log = c
        .get_component_logs(GetComponentLogsRequest {
            name: "team-m".into(),
            component: "karmada-apiserver".into(),
            tail_lines: 10,
            ..Default::default()
        })
        .await
        .expect("component log")
        .into_inner();
    let first = log.message().await.expect("log chunk").expect("a line");
    assert!(first.text.contains("karmada-apiserver"), "{first:?}");
    component_crash_loop_degrades_the_instance(&api, &c).await;
    // Renewing its certificates rewrites the (simulated) operator's Secret and the
    // Instance.
    let renewed = c
        .clone()
        .renew_certificates(RenewCertificatesRequest {
            name: "team-m".into(),
        })
        .await
        .expect("renewed with the chart's role")
        .into_inner();
    assert_eq!(renewed.certificates.len(), 5, "{renewed:?}");
    // A backup kept in the release namespace's Secrets, restored, then deleted.
    let backup = c
        .clone()
        .create_backup(CreateBackupRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("backup with the chart's role")
        .into_inner();
    let get = GetBackupRequest {
        name: "karmada-1".into(),
        backup: backup.name.clone(),
    };
    eventually(Duration::from_secs(20), "the backup completed", || async {
        let b = c.clone().get_backup(get.clone()).await.ok()?.into_inner();
        (b.phase == "Completed").then_some(())
    })
    .await;
    let restored = c
        .clone()
        .restore_backup(RestoreBackupRequest {
            name: "karmada-1".into(),
            backup: backup.name.clone(),
            source_instance: String::new(),
        })
        .await
        .expect("restored")
        .into_inner();
    assert_eq!(restored.failed, 0, "{restored:?}");
    c.clone()
        .delete_backup(DeleteBackupRequest {
            name: "karmada-1".into(),
            backup: backup.name.clone(),
        })
        .await
        .expect("backup deleted");
    let tarball = api
        .https_client("rbac-admin-token")
        .await
        .request_text(
            http::Request::get("/karmada-crds/v1.13.0/crds.tar.gz")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect_err("no tarball ConfigMap");
    assert!(
        tarball
            .to_string()
            .contains("kairship.io/karmada-crds=v1.13.0"),
        "{tarball}"
    );
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

/// A crash-looping component (its pod's status set as a kubelet would) makes the managed
/// instance Degraded naming it, read with the chart's role; running again, it recovers.
async fn component_crash_loop_degrades_the_instance(
    api: &KairshipApi,
    c: &InstanceServiceClient<
        tonic::service::interceptor::InterceptedService<
            tonic::transport::Channel,
            impl tonic::service::Interceptor + Clone,
        >,
    >,
) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, Patch, PatchParams};
    let pods: Api<Pod> = Api::namespaced(api.env.host.clone(), NS);
    let selector = "app.kubernetes.io/instance=team-m,app.kubernetes.io/name=karmada-scheduler";
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .expect("scheduler pods");
    let pod = list.items[0].metadata.name.clone().expect("pod name");
    let state = |s: serde_json::Value| {
        serde_json::json!({"status": {"containerStatuses": [{"name": "karmada-scheduler",
            "ready": false, "restartCount": 4, "image": "karmada-scheduler", "imageID": "",
            "state": s}]}})
    };
    let waiting = state(serde_json::json!({"waiting": {"reason": "CrashLoopBackOff",
        "message": "back-off 40s restarting failed container"}}));
    pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(&waiting))
        .await
        .expect("crash loop set");
    let phase_and_ready = || async {
        let i = c
            .clone()
            .get_instance(GetInstanceRequest {
                name: "team-m".into(),
            })
            .await
            .ok()?
            .into_inner();
        let s = i.status?;
        let ready = s.conditions.iter().find(|c| c.r#type == "Ready")?.clone();
        let components = s
            .conditions
            .iter()
            .find(|c| c.r#type == "ComponentsHealthy")?
            .clone();
        Some((s.phase, ready.message, components.status))
    };
    let degraded = eventually(Duration::from_secs(20), "team-m Degraded", || async {
        phase_and_ready().await.filter(|(p, _, _)| p == "Degraded")
    })
    .await;
    assert_eq!(
        degraded,
        (
            "Degraded".to_string(),
            format!("component karmada-scheduler: pod {pod} container karmada-scheduler: CrashLoopBackOff"),
            "False".to_string()
        )
    );
    let listed = c
        .clone()
        .list_components(ListComponentsRequest {
            name: "team-m".into(),
        })
        .await
        .expect("components")
        .into_inner()
        .components;
    let scheduler = listed
        .iter()
        .find(|x| x.name == "karmada-scheduler")
        .expect("scheduler listed");
    assert_eq!(scheduler.health, "Degraded", "{scheduler:?}");
    assert!(
        scheduler.reason.contains("CrashLoopBackOff"),
        "{scheduler:?}"
    );

    let running = state(serde_json::json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}));
    pods.patch_status(&pod, &PatchParams::default(), &Patch::Merge(&running))
        .await
        .expect("running again");
    eventually(Duration::from_secs(20), "team-m Running again", || async {
        phase_and_ready()
            .await
            .filter(|(p, _, ok)| p == "Running" && ok == "True")
    })
    .await;
}

/// A rollout started, paused and resumed through the API, then run by the leader and
/// the instance's rollout-steps controller (backup, release, soak), with the chart's role.
async fn rollout_with_the_charts_role(api: &KairshipApi) {
    use kairship::proto::rollout_service_client::RolloutServiceClient;
    let mut r = RolloutServiceClient::with_interceptor(api.channel.clone(), as_rbac_admin);
    let started = r
        .start_rollout(StartRolloutRequest {
            name: "team-m-14".into(),
            spec: Some(RolloutSpec {
                karmada_version: "v1.14.0".into(),
                groups: vec![RolloutGroup {
                    instances: vec!["team-m".into()],
                }],
                ..Default::default()
            }),
            // The External instances form a last wave that cannot take it: left out.
            options: Some(RolloutOptions {
                soak_seconds: 1,
                force: true,
                ..Default::default()
            }),
        })
        .await
        .expect("started with the chart's role")
        .into_inner();
    let name = RolloutName {
        name: started.name.clone(),
    };
    r.pause_rollout(name.clone()).await.expect("paused");
    r.resume_rollout(name.clone()).await.expect("resumed");
    let done = eventually(Duration::from_secs(60), "team-m-14 Completed", || {
        let (mut r, name) = (r.clone(), name.clone());
        async move {
            let got = r.get_rollout(name).await.ok()?.into_inner();
            (got.phase == "Completed").then_some(got)
        }
    })
    .await;
    let team_m = &done.waves[0].instances[0];
    assert_eq!(
        (team_m.name.as_str(), team_m.step.as_str()),
        ("team-m", "Done")
    );
    assert!(!team_m.backup.is_empty(), "{team_m:?}");
}

/// The test's admin token on every gRPC call.
fn as_rbac_admin(mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    req.metadata_mut().insert(
        "authorization",
        tonic::metadata::MetadataValue::from_static("Bearer rbac-admin-token"),
    );
    Ok(req)
}
