//! Hibernation on the simulated fleet, whose karmada-operator honours `spec.suspend` and
//! whose host follows replicas scaled outside it (an instance without a karmada-apiserver
//! pod is down): a managed instance put to sleep by a command has its components at zero
//! in the host (etcd, in an emptyDir, kept), its operator suspended and no actor; then 20
//! requests through the proxy at once, kubectl's GET among them, are held, cause one wake,
//! and answer with the object created before it slept. A schedule puts an instance to
//! sleep by itself, and so does idleness; a fleet search passes a sleeping instance
//! without waking it.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::{CreateInstanceRequest, HibernateInstanceRequest, InstanceStatus};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::common::eventually;

type Client = InstanceServiceClient<tonic::transport::Channel>;

async fn until(
    c: &Client,
    name: &str,
    what: &str,
    done: impl Fn(&InstanceStatus) -> bool,
) -> InstanceStatus {
    eventually(Duration::from_secs(150), what, || async {
        crate::server::status_of(c, name).await.filter(|s| done(s))
    })
    .await
}

fn state(s: &InstanceStatus) -> &str {
    s.hibernation.as_ref().map_or("", |h| h.state.as_str())
}

async fn create_running(c: &Client, name: &str) {
    c.clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(crate::server::managed_instance(name)),
        })
        .await
        .expect("created");
    until(c, name, "the instance running", |s| s.phase == "Running").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_instance_is_scaled_to_zero_and_woken_once_by_held_requests() {
    let api = crate::server::Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    create_running(&c, "sleepy").await;
    let kubeconfig = api.proxy_kubeconfig("sleepy");
    let made = api.kubectl_with(&kubeconfig, &["create", "namespace", "before-sleep"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );

    let asked = Instant::now();
    c.clone()
        .hibernate_instance(HibernateInstanceRequest {
            name: "sleepy".into(),
        })
        .await
        .expect("hibernate accepted");
    let asleep = until(&c, "sleepy", "the instance hibernated", |s| {
        state(s) == "Hibernated"
    })
    .await;
    println!(
        "time to hibernate: {:?} (the leader's own count: {:.3} s)",
        asked.elapsed(),
        asleep
            .hibernation
            .as_ref()
            .map_or(0.0, |h| h.last_hibernate_seconds)
    );
    assert_eq!(asleep.phase, "Hibernated");
    let h = asleep.hibernation.clone().expect("hibernation status");
    assert!(h.reason.contains("command"), "{h:?}");
    assert!(
        h.etcd.contains("emptyDir"),
        "etcd without a claim is kept: {h:?}"
    );
    assert!(
        asleep
            .conditions
            .iter()
            .any(|c| c.r#type == "Hibernated" && c.status == "True"),
        "{:?}",
        asleep.conditions
    );

    // In the host: the operator suspended, every component but etcd at zero, no pods.
    let host = &api.env.host;
    let ns = crate::harness::NS;
    let karmadas: Api<DynamicObject> = Api::namespaced_with(
        host.clone(),
        ns,
        &kairship::host::karmada::karmada_resource(),
    );
    let karmada = karmadas.get("sleepy").await.expect("Karmada object");
    assert_eq!(karmada.data["spec"]["suspend"], json!(true));
    let labels = ListParams::default().labels("app.kubernetes.io/instance=sleepy");
    let deployments: Api<Deployment> = Api::namespaced(host.clone(), ns);
    let listed = deployments.list(&labels).await.expect("deployments");
    assert_eq!(listed.items.len(), 5, "five component Deployments");
    for d in &listed.items {
        let replicas = d.spec.as_ref().and_then(|s| s.replicas);
        assert_eq!(replicas, Some(0), "{:?} scaled to zero", d.metadata.name);
    }
    let sets: Api<StatefulSet> = Api::namespaced(host.clone(), ns);
    let etcd = sets.get("sleepy-etcd").await.expect("etcd");
    assert_eq!(
        etcd.spec.as_ref().and_then(|s| s.replicas),
        Some(1),
        "etcd kept"
    );
    let pods: Api<Pod> = Api::namespaced(host.clone(), ns);
    let left: Vec<String> = pods
        .list(&labels)
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, ["sleepy-etcd-0"], "only etcd's pod is left");
    assert!(
        api.tree.handle().reader("sleepy").is_none(),
        "no actor watches a hibernated instance"
    );

    // A fleet search passes it without waking it.
    let mut search =
        kairship::proto::search_service_client::SearchServiceClient::new(api.channel.clone());
    search
        .search(kairship::proto::SearchRequest {
            name: "before-sleep".into(),
            ..Default::default()
        })
        .await
        .expect("search answers");
    // A request that wakes writes the wake annotation before it is held: none was.
    let instances: Api<kairship::crd::Instance> = Api::all(host.clone());
    let seen = instances.get("sleepy").await.expect("instance");
    assert!(
        !kube::ResourceExt::annotations(&seen)
            .contains_key(kairship::hibernation::runner::WAKE_REQUEST_ANNOTATION),
        "a search asked for no wake"
    );
    let still = crate::server::status_of(&c, "sleepy")
        .await
        .expect("status");
    assert_eq!(state(&still), "Hibernated", "a search does not wake it");

    // Twenty requests at once: kubectl's GET, a watch, a gRPC call and 17 GETs from a
    // client; each is held and answered (the GETs with the namespace made before the
    // instance slept).
    let woke = Instant::now();
    let client = crate::common::client_from(&kubeconfig).await;
    let watching = {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        tokio::spawn(async move {
            use futures::StreamExt;
            let params = kube::api::WatchParams::default().fields("metadata.name=before-sleep");
            let mut events = namespaces.watch(&params, "0").await?.boxed();
            match events.next().await {
                Some(Ok(kube::api::WatchEvent::Added(ns))) => Ok(ns.metadata.name),
                other => Err(kube::Error::Service(
                    format!("first event: {other:?}").into(),
                )),
            }
        })
    };
    let grpc = {
        let mut clusters =
            kairship::proto::cluster_service_client::ClusterServiceClient::new(api.channel.clone());
        tokio::spawn(async move {
            clusters
                .list_clusters(kairship::proto::ListClustersRequest {
                    instance: "sleepy".into(),
                    options: None,
                })
                .await
                .map(|r| r.into_inner().clusters.len())
        })
    };
    let mut held = tokio::task::JoinSet::new();
    for _ in 0..17 {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        held.spawn(async move {
            let started = Instant::now();
            namespaces
                .get("before-sleep")
                .await
                .map(|_| started.elapsed())
                .map_err(|e| e.to_string())
        });
    }
    let kubectl = {
        let bin = crate::common::kubectl_bin();
        let cache = api.env.sim.dir.path().join("kubectl-cache");
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(bin)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--cache-dir")
                .arg(cache)
                .args(["get", "namespace", "before-sleep", "-o", "name"])
                .output()
                .expect("kubectl runs")
        })
    };
    let mut waits = Vec::new();
    while let Some(answer) = held.join_next().await {
        waits.push(answer.expect("task").expect("a held GET answers"));
    }
    let out = kubectl.await.expect("kubectl task");
    let watched = tokio::time::timeout(Duration::from_secs(60), watching)
        .await
        .expect("the held watch answers")
        .expect("watch task")
        .expect("the watch's first event");
    assert_eq!(watched.as_deref(), Some("before-sleep"));
    let members = grpc
        .await
        .expect("gRPC task")
        .expect("the held gRPC call answers");
    assert!(
        members > 0,
        "ListClusters answered with the instance's members"
    );
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "namespace/before-sleep"
    );
    waits.sort();
    println!(
        "time to wake (20 held requests): first {:?}, p50 {:?}, last {:?}; all answered {:?} after the first was sent",
        waits[0],
        waits[waits.len() / 2],
        waits[waits.len() - 1],
        woke.elapsed()
    );
    let awake = until(&c, "sleepy", "the instance running again", |s| {
        state(s) == "Awake" && s.phase == "Running"
    })
    .await;
    let h = awake.hibernation.expect("hibernation status");
    assert_eq!(h.wakes, 1, "twenty requests, one wake: {h:?}");
    assert!(h.reason.contains("request"), "{h:?}");
    let karmada = karmadas.get("sleepy").await.expect("Karmada object");
    assert_eq!(karmada.data["spec"]["suspend"], json!(false));
    for d in deployments.list(&labels).await.expect("deployments").items {
        assert_eq!(
            d.spec.as_ref().and_then(|s| s.replicas),
            Some(1),
            "{:?}",
            d.metadata.name
        );
        let annotations = d.metadata.annotations.unwrap_or_default();
        assert!(
            !annotations.contains_key("kairship.io/replicasBeforeHibernation"),
            "the record is dropped once it is back"
        );
    }
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_puts_an_instance_to_sleep_and_an_external_one_is_refused() {
    let api = crate::server::Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    create_running(&c, "nightly").await;
    // Asleep from the start of every minute: asleep at once, and again each minute after
    // a request woke it.
    let instances: Api<kairship::crd::Instance> = Api::all(api.env.host.clone());
    let patch = json!({"spec": {"hibernation": {"schedules": [{"start": "* * * * *", "location": "Europe/Berlin"}]}}});
    instances
        .patch("nightly", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("schedule set");
    let asleep = until(&c, "nightly", "the schedule's hibernation", |s| {
        state(s) == "Hibernated"
    })
    .await;
    let reason = asleep.hibernation.map(|h| h.reason).unwrap_or_default();
    assert!(reason.contains("schedule"), "{reason}");

    // Idle for a minute: asleep, the reason saying since when.
    create_running(&c, "idle").await;
    let patch = json!({"spec": {"hibernation": {"idleAfterMinutes": 1}}});
    instances
        .patch("idle", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("idleness set");
    let asleep = until(&c, "idle", "hibernation after a minute idle", |s| {
        state(s) == "Hibernated"
    })
    .await;
    let reason = asleep.hibernation.map(|h| h.reason).unwrap_or_default();
    assert!(reason.starts_with("idle since"), "{reason}");

    // A backup in progress holds sleep off until it completes.
    create_running(&c, "backed-up").await;
    let store = kairship::backups::Store::secrets(
        api.env.host.clone(),
        crate::harness::NS.into(),
        1 << 30,
        Duration::from_secs(10),
    );
    let mut backup =
        kairship::backups::Record::start("backed-up", jiff::Timestamp::now(), "test", false);
    store.create(&backup).await.expect("a Running backup");
    c.clone()
        .hibernate_instance(HibernateInstanceRequest {
            name: "backed-up".into(),
        })
        .await
        .expect("hibernate accepted");
    let waiting = until(&c, "backed-up", "sleep waiting for the backup", |s| {
        s.hibernation
            .as_ref()
            .is_some_and(|h| h.reason.contains("waits for backup"))
    })
    .await;
    assert_eq!(state(&waiting), "Awake", "{waiting:?}");
    assert_eq!(waiting.phase, "Running");
    backup.phase = kairship::backups::Phase::Completed;
    backup.completed = jiff::Timestamp::now().to_string();
    store.update(&backup).await.expect("the backup completes");
    until(
        &c,
        "backed-up",
        "hibernated once the backup completed",
        |s| state(s) == "Hibernated",
    )
    .await;

    // External instances cannot be hibernated: Kairship does not run their control plane.
    let refused = c
        .clone()
        .hibernate_instance(HibernateInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("External"),
        "{}",
        refused.message()
    );
    api.stop().await;
}
