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

        // Update with the current version: priority changes.
        let mut current: Value = serde_json::from_str(&got.object_json).expect("object_json");
        let stale = current.clone();
        current["spec"]["priority"] = json!(7);
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
                    .filter(|r| r.get_ref().priority == 7)
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
