//! PolicyService for every kind of Karmada policy: create, get (from the cache), update
//! (a stale resourceVersion refused), delete, over gRPC, and the same reads over REST.

use std::time::Duration;

use kairship::proto::policy_service_client::PolicyServiceClient;
use kairship::proto::*;
use serde_json::{json, Value};
use tonic::Code;

use crate::common::eventually;
use crate::rest::{call, P};
use crate::server::Api;

fn get(kind: &str, namespace: &str, name: &str) -> GetPolicyRequest {
    GetPolicyRequest {
        instance: "karmada-1".into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_policy_kind_round_trips() {
    let api = Api::start(1).await;
    let mut p = PolicyServiceClient::new(api.channel.clone());
    let rest = crate::rest::client(&api).await;
    let selectors = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]);
    let cases = [
        (
            "OverridePolicy",
            "default",
            json!({"resourceSelectors": selectors,
            "overrideRules": [{"targetCluster": {"clusterNames": ["member1"]},
                "overriders": {"labelsOverrider": [{"operator": "add", "value": {"tier": "a"}}]}}]}),
        ),
        (
            "ClusterPropagationPolicy",
            "",
            json!({"resourceSelectors": selectors,
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}),
        ),
        (
            "ClusterOverridePolicy",
            "",
            json!({"resourceSelectors": selectors,
            "overrideRules": [{"overriders": {"annotationsOverrider": [{"operator": "add", "value": {"a": "b"}}]}}]}),
        ),
    ];
    for (kind, ns, spec) in cases {
        let name = format!("{}-crud", kind.to_lowercase());
        let mut meta = json!({"name": name});
        if !ns.is_empty() {
            meta["namespace"] = json!(ns);
        }
        let obj = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": meta, "spec": spec});
        let created = p
            .create_policy(CreatePolicyRequest {
                instance: "karmada-1".into(),
                object_json: obj.to_string(),
            })
            .await
            .unwrap_or_else(|e| panic!("{kind} created: {e}"))
            .into_inner();
        assert_eq!(created.kind, kind);
        let got = eventually(Duration::from_secs(10), "the policy in the cache", || {
            let mut p = p.clone();
            let req = get(kind, ns, &name);
            async move { p.get_policy(req).await.ok().map(|r| r.into_inner()) }
        })
        .await;
        assert_eq!(got.resource_selectors.len(), 1, "{got:?}");
        if kind == "ClusterPropagationPolicy" {
            assert_eq!(got.cluster_names, ["member1"], "{got:?}");
        }
        // REST reads the same object.
        let path = match ns {
            "" => format!("{P}/instances/karmada-1/policies/{kind}/{name}"),
            ns => format!("{P}/instances/karmada-1/policies/{kind}/{name}?namespace={ns}"),
        };
        let (code, body) = call(&rest, "GET", &path, None).await;
        assert_eq!((code, body["kind"].as_str()), (200, Some(kind)), "{body}");

        // Update with the current version: a label is added (override policies have no
        // priority in Karmada's schema, which would prune it).
        let mut current: Value = serde_json::from_str(&got.object_json).expect("object_json");
        let stale = current.clone();
        current["metadata"]["labels"] = json!({"round": "trip"});
        p.update_policy(UpdatePolicyRequest {
            instance: "karmada-1".into(),
            object_json: current.to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("{kind} updated: {e}"));
        eventually(Duration::from_secs(10), "the update in the cache", || {
            let mut p = p.clone();
            let req = get(kind, ns, &name);
            async move {
                p.get_policy(req)
                    .await
                    .ok()
                    .filter(|r| {
                        serde_json::from_str::<Value>(&r.get_ref().object_json)
                            .is_ok_and(|o| o["metadata"]["labels"]["round"] == "trip")
                    })
                    .map(|_| ())
            }
        })
        .await;
        // The stale version is refused, and changes nothing.
        let refused = p
            .update_policy(UpdatePolicyRequest {
                instance: "karmada-1".into(),
                object_json: stale.to_string(),
            })
            .await
            .expect_err("a stale update");
        assert_eq!(refused.code(), Code::Aborted, "{refused:?}");

        p.delete_policy(DeletePolicyRequest {
            instance: "karmada-1".into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.clone(),
        })
        .await
        .unwrap_or_else(|e| panic!("{kind} deleted: {e}"));
        eventually(Duration::from_secs(10), "the policy gone", || {
            let mut p = p.clone();
            let req = get(kind, ns, &name);
            async move { (p.get_policy(req).await.err()?.code() == Code::NotFound).then_some(()) }
        })
        .await;
    }
    api.stop().await;
}

fn taint_policy(effect: &str) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
        "metadata": {"name": "evict-not-ready"},
        "spec": {"targetClusters": {"clusterNames": ["member1"]},
            "addOnConditions": [{"conditionType": "Ready", "operator": "NotIn", "statusValues": ["True"]}],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": "cluster.karmada.io/not-ready", "effect": effect}]}})
}

/// ClusterTaintPolicies (Karmada >= 1.14) through PolicyService and the proxy, from the
/// cache; an instance without their CRD (an older Karmada) stays Running and the proxy
/// answers what the instance answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_taint_policies_are_policies_and_optional() {
    let api = Api::start(1).await;
    let mut p = PolicyServiceClient::new(api.channel.clone());
    p.create_policy(CreatePolicyRequest {
        instance: "karmada-1".into(),
        object_json: taint_policy("NoSchedule").to_string(),
    })
    .await
    .expect("ClusterTaintPolicy created");
    let got = eventually(Duration::from_secs(10), "the taint policy cached", || {
        let mut p = p.clone();
        let req = get("ClusterTaintPolicy", "", "evict-not-ready");
        async move { p.get_policy(req).await.ok().map(|r| r.into_inner()) }
    })
    .await;
    let mut current: Value = serde_json::from_str(&got.object_json).expect("object_json");
    assert_eq!(current["spec"]["taints"][0]["effect"], "NoSchedule");
    current["spec"]["taints"][0]["effect"] = json!("NoExecute");
    p.update_policy(UpdatePolicyRequest {
        instance: "karmada-1".into(),
        object_json: current.to_string(),
    })
    .await
    .expect("ClusterTaintPolicy updated");
    let listed = eventually(Duration::from_secs(10), "the update listed", || {
        let mut p = p.clone();
        async move {
            let l = p
                .list_policies(ListPoliciesRequest {
                    instance: "karmada-1".into(),
                    kind: "ClusterTaintPolicy".into(),
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            let o: Value = serde_json::from_str(&l.policies.first()?.object_json).ok()?;
            (o["spec"]["taints"][0]["effect"] == "NoExecute").then_some(l)
        }
    })
    .await;
    assert_eq!(listed.policies.len(), 1, "{listed:?}");
    let proxy = api.proxy_kubeconfig("karmada-1");
    let out = api.kubectl_with(&proxy, &["get", "clustertaintpolicies", "-o", "name"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "clustertaintpolicy.policy.karmada.io/evict-not-ready",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An instance whose Karmada predates the kind: no CRD, no fault.
    api.env.sim.kubectl(
        "karmada-1",
        &["delete", "crd", "clustertaintpolicies.policy.karmada.io"],
    );
    // A new actor lists every kind afresh: the taint policies' list answers 404.
    kairship::proto::supervisor_service_client::SupervisorServiceClient::new(api.channel.clone())
        .restart_instance(RestartInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("restarted");
    // Its caches sync without the kind (reads are served from them again)...
    eventually(Duration::from_secs(20), "karmada-1's caches synced", || {
        let mut p = p.clone();
        async move {
            for kind in ["PropagationPolicy", "ClusterTaintPolicy"] {
                let l = p
                    .list_policies(ListPoliciesRequest {
                        instance: "karmada-1".into(),
                        kind: kind.into(),
                        ..Default::default()
                    })
                    .await
                    .ok()?;
                if kind == "ClusterTaintPolicy" && !l.get_ref().policies.is_empty() {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    // ...and it is not Degraded, past the time a failing watch takes to make it so (3 s).
    let mut instances =
        kairship::proto::instance_service_client::InstanceServiceClient::new(api.channel.clone());
    let mut phases = Vec::new();
    for _ in 0..16 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let phase = instances
            .get_instance(GetInstanceRequest {
                name: "karmada-1".into(),
            })
            .await
            .expect("instance")
            .into_inner()
            .status
            .map(|s| s.phase)
            .unwrap_or_default();
        phases.push(phase);
    }
    assert!(
        !phases.iter().any(|p| p == "Degraded")
            && phases.last().map(String::as_str) == Some("Running"),
        "an instance without ClusterTaintPolicies: {phases:?}"
    );
    let out = api.kubectl_with(&proxy, &["get", "clustertaintpolicies.policy.karmada.io"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && (said.contains("could not find the requested resource")
                || said.contains("doesn't have a resource type")),
        "{said}"
    );
    api.stop().await;
}
