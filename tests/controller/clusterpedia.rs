//! Clusterpedia registration against its CRD on the simulated host: one PediaCluster per
//! Instance reading the instance through a Secret reference with a short-lived token of a
//! read-only ServiceAccount (never Kairship's admin credentials), renewed before it
//! expires, kept as Kairship wrote it, reported in the Instance's conditions, gone with
//! the Instance, and never taking over or deleting a same-named registration that is not
//! Kairship's. (The real tier checks the same against Clusterpedia's own CRDs.)

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kairship::actors::tree::Tree;
use kairship::controllers::clusterpedia;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::eventually;
use crate::harness::{fast_settings, Env};

const PEDIA_NS: &str = "clusterpedia-system";

/// The PediaCluster kind as Clusterpedia's CRD declares it (cluster-scoped, a status
/// subresource); its schema is left open here.
async fn install_pedia_crd(host: &kube::Client) {
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "pediaclusters.cluster.clusterpedia.io"},
            "spec": {"group": "cluster.clusterpedia.io", "scope": "Cluster",
                "names": {"kind": "PediaCluster", "plural": "pediaclusters", "singular": "pediacluster", "listKind": "PediaClusterList"},
                "versions": [{"name": "v1alpha2", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .expect("CRD");
    Api::all(host.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("install the PediaCluster CRD");
}

/// Writes the `Ready` condition clustersynchro-manager would write.
async fn report_ready(
    pedias: &Api<DynamicObject>,
    name: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let condition = json!({"type": "Ready", "status": status, "reason": reason,
        "message": message, "lastTransitionTime": "2026-11-24T00:00:00Z"});
    pedias
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [condition]}})),
        )
        .await
        .expect("status");
}

/// Whether `name` is gone (`None` when the host did not say).
async fn gone<K>(api: &Api<K>, name: &str) -> Option<bool>
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    Some(api.get_opt(name).await.ok()?.is_none())
}

fn condition(env_status: &kairship::crd::InstanceStatus) -> Option<(String, String, String)> {
    env_status
        .conditions
        .iter()
        .find(|c| c.type_ == clusterpedia::CONDITION)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A client from the kubeconfig Kairship gave Clusterpedia.
async fn reader_client(kubeconfig: ByteString) -> kube::Client {
    let text = String::from_utf8(kubeconfig.0).expect("UTF-8");
    let kc = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("usable");
    kube::Client::try_from(config).expect("client")
}

/// `reader` is Clusterpedia's ServiceAccount on `instance`: it lists Deployments, and may
/// not read Secrets or write anything.
async fn assert_reads_only(reader: &kube::Client, instance: &str) {
    use k8s_openapi::api::apps::v1::Deployment;
    let deployments: Api<Deployment> = Api::all(reader.clone());
    deployments
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("{instance}: the reader lists deployments: {e}"));
    let secrets: Api<Secret> = Api::all(reader.clone());
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(e)) if e.code == 403 => assert!(
            e.message
                .contains("system:serviceaccount:kube-system:kairship-clusterpedia"),
            "{instance}: refused as the reader: {}",
            e.message
        ),
        other => panic!("{instance}: the reader must not list secrets: {other:?}"),
    }
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "pedia-write"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}}}}))
    .expect("deployment");
    let write = Api::<Deployment>::namespaced(reader.clone(), "default")
        .create(&PostParams::default(), &d)
        .await;
    assert!(
        matches!(write, Err(kube::Error::Api(ref e)) if e.code == 403),
        "{instance}: the reader must not write: {write:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_is_registered_with_clusterpedia_through_a_secret_and_removed_with_it() {
    let env = Env::start(2).await;
    install_pedia_crd(&env.host).await;
    kairship::bootstrap::ensure_namespace(&env.host, PEDIA_NS)
        .await
        .expect("namespace");
    let settings = kairship::context::Settings {
        clusterpedia: Some(PEDIA_NS.into()),
        clusterpedia_every: Duration::from_millis(300),
        ..fast_settings()
    };
    let tree = Tree::start(env.host.clone(), None, "solo", settings)
        .await
        .expect("tree starts");
    env.create_external("karmada-1").await;
    env.create_external("karmada-2").await;
    let pedias: Api<DynamicObject> = Api::all_with(env.host.clone(), &clusterpedia::resource());
    let secrets: Api<Secret> = Api::namespaced(env.host.clone(), PEDIA_NS);
    let kubeconfig_of = |s: Secret| s.data.and_then(|mut d| d.remove("kubeconfig"));

    for name in ["karmada-1", "karmada-2"] {
        let pedia = eventually(Duration::from_secs(20), "a PediaCluster", || async {
            pedias.get_opt(name).await.ok().flatten()
        })
        .await;
        let secret = format!("kairship-{name}-kubeconfig");
        assert_eq!(
            pedia.data["spec"]["authenticationFrom"]["kubeconfig"],
            json!({"name": secret, "key": "kubeconfig"})
        );
        for inline in ["kubeconfig", "tokenData", "certData", "keyData"] {
            assert!(pedia.data["spec"].get(inline).is_none(), "{inline} inline");
        }
        let apps = pedia.data["spec"]["syncResources"]
            .as_array()
            .and_then(|gs| gs.iter().find(|g| g["group"] == "apps"))
            .expect("apps synced");
        assert!(apps["resources"]
            .as_array()
            .expect("resources")
            .contains(&json!("deployments")));
        // Clusterpedia gets a read-only identity on the instance, never Kairship's own:
        // the Secret's kubeconfig names the instance's server and a token of its
        // ServiceAccount, which may list what is synced and nothing else.
        let copy = secrets.get(&secret).await.expect("the secret");
        let reader = reader_client(kubeconfig_of(copy).expect("a kubeconfig")).await;
        assert_reads_only(&reader, name).await;
        // Nothing reported by Clusterpedia yet: Unknown, saying so.
        let (status, reason, _) = eventually(Duration::from_secs(10), "the condition", || async {
            condition(&env.status(name).await?)
        })
        .await;
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("Unknown", "Registered")
        );
    }

    // Clusterpedia's Ready condition shows on the Instance in its words.
    report_ready(
        &pedias,
        "karmada-1",
        "False",
        "ClusterUnhealthy",
        "cluster is unhealthy: dial tcp: refused",
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "Clusterpedia's failure",
        || async {
            let c = condition(&env.status("karmada-1").await?)?;
            (c.0 == "False" && c.1 == "ClusterUnhealthy" && c.2.contains("dial tcp")).then_some(())
        },
    )
    .await;
    report_ready(&pedias, "karmada-1", "True", "Ready", "").await;
    eventually(
        Duration::from_secs(10),
        "ClusterpediaSynced True",
        || async { (condition(&env.status("karmada-1").await?)?.0 == "True").then_some(()) },
    )
    .await;

    // A token near its expiry is replaced by a new one before it stops working.
    let token_of = |s: Secret| {
        let kc = kubeconfig_of(s)?;
        let v: serde_json::Value = serde_json::from_slice(&kc.0).ok()?;
        v["users"][0]["user"]["token"].as_str().map(String::from)
    };
    let first = token_of(
        secrets
            .get("kairship-karmada-1-kubeconfig")
            .await
            .expect("read"),
    );
    assert!(first.is_some(), "a token in the kubeconfig");
    let soon = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(600))
        .expect("time");
    secrets
        .patch(
            "kairship-karmada-1-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"kairship.io/token-expires": soon.to_string()}}})),
        )
        .await
        .expect("age the token");
    let renewed = eventually(Duration::from_secs(10), "a new token", || async {
        let s = secrets.get("kairship-karmada-1-kubeconfig").await.ok()?;
        let t = token_of(s.clone())?;
        (Some(&t) != first.as_ref()).then_some(s)
    })
    .await;
    let expires: jiff::Timestamp = renewed
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kairship.io/token-expires"))
        .and_then(|t| t.parse().ok())
        .expect("an expiry");
    assert!(
        expires.as_second() - jiff::Timestamp::now().as_second() > 3000,
        "an hour's token"
    );
    let reader = reader_client(kubeconfig_of(renewed).expect("a kubeconfig")).await;
    assert_reads_only(&reader, "karmada-1").await;

    // Credentials someone put inline are taken out again; the spec is Kairship's.
    pedias
        .patch(
            "karmada-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"tokenData": "c2VjcmV0", "syncResources": []}})),
        )
        .await
        .expect("tamper");
    eventually(Duration::from_secs(10), "the spec restored", || async {
        let p = pedias.get("karmada-1").await.ok()?;
        (p.data["spec"] == clusterpedia::spec("karmada-1")).then_some(())
    })
    .await;

    // A PediaCluster that is not Kairship's (someone else's registration of the same name)
    // is neither rewritten nor deleted; the Instance says why it is not registered.
    pedias
        .patch(
            "karmada-2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": null, "ownerReferences": null},
                "spec": {"syncResources": [{"group": "apps", "resources": ["deployments"]}]}}),
            ),
        )
        .await
        .expect("someone else's now");
    eventually(Duration::from_secs(10), "NameTaken", || async {
        let c = condition(&env.status("karmada-2").await?)?;
        (c.0 == "False" && c.1 == "NameTaken" && c.2.contains("PediaCluster karmada-2"))
            .then_some(())
    })
    .await;
    let foreign = pedias.get("karmada-2").await.expect("read");
    assert_eq!(
        foreign.data["spec"]["syncResources"],
        json!([{"group": "apps", "resources": ["deployments"]}]),
        "left as its owner wrote it"
    );

    // Deleting an Instance removes its registration and credentials, and only those.
    env.instances()
        .delete("karmada-1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        Duration::from_secs(15),
        "PediaCluster and Secret gone",
        || async {
            (gone(&pedias, "karmada-1").await?
                && gone(&secrets, "kairship-karmada-1-kubeconfig").await?)
                .then_some(())
        },
    )
    .await;
    assert!(pedias.get_opt("karmada-2").await.expect("read").is_some());
    assert!(secrets
        .get_opt("kairship-karmada-2-kubeconfig")
        .await
        .expect("read")
        .is_some());
    // Deleting karmada-2 removes Kairship's Secret and leaves the foreign PediaCluster.
    env.instances()
        .delete("karmada-2", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(Duration::from_secs(15), "karmada-2 gone", || async {
        (gone(&env.instances(), "karmada-2").await?
            && gone(&secrets, "kairship-karmada-2-kubeconfig").await?)
            .then_some(())
    })
    .await;
    assert!(pedias.get_opt("karmada-2").await.expect("read").is_some());
    tree.shutdown().await;
}
