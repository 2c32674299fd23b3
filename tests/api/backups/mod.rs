//! Backups through the API on the simulated fleet: a backup taken, a policy and a
//! Deployment deleted, the backup restored (both back, Karmada binding them again, a
//! second restore leaving everything as it is); a restore into another instance; the
//! schedule and its retention; a missing or full destination failing with its reason
//! while the instance keeps running; and an admin of one instance kept from another's
//! backups.

use std::time::Duration;

use kairship::auth::AuthConfig;
use kairship::crd::{
    InstanceRoleBinding, InstanceRoleBindingSpec, Phase, Role, Subject, SubjectKind,
};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use kube::api::{Api as KubeApi, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use tonic::transport::Channel;
use tonic::Code;

use crate::common::eventually;
use crate::server::Api;

type Client = InstanceServiceClient<Channel>;

fn policies() -> ApiResource {
    ApiResource {
        group: "policy.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "policy.karmada.io/v1alpha1".into(),
        kind: "PropagationPolicy".into(),
        plural: "propagationpolicies".into(),
    }
}

fn bindings() -> ApiResource {
    ApiResource {
        group: "work.karmada.io".into(),
        version: "v1alpha2".into(),
        api_version: "work.karmada.io/v1alpha2".into(),
        kind: "ResourceBinding".into(),
        plural: "resourcebindings".into(),
    }
}

fn deployments() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&())
}

/// A Deployment `web` and the PropagationPolicy placing it, in namespace `shop`.
async fn workload(instance: &kube::Client) {
    let ns: KubeApi<k8s_openapi::api::core::v1::Namespace> = KubeApi::all(instance.clone());
    let shop = serde_json::from_value(serde_json::json!({"metadata": {"name": "shop"}}))
        .expect("valid in this test");
    ns.create(&PostParams::default(), &shop)
        .await
        .expect("namespace");
    let d: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
    .expect("valid in this test");
    KubeApi::<DynamicObject>::namespaced_with(instance.clone(), "shop", &deployments())
        .create(&PostParams::default(), &d)
        .await
        .expect("deployment");
    let p: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}))
    .expect("valid in this test");
    KubeApi::<DynamicObject>::namespaced_with(instance.clone(), "shop", &policies())
        .create(&PostParams::default(), &p)
        .await
        .expect("policy");
}

/// The clusters Karmada placed shop/web on, once it has.
async fn placed(instance: &kube::Client, within: Duration) -> Vec<String> {
    let rbs = KubeApi::<DynamicObject>::namespaced_with(instance.clone(), "shop", &bindings());
    eventually(within, "shop/web bound and scheduled", || {
        let rbs = rbs.clone();
        async move {
            let rb = rbs.get_opt("web-deployment").await.ok()??;
            let clusters: Vec<String> = rb.data["spec"]["clusters"]
                .as_array()?
                .iter()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect();
            (!clusters.is_empty()).then_some(clusters)
        }
    })
    .await
}

/// Starts a backup of `instance` and waits until it is no longer Running.
async fn backed_up(c: &Client, instance: &str) -> Backup {
    let started = c
        .clone()
        .create_backup(CreateBackupRequest {
            name: instance.into(),
        })
        .await
        .expect("backup starts")
        .into_inner();
    assert_eq!(started.phase, "Running", "{started:?}");
    finished(c, instance, &started.name).await
}

async fn finished(c: &Client, instance: &str, backup: &str) -> Backup {
    eventually(Duration::from_secs(30), &format!("{backup} done"), || {
        let mut c = c.clone();
        async move {
            let b = c
                .get_backup(GetBackupRequest {
                    name: instance.into(),
                    backup: backup.into(),
                })
                .await
                .ok()?
                .into_inner();
            (b.phase != "Running").then_some(b)
        }
    })
    .await
}

async fn restore(c: &Client, into: &str, from: &str, backup: &str) -> RestoreResult {
    c.clone()
        .restore_backup(RestoreBackupRequest {
            name: into.into(),
            backup: backup.into(),
            source_instance: from.into(),
        })
        .await
        .expect("restored")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restores_what_was_deleted_into_the_same_instance_or_another() {
    let api = Api::start(2).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let one = api.env.sim.client("karmada-1").await;
    workload(&one).await;
    let clusters = placed(&one, Duration::from_secs(30)).await;

    let b = backed_up(&c, "karmada-1").await;
    assert_eq!(b.phase, "Completed", "{b:?}");
    assert_eq!(b.resources.get("deployments.apps"), Some(&1), "{b:?}");
    assert_eq!(
        b.resources.get("propagationpolicies.policy.karmada.io"),
        Some(&1),
        "{b:?}"
    );
    assert!(
        b.resources.contains_key("clusters.cluster.karmada.io"),
        "{b:?}"
    );
    assert!(
        !b.resources
            .keys()
            .any(|k| k.ends_with("work.karmada.io") || k == "events"),
        "what Karmada writes itself is left out: {b:?}"
    );
    assert!(b.size_bytes > 0 && b.objects > 0, "{b:?}");
    let listed = c
        .clone()
        .list_backups(ListBackupsRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.backups.len(), 1);
    assert_eq!(listed.backups[0].name, b.name);

    // Lost: the policy and the Deployment.
    let pps = KubeApi::<DynamicObject>::namespaced_with(one.clone(), "shop", &policies());
    let deps = KubeApi::<DynamicObject>::namespaced_with(one.clone(), "shop", &deployments());
    pps.delete("web", &DeleteParams::default())
        .await
        .expect("pp deleted");
    deps.delete("web", &DeleteParams::default())
        .await
        .expect("deployment deleted");
    eventually(Duration::from_secs(10), "the binding gone", || {
        let rbs = KubeApi::<DynamicObject>::namespaced_with(one.clone(), "shop", &bindings());
        async move {
            rbs.get_opt("web-deployment")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;

    let r = restore(&c, "karmada-1", "", &b.name).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(r.created, 2, "only the two lost objects are created: {r:?}");
    assert_eq!(r.resources.get("deployments.apps"), Some(&1), "{r:?}");
    assert!(r.existing > 0, "what was there is left as it is: {r:?}");
    let d = deps.get("web").await.expect("the Deployment is back");
    assert_eq!(d.data["spec"]["replicas"], 2);
    pps.get("web").await.expect("the policy is back");
    assert_eq!(placed(&one, Duration::from_secs(30)).await, clusters);

    let again = restore(&c, "karmada-1", "", &b.name).await;
    assert_eq!((again.created, again.failed), (0, 0), "{again:?}");

    // Into another instance: the same objects, placed there.
    let two = api.env.sim.client("karmada-2").await;
    let r = restore(&c, "karmada-2", "karmada-1", &b.name).await;
    assert_eq!(r.failed, 0, "{r:?}");
    KubeApi::<DynamicObject>::namespaced_with(two.clone(), "shop", &deployments())
        .get("web")
        .await
        .expect("the Deployment in karmada-2");
    assert!(!placed(&two, Duration::from_secs(30)).await.is_empty());

    // A backup is reached through its own instance only.
    let elsewhere = c
        .clone()
        .get_backup(GetBackupRequest {
            name: "karmada-2".into(),
            backup: b.name.clone(),
        })
        .await
        .expect_err("not karmada-2's");
    assert_eq!(elsewhere.code(), Code::NotFound, "{elsewhere:?}");

    c.clone()
        .delete_backup(DeleteBackupRequest {
            name: "karmada-1".into(),
            backup: b.name.clone(),
        })
        .await
        .expect("deleted");
    let secrets: KubeApi<k8s_openapi::api::core::v1::Secret> =
        KubeApi::namespaced(api.env.host.clone(), crate::harness::NS);
    let left: Vec<String> = secrets
        .list(&Default::default())
        .await
        .expect("secrets")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .filter(|n| n.starts_with(&b.name))
        .collect();
    assert!(left.is_empty(), "nothing of the backup is left: {left:?}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_backups_keep_the_newest() {
    let api = Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let inst = c
        .clone()
        .get_instance(GetInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("get")
        .into_inner();
    let mut too_long = inst.clone();
    if let Some(spec) = too_long.spec.as_mut() {
        spec.backup_schedule = Some(BackupSchedule {
            interval_minutes: 20_000,
            keep: 2,
        });
    }
    let bad = c
        .clone()
        .update_instance(UpdateInstanceRequest {
            instance: Some(too_long),
        })
        .await
        .expect_err("a schedule over a week");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message()
            .contains("instance.spec.backup_schedule.interval_minutes"),
        "{bad:?}"
    );
    let updated = schedule(&c, "karmada-1", 60, 2).await;
    assert_eq!(
        updated.spec.and_then(|s| s.backup_schedule),
        Some(BackupSchedule {
            interval_minutes: 60,
            keep: 2
        })
    );
    let list = |c: Client| async move {
        let mut c = c;
        c.list_backups(ListBackupsRequest {
            name: "karmada-1".into(),
        })
        .await
        .ok()
        .map(|l| l.into_inner().backups)
    };
    let first = eventually(
        Duration::from_secs(30),
        "the first scheduled backup",
        || {
            let c = c.clone();
            async move {
                list(c)
                    .await?
                    .into_iter()
                    .find(|b| b.scheduled && b.phase == "Completed")
            }
        },
    )
    .await;
    assert_eq!(first.requested_by, "kairship (schedule)");
    let (healthy, status) = backups_condition(&c, "karmada-1", "True").await;
    assert!(healthy.message.contains(&first.name), "{healthy:?}");
    assert_eq!(status.last_backup, first.name);
    assert_eq!(status.last_backup_time, first.completed);
    // Two more on request: the oldest (the scheduled one) goes, two are kept.
    let second = backed_up(&c, "karmada-1").await;
    let third = backed_up(&c, "karmada-1").await;
    let kept = eventually(Duration::from_secs(20), "two backups kept", || {
        let c = c.clone();
        async move { list(c).await.filter(|l| l.len() == 2) }
    })
    .await;
    let names: Vec<&str> = kept.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, [third.name.as_str(), second.name.as_str()]);
    // No second scheduled backup within the interval.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = list(c.clone()).await.expect("list");
    assert!(now.iter().all(|b| !b.scheduled), "{now:?}");
    // Unscheduled, the status no longer speaks of backups; the backups stay.
    let off = schedule(&c, "karmada-1", 0, 0).await;
    assert_eq!(off.spec.and_then(|s| s.backup_schedule), None);
    eventually(Duration::from_secs(20), "the backup status gone", || {
        let mut c = c.clone();
        async move {
            let s = c
                .get_instance(GetInstanceRequest {
                    name: "karmada-1".into(),
                })
                .await
                .ok()?
                .into_inner()
                .status?;
            let gone = s.last_backup.is_empty()
                && !s.conditions.iter().any(|x| x.r#type == "BackupsHealthy");
            gone.then_some(())
        }
    })
    .await;
    assert_eq!(list(c.clone()).await.expect("list").len(), 2);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_full_destination_fails_with_its_reason() {
    let settings = |namespace: &str, max: u64| kairship::context::Settings {
        backup_namespace: namespace.into(),
        backup_max_bytes: max,
        ..crate::harness::fast_settings()
    };
    let api = Api::start_settings(1, None, None, settings("no-such-namespace", 1 << 30)).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let missing = no_destination(&c).await;
    assert!(
        missing
            .message()
            .contains("\"no-such-namespace\" does not exist"),
        "{missing:?}"
    );
    // Scheduled, the same failure shows in the instance's condition (and so the metric
    // the KairshipBackupFailing alert reads).
    schedule(&c, "karmada-1", 60, 0).await;
    let (failing, _) = backups_condition(&c, "karmada-1", "False").await;
    assert_eq!(failing.reason, "BackupFailed", "{failing:?}");
    assert!(failing.message.contains("no-such-namespace"), "{failing:?}");
    api.env
        .wait_phase("karmada-1", Phase::Running, Duration::from_secs(5))
        .await;
    api.stop().await;

    let api = Api::start_settings(1, None, None, settings(crate::harness::NS, 100)).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let b = backed_up(&c, "karmada-1").await;
    assert_eq!(b.phase, "Failed", "{b:?}");
    assert!(
        b.message.contains("destination is full") && b.message.contains("at most 100"),
        "{b:?}"
    );
    let refused = restore_err(&c, "karmada-1", &b.name).await;
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    api.env
        .wait_phase("karmada-1", Phase::Running, Duration::from_secs(5))
        .await;
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_destination_keeps_backups_as_files_and_restores_from_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = |backup_dir: std::path::PathBuf, max: u64| kairship::context::Settings {
        backup_dir: Some(backup_dir),
        backup_max_bytes: max,
        ..crate::harness::fast_settings()
    };
    let api = Api::start_settings(1, None, None, settings(dir.path().into(), 1 << 30)).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let one = api.env.sim.client("karmada-1").await;
    workload(&one).await;
    let b = backed_up(&c, "karmada-1").await;
    assert_eq!(b.phase, "Completed", "{b:?}");
    let files = dir.path().join("karmada-1");
    let data = std::fs::metadata(files.join(format!("{}.jsonl.gz", b.name))).expect("data file");
    assert_eq!(data.len(), b.size_bytes as u64);
    assert!(files.join(format!("{}.json", b.name)).is_file());
    // No Secret was written for it.
    let secrets: KubeApi<k8s_openapi::api::core::v1::Secret> =
        KubeApi::namespaced(api.env.host.clone(), crate::harness::NS);
    assert!(secrets.get_opt(&b.name).await.expect("read").is_none());

    let pps = KubeApi::<DynamicObject>::namespaced_with(one.clone(), "shop", &policies());
    pps.delete("web", &DeleteParams::default())
        .await
        .expect("pp deleted");
    let r = restore(&c, "karmada-1", "", &b.name).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.created >= 1, "{r:?}");
    pps.get("web").await.expect("the policy is back");

    // A name that is not a backup's is not looked up, a path least of all.
    for name in [
        "../../etc/passwd".to_string(),
        format!("{}/../x", b.name),
        "kairship-backup-karmada-1-../../x".to_string(),
    ] {
        let e = c
            .clone()
            .get_backup(GetBackupRequest {
                name: "karmada-1".into(),
                backup: name.clone(),
            })
            .await
            .expect_err("not found");
        assert!(
            matches!(e.code(), Code::NotFound | Code::InvalidArgument),
            "{name}: {e:?}"
        );
    }
    c.clone()
        .delete_backup(DeleteBackupRequest {
            name: "karmada-1".into(),
            backup: b.name.clone(),
        })
        .await
        .expect("deleted");
    assert_eq!(std::fs::read_dir(&files).expect("folder").count(), 0);
    api.stop().await;

    // A directory that is not there (a volume not mounted) is a missing destination.
    let gone = dir.path().join("not-mounted");
    let api = Api::start_settings(1, None, None, settings(gone, 1 << 30)).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let missing = no_destination(&c).await;
    assert!(
        missing
            .message()
            .contains("not-mounted\" does not exist (--backup-dir"),
        "{missing:?}"
    );
    api.stop().await;
}

/// A backup of karmada-1 refused for want of a destination.
async fn no_destination(c: &Client) -> tonic::Status {
    let missing = c
        .clone()
        .create_backup(CreateBackupRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect_err("no destination");
    assert_eq!(missing.code(), Code::FailedPrecondition, "{missing:?}");
    missing
}

/// Sets `instance`'s backup schedule through UpdateInstance.
pub(crate) async fn schedule(
    c: &Client,
    instance: &str,
    interval_minutes: i32,
    keep: i32,
) -> Instance {
    let mut c = c.clone();
    let mut inst = c
        .get_instance(GetInstanceRequest {
            name: instance.into(),
        })
        .await
        .expect("get")
        .into_inner();
    if let Some(spec) = inst.spec.as_mut() {
        spec.backup_schedule = Some(BackupSchedule {
            interval_minutes,
            keep,
        });
    }
    if let Some(m) = inst.metadata.as_mut() {
        m.resource_version.clear();
    }
    inst.status = None;
    c.update_instance(UpdateInstanceRequest {
        instance: Some(inst),
    })
    .await
    .expect("schedule set")
    .into_inner()
}

/// The instance's BackupsHealthy condition once it is `status`.
async fn backups_condition(
    c: &Client,
    instance: &str,
    status: &str,
) -> (Condition, InstanceStatus) {
    eventually(
        Duration::from_secs(20),
        &format!("BackupsHealthy {status}"),
        || {
            let mut c = c.clone();
            async move {
                let s = c
                    .get_instance(GetInstanceRequest {
                        name: instance.into(),
                    })
                    .await
                    .ok()?
                    .into_inner()
                    .status?;
                let cond = s
                    .conditions
                    .iter()
                    .find(|x| x.r#type == "BackupsHealthy" && x.status == status)?
                    .clone();
                Some((cond, s))
            }
        },
    )
    .await
}

async fn restore_err(c: &Client, into: &str, backup: &str) -> tonic::Status {
    c.clone()
        .restore_backup(RestoreBackupRequest {
            name: into.into(),
            backup: backup.into(),
            source_instance: String::new(),
        })
        .await
        .expect_err("refused")
}

mod attacks;
