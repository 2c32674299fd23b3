//! Removing a Pull mode member without its kubeconfig, on the simulator: the agent's RBAC
//! that `karmadactl register` wrote leaves the instance (so the agent cannot register
//! again), the Cluster goes, and the answer names what the member still holds for its
//! administrator. The whole flow with a real karmada-agent is the cluster tier's
//! (`tests/cluster/pull_mode.rs`).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::RemoveClusterRequest;
use kube::api::{Api as KubeApi, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::cluster_resource;
use crate::server::Api;

const CLUSTER: &str = "member2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_member_removed_without_its_kubeconfig_names_what_it_keeps() {
    let api = Api::start(1).await;
    let karmada = api.env.sim.client("karmada-1").await;
    // member2 as karmada-agent registers one, with the RBAC karmadactl register writes.
    let clusters: KubeApi<DynamicObject> = KubeApi::all_with(karmada.clone(), &cluster_resource());
    clusters
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"syncMode": "Pull"}})),
        )
        .await
        .expect("member2 in Pull mode");
    let role = format!("system:karmada:{CLUSTER}:agent");
    let roles: KubeApi<ClusterRole> = KubeApi::all(karmada.clone());
    let bindings: KubeApi<ClusterRoleBinding> = KubeApi::all(karmada.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": role},
                "rules": [{"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"], "verbs": ["get"]}]}))
            .expect("role"),
        )
        .await
        .expect("agent role");
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": role}]}))
            .expect("binding"),
        )
        .await
        .expect("agent binding");

    let mut c = ClusterServiceClient::new(api.channel.clone());
    let mut req = tonic::Request::new(RemoveClusterRequest {
        instance: "karmada-1".into(),
        name: CLUSTER.into(),
        force: true,
        wait_seconds: 30,
        ..Default::default()
    });
    // Karmada moves the nginx sample first, then the Works go.
    req.set_timeout(std::time::Duration::from_secs(150));
    let started = std::time::Instant::now();
    let removed = c.remove_cluster(req).await.expect("removed").into_inner();
    assert_eq!(
        removed.instance_cleaned,
        [
            format!("ClusterRoleBinding {role}"),
            format!("ClusterRole {role}")
        ],
        "{removed:?}"
    );
    assert_eq!(
        removed.member_left,
        [
            "Deployment karmada-system/karmada-agent",
            "ClusterRoleBinding karmada-agent",
            "ClusterRole karmada-agent",
            "ServiceAccount karmada-system/karmada-agent-sa",
            "Secret karmada-system/karmada-kubeconfig",
        ],
        "{removed:?}"
    );
    assert!(removed.member_cleaned.is_empty(), "{removed:?}");
    println!(
        "a Pull member removed in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    for (what, gone) in [
        (
            "the Cluster",
            clusters.get_opt(CLUSTER).await.map(|o| o.is_none()),
        ),
        (
            "the agent's ClusterRole",
            roles.get_opt(&role).await.map(|o| o.is_none()),
        ),
        (
            "its binding",
            bindings.get_opt(&role).await.map(|o| o.is_none()),
        ),
    ] {
        assert!(gone.expect("read the simulator"), "{what} is still there");
    }
}
