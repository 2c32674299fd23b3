//! Instances appear as actors, reach Running with correct stats, register, pause, and
//! clean up on delete; managed instances go through the karmada-operator object.

use std::time::Duration;

use kairship::actors::supervision::ActorState;
use kairship::crd::{InstanceRegistration, Phase};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::common::eventually;
use crate::harness::{actor, Env, NS};

fn clusters(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(client, &crate::common::cluster_resource())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_instances_reach_running_with_correct_stats_and_register() {
    let env = Env::start(2).await;
    let tree = env.start_tree(None, "solo").await;
    env.create_external("karmada-1").await;
    env.create_external("karmada-2").await;
    for name in ["karmada-1", "karmada-2"] {
        let status = env
            .wait_phase(name, Phase::Running, Duration::from_secs(20))
            .await;
        let stats = status.stats.expect("stats");
        // Expected totals from the instance's own Cluster objects.
        let actual = clusters(env.sim.client(name).await)
            .list(&ListParams::default())
            .await
            .expect("clusters");
        let nodes: i64 = actual
            .items
            .iter()
            .map(|c| {
                c.data["status"]["nodeSummary"]["totalNum"]
                    .as_i64()
                    .expect("nodes")
            })
            .sum();
        let cpu: i64 = actual
            .items
            .iter()
            .map(|c| {
                c.data["status"]["resourceSummary"]["allocatable"]["cpu"]
                    .as_str()
                    .expect("cpu")
                    .parse::<i64>()
                    .expect("int")
            })
            .sum();
        assert_eq!(
            (stats.clusters_total, stats.clusters_ready),
            (2, 2),
            "{name}"
        );
        assert_eq!(stats.nodes_total, nodes, "{name}");
        assert_eq!(stats.cpu_allocatable, cpu.to_string(), "{name}");
        assert_eq!(
            stats.namespaces, 6,
            "default, kube-system, kube-public, karmada-system and each member's karmada-es-"
        );
        assert_eq!(status.clusters.as_deref(), Some("2/2"));
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .expect("Ready condition");
        assert_eq!(ready.status, "True");
        let reg = Api::<InstanceRegistration>::all(env.host.clone());
        let r = eventually(Duration::from_secs(10), "registration", || async {
            reg.get_opt(name).await.ok().flatten()
        })
        .await;
        assert_eq!(r.spec.instance_name, name);
        assert_eq!(
            actor(&tree, name).await.expect("actor").state,
            ActorState::Running
        );
    }
    // Stats follow the caches: a new PropagationPolicy is counted.
    let pp_ar = ApiResource {
        group: "policy.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "policy.karmada.io/v1alpha1".into(),
        kind: "PropagationPolicy".into(),
        plural: "propagationpolicies".into(),
    };
    let pps: Api<DynamicObject> =
        Api::namespaced_with(env.sim.client("karmada-1").await, "default", &pp_ar);
    let pp = DynamicObject::new("web", &pp_ar).data(json!({"spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]}}));
    pps.create(&PostParams::default(), &pp).await.expect("pp");
    eventually(
        Duration::from_secs(10),
        "the policy to be counted",
        || async {
            env.status("karmada-1")
                .await
                .and_then(|s| s.stats)
                .filter(|s| s.propagation_policies == 1)
        },
    )
    .await;
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_instance_goes_through_the_karmada_object() {
    let env = Env::start(0).await;
    let tree = env.start_tree(None, "solo").await;
    let i: kairship::crd::Instance = serde_json::from_value(json!({"apiVersion": "kairship.io/v1alpha1", "kind": "Instance", "metadata": {"name": "team-a"}, "spec": {"mode": "Managed"}})).expect("instance");
    env.instances()
        .create(&PostParams::default(), &i)
        .await
        .expect("create");
    let status = env
        .wait_phase("team-a", Phase::Running, Duration::from_secs(30))
        .await;
    assert_eq!(
        status.karmada_version.as_deref(),
        Some(kairship_sim::operator::KARMADA_VERSION)
    );
    assert_eq!(status.stats.expect("stats").clusters_total, 2);
    let karmadas: Api<DynamicObject> = Api::namespaced_with(
        env.host.clone(),
        NS,
        &kairship::host::karmada::karmada_resource(),
    );
    assert!(
        karmadas.get_opt("team-a").await.expect("get").is_some(),
        "Karmada object created"
    );

    env.instances()
        .delete("team-a", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        Duration::from_secs(20),
        "team-a and its Karmada object gone",
        || async {
            let gone = env.instances().get_opt("team-a").await.ok()?.is_none()
                && karmadas.get_opt("team-a").await.ok()?.is_none();
            gone.then_some(())
        },
    )
    .await;
    assert!(
        env.sim.fleet.instance("team-a").is_none(),
        "the simulated control plane was torn down"
    );
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_the_actor_and_delete_cleans_up() {
    let (env, tree) = Env::running(1).await;
    let inst = env.instances().get("karmada-1").await.expect("get");
    assert!(
        inst.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&kairship::crd::FINALIZER.to_string()),
        "finalizer added"
    );

    env.instances()
        .patch(
            "karmada-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .expect("pause");
    eventually(Duration::from_secs(10), "the actor to stop", || async {
        actor(&tree, "karmada-1")
            .await
            .filter(|a| a.state == ActorState::Stopped)
    })
    .await;
    assert!(tree.instance("karmada-1").await.expect("lookup").is_none());
    env.instances()
        .patch(
            "karmada-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .expect("resume");
    eventually(
        Duration::from_secs(10),
        "the actor to run again",
        || async {
            actor(&tree, "karmada-1")
                .await
                .filter(|a| a.state == ActorState::Running)
        },
    )
    .await;

    env.instances()
        .delete("karmada-1", &DeleteParams::default())
        .await
        .expect("delete");
    let regs = Api::<InstanceRegistration>::all(env.host.clone());
    eventually(
        Duration::from_secs(15),
        "instance and registration gone",
        || async {
            (env.instances().get_opt("karmada-1").await.ok()?.is_none()
                && regs.get_opt("karmada-1").await.ok()?.is_none())
            .then_some(())
        },
    )
    .await;
    eventually(Duration::from_secs(10), "the actor forgotten", || async {
        actor(&tree, "karmada-1").await.is_none().then_some(())
    })
    .await;
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_spec_is_reported_not_retried() {
    let env = Env::start(0).await;
    let tree = env.start_tree(None, "solo").await;
    let i: kairship::crd::Instance = serde_json::from_value(json!({"apiVersion": "kairship.io/v1alpha1", "kind": "Instance", "metadata": {"name": "broken"}, "spec": {"mode": "External"}})).expect("instance");
    env.instances()
        .create(&PostParams::default(), &i)
        .await
        .expect("create");
    let status = env
        .wait_phase("broken", Phase::Degraded, Duration::from_secs(10))
        .await;
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.reason == "InvalidSpec" && c.message.contains("spec.external")),
        "{status:?}"
    );
    tree.shutdown().await;
}

/// An instance that answers but cannot serve one of Karmada's kinds (its CRD deleted, as
/// on a half-installed or half-uninstalled control plane) is Degraded, naming the kind,
/// while another instance stays Running; with the CRD back it is Running again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_karmada_crd_degrades_only_its_instance_until_it_is_back() {
    let (env, tree) = Env::running(2).await;
    const CRD: &str = "overridepolicies.policy.karmada.io";
    let crd = env.take_crd("karmada-1", CRD).await;
    let status = env
        .wait_phase("karmada-1", Phase::Degraded, Duration::from_secs(30))
        .await;
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(ready.reason, "Degraded", "{status:?}");
    assert!(ready.message.contains(CRD), "names the kind: {ready:?}");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Reachable" && c.status == "True"),
        "it still answers: {status:?}"
    );
    assert_eq!(
        env.status("karmada-2").await.map(|s| s.phase),
        Some(Phase::Running),
        "the other instance is untouched"
    );
    let a = actor(&tree, "karmada-1").await.expect("actor");
    assert_eq!(
        a.state,
        ActorState::Running,
        "a degraded instance is not a crash"
    );

    env.give_back_crd("karmada-1", crd).await;
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(60))
        .await;
    tree.shutdown().await;
}

/// A plain Kubernetes API server attached as an instance by mistake (here the host, which
/// serves none of Karmada's kinds) never completes its caches: Degraded, saying which kind
/// is missing, not Pending for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_karmada_is_degraded_naming_what_is_missing() {
    let env = Env::start(0).await;
    let tree = env.start_tree(None, "solo").await;
    env.create_external("host").await;
    let status = env
        .wait_phase("host", Phase::Degraded, Duration::from_secs(30))
        .await;
    let synced = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Synced")
        .expect("a Synced condition");
    assert_eq!(synced.status, "False", "{status:?}");
    assert!(
        synced.message.contains("clusters.cluster.karmada.io"),
        "names the missing kind: {synced:?}"
    );
    tree.shutdown().await;
}
