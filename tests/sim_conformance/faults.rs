//! Faults through the admin API touch only the named instance; member-cluster controls
//! and the karmada-operator double.

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, WatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::common::{client_from, eventually, Sim};

fn clusters_api(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &crate::common::cluster_resource())
}

#[tokio::test]
async fn down_breaks_only_that_instance_and_recovers() {
    let sim = Sim::start(2).await;
    let (one, two) = (sim.client("karmada-1").await, sim.client("karmada-2").await);
    one.apiserver_version().await.expect("up before the fault");
    assert_eq!(
        sim.set_fault("karmada-1", json!({"mode": "down"})).await.0,
        200
    );
    let started = Instant::now();
    assert!(
        one.apiserver_version().await.is_err(),
        "a down instance must fail"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "failing must be prompt, took {:?}",
        started.elapsed()
    );
    two.apiserver_version()
        .await
        .expect("the other instance keeps serving");
    sim.clear_fault("karmada-1").await;
    eventually(Duration::from_secs(10), "karmada-1 back up", || async {
        one.apiserver_version().await.ok()
    })
    .await;
}

#[tokio::test]
async fn latency_and_errors_hit_only_that_instance() {
    let sim = Sim::start(2).await;
    let one: Api<ConfigMap> = Api::namespaced(sim.client("karmada-1").await, "default");
    let two: Api<ConfigMap> = Api::namespaced(sim.client("karmada-2").await, "default");
    assert_eq!(
        sim.set_fault("karmada-1", json!({"mode": "latency", "latency_ms": 400}))
            .await
            .0,
        200
    );
    let t = Instant::now();
    one.list(&ListParams::default())
        .await
        .expect("slow but answers");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "latency applied: {:?}",
        t.elapsed()
    );
    two.list(&ListParams::default())
        .await
        .expect("other instance answers");

    assert_eq!(
        sim.set_fault("karmada-1", json!({"mode": "errors", "error_rate": 1.0}))
            .await
            .0,
        200
    );
    for _ in 0..5 {
        match one.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => assert!(s.code == 500 || s.code == 503, "{s:?}"),
            other => panic!("error_rate 1.0 must fail every request, got {other:?}"),
        }
    }
    two.list(&ListParams::default())
        .await
        .expect("other instance unaffected");
    sim.clear_fault("karmada-1").await;
    one.list(&ListParams::default()).await.expect("cleared");
}

#[tokio::test]
async fn drop_watches_cuts_open_streams() {
    let sim = Sim::start(2).await;
    let one: Api<ConfigMap> = Api::namespaced(sim.client("karmada-1").await, "default");
    let two: Api<ConfigMap> = Api::namespaced(sim.client("karmada-2").await, "default");
    let mut cut = Box::pin(
        one.watch(
            &WatchParams::default().timeout(120).disable_bookmarks(),
            "0",
        )
        .await
        .expect("watch"),
    );
    let mut kept = Box::pin(
        two.watch(
            &WatchParams::default().timeout(120).disable_bookmarks(),
            "0",
        )
        .await
        .expect("watch"),
    );
    assert_eq!(
        sim.set_fault("karmada-1", json!({"mode": "drop-watches"}))
            .await
            .0,
        200
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match cut.try_next().await {
                Ok(Some(_)) => continue,
                _ => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch on karmada-1 must be cut");
    two.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "still-watched"}})).expect("cm"),
    )
    .await
    .expect("create");
    let got = tokio::time::timeout(Duration::from_secs(10), kept.try_next())
        .await
        .expect("event in time")
        .expect("stream ok");
    assert!(
        matches!(got, Some(kube::api::WatchEvent::Added(_))),
        "karmada-2's watch keeps flowing: {got:?}"
    );
}

#[tokio::test]
async fn admin_rejects_bad_faults_and_unknown_instances() {
    let sim = Sim::start(1).await;
    let (code, body) = sim
        .set_fault("karmada-1", json!({"mode": "sideways"}))
        .await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = sim.set_fault("karmada-1", json!({"mode": "errors"})).await;
    assert_eq!(code, 400);
    assert!(
        body["error"]
            .as_str()
            .expect("message")
            .contains("error_rate"),
        "{body}"
    );
    let (code, _) = sim.set_fault("nope", json!({"mode": "down"})).await;
    assert_eq!(code, 404);
    assert!(
        sim.fleet
            .instance("karmada-1")
            .expect("inst")
            .server
            .faults
            .current()
            .is_none(),
        "rejected faults change nothing"
    );
}

#[tokio::test]
async fn clusters_move_and_can_be_held_not_ready() {
    let sim = Sim::start(1).await;
    let clusters = clusters_api(sim.client("karmada-1").await);
    let first = clusters.get("member1").await.expect("member1");
    let rv0 = first.metadata.resource_version.clone();
    eventually(
        Duration::from_secs(10),
        "cluster status to move",
        || async {
            let now = clusters.get("member1").await.ok()?;
            (now.metadata.resource_version != rv0).then_some(())
        },
    )
    .await;
    let url = format!("{}/clusters/karmada-1/member1", sim.fleet.admin_url());
    let (code, _) = kairship_wire::fault_client::call("POST", &url, Some(json!({"ready": false})))
        .await
        .expect("admin");
    assert_eq!(code, 200);
    let c = clusters.get("member1").await.expect("member1");
    assert_eq!(c.data["status"]["conditions"][0]["status"], "False");
    assert_eq!(c.data["status"]["nodeSummary"]["readyNum"], 0);
    let other = clusters.get("member2").await.expect("member2");
    assert_eq!(other.data["status"]["conditions"][0]["status"], "True");
    let (code, _) = kairship_wire::fault_client::call(
        "POST",
        &format!("{}/clusters/karmada-1/member9", sim.fleet.admin_url()),
        Some(json!({})),
    )
    .await
    .expect("admin");
    assert_eq!(code, 404);
}

#[tokio::test]
async fn operator_provisions_and_tears_down_karmada_objects() {
    let sim = Sim::start(0).await;
    let host = sim.client("host").await;
    let ar = ApiResource {
        group: "operator.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "operator.karmada.io/v1alpha1".into(),
        kind: "Karmada".into(),
        plural: "karmadas".into(),
    };
    let karmadas: Api<DynamicObject> = Api::namespaced_with(host.clone(), "default", &ar);
    let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "operator.karmada.io/v1alpha1", "kind": "Karmada", "metadata": {"name": "team-a"}, "spec": {}})).expect("obj");
    karmadas
        .create(&PostParams::default(), &obj)
        .await
        .expect("create Karmada");
    let ready = eventually(Duration::from_secs(15), "Karmada team-a Ready", || async {
        let k = karmadas.get("team-a").await.ok()?;
        let ok = k.data["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ok.then_some(k)
    })
    .await;
    assert_eq!(
        ready.data["status"]["secretRef"],
        json!({"namespace": "default", "name": "team-a-karmada-admin-config"}),
        "named as karmada-operator names it"
    );
    let secrets: Api<Secret> = Api::namespaced(host.clone(), "default");
    let secret = secrets
        .get("team-a-karmada-admin-config")
        .await
        .expect("admin secret");
    let config = secret
        .data
        .as_ref()
        .and_then(|d| d.get("karmada.config"))
        .expect("karmada.config key");
    let path = sim.dir.path().join("team-a.kubeconfig");
    std::fs::write(&path, &config.0).expect("write kubeconfig");
    let new_instance = client_from(&path).await;
    let listed = clusters_api(new_instance.clone())
        .list(&ListParams::default())
        .await
        .expect("clusters of the new instance");
    assert_eq!(listed.items.len(), 2);
    // As the real operator: its defaults land in the spec, and the status says nothing of
    // versions or generations.
    assert_eq!(
        ready.data["spec"]["components"]["karmadaControllerManager"]["imageTag"],
        "v1.12.0"
    );
    assert!(ready.data["status"].get("karmadaVersion").is_none());
    assert!(ready.data["status"].get("observedGeneration").is_none());

    // A new image tag reruns the install workflow: Progressing, then Completed again (its
    // time in whole seconds, as Kubernetes writes them: so the patch comes a second later).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let bump =
        json!({"spec": {"components": {"karmadaControllerManager": {"imageTag": "v1.13.0"}}}});
    let patched = karmadas
        .patch(
            "team-a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&bump),
        )
        .await
        .expect("patch Karmada");
    assert!(patched.metadata.generation > ready.metadata.generation);
    let before = ready.data["status"]["conditions"][0]["lastTransitionTime"]
        .as_str()
        .expect("lastTransitionTime")
        .to_string();
    eventually(
        Duration::from_secs(15),
        "Karmada team-a upgraded",
        || async {
            let k = karmadas.get("team-a").await.ok()?;
            let c = k.data["status"]["conditions"].as_array()?.first()?.clone();
            (c["status"] == "True"
                && c["reason"] == "Completed"
                && c["lastTransitionTime"].as_str()? > before.as_str())
            .then_some(())
        },
    )
    .await;

    karmadas
        .delete("team-a", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(Duration::from_secs(15), "Karmada team-a gone", || async {
        karmadas
            .get_opt("team-a")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        secrets
            .get_opt("team-a-karmada-admin-config")
            .await
            .expect("get")
            .is_none(),
        "secret removed"
    );
    assert!(sim.fleet.instance("team-a").is_none(), "instance stopped");
    assert!(
        new_instance.apiserver_version().await.is_err(),
        "its API is gone"
    );
}
