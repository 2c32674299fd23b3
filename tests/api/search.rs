//! Fleet search: a workload created in two instances is found in both with its placement;
//! a viewer of one instance finds only that one; paging, names and selectors behave as the
//! lists do; bad input is refused naming the field, over gRPC and REST.

use std::time::Duration;

use kairship::proto::search_service_client::SearchServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use serde_json::json;
use tonic::Code;

use crate::auth::{signer, start, ADMIN, VIEWER};
use crate::common::eventually;

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    r
}

fn deployment(name: &str) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": "default", "labels": {"app": "payments"}},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "payments"}},
                    "template": {"metadata": {"labels": {"app": "payments"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    .to_string()
}

fn policy() -> String {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
           "metadata": {"name": "payments", "namespace": "default"},
           "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                           "labelSelector": {"matchLabels": {"app": "payments"}}}],
                    "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_query_finds_a_workload_in_every_instance_the_caller_may_view() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let mut workloads = WorkloadServiceClient::new(api.channel.clone());
    let mut policies =
        kairship::proto::policy_service_client::PolicyServiceClient::new(api.channel.clone());
    for instance in ["karmada-1", "karmada-2"] {
        for name in ["payments-api", "payments-worker"] {
            workloads
                .create_workload(with(
                    ADMIN,
                    CreateWorkloadRequest {
                        instance: instance.into(),
                        object_json: deployment(name),
                    },
                ))
                .await
                .expect("create");
        }
        policies
            .create_policy(with(
                ADMIN,
                CreatePolicyRequest {
                    instance: instance.into(),
                    object_json: policy(),
                },
            ))
            .await
            .expect("policy");
    }
    let mut search = SearchServiceClient::new(api.channel.clone());
    let by_label = |token: &'static str| {
        with(
            token,
            SearchRequest {
                label_selector: "app=payments".into(),
                ..Default::default()
            },
        )
    };
    // Found in both instances, each placed by its instance's Karmada.
    let found = eventually(Duration::from_secs(20), "both placed", || {
        let mut s = search.clone();
        async move {
            let r = s.search(by_label(ADMIN)).await.ok()?.into_inner();
            let placed = r
                .hits
                .iter()
                .filter(|h| h.kind == "Deployment")
                .filter(|h| {
                    h.placement
                        .as_ref()
                        .is_some_and(|p| p.clusters.iter().any(|c| c.name == "member1"))
                })
                .count();
            (placed == 4).then_some(r)
        }
    })
    .await;
    let instances: std::collections::BTreeSet<&str> =
        found.hits.iter().map(|h| h.instance.as_str()).collect();
    assert_eq!(
        instances.into_iter().collect::<Vec<_>>(),
        ["karmada-1", "karmada-2"]
    );
    let api_hit = found
        .hits
        .iter()
        .find(|h| h.name == "payments-api" && h.instance == "karmada-2")
        .expect("payments-api in karmada-2");
    assert_eq!(
        api_hit.labels.get("app").map(String::as_str),
        Some("payments")
    );
    assert!(
        api_hit.policies.iter().any(|p| p.name == "payments"),
        "{api_hit:?}"
    );
    assert_eq!(api_hit.replicas, 2);

    // The viewer of karmada-1 finds only karmada-1's.
    let viewed = search
        .search(by_label(VIEWER))
        .await
        .expect("viewer")
        .into_inner();
    assert!(!viewed.hits.is_empty());
    assert!(
        viewed.hits.iter().all(|h| h.instance == "karmada-1"),
        "{viewed:?}"
    );

    // Narrower queries: a kind, a name (exact and substring), one instance, paging.
    let q = |req: SearchRequest| with(ADMIN, req);
    let exact = search
        .search(q(SearchRequest {
            kinds: vec!["Deployment".into()],
            name: "payments-api".into(),
            ..Default::default()
        }))
        .await
        .expect("exact")
        .into_inner();
    assert_eq!(exact.hits.len(), 2, "{exact:?}");
    let part = search
        .search(q(SearchRequest {
            kinds: vec!["Deployment".into()],
            name: "worker".into(),
            name_match: NameMatch::Substring as i32,
            instances: vec!["karmada-2".into()],
            ..Default::default()
        }))
        .await
        .expect("substring")
        .into_inner();
    assert_eq!(
        part.hits
            .iter()
            .map(|h| (h.instance.as_str(), h.name.as_str()))
            .collect::<Vec<_>>(),
        [("karmada-2", "payments-worker")]
    );
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = search
            .search(q(SearchRequest {
                kinds: vec!["Deployment".into()],
                label_selector: "app=payments".into(),
                page_size: 3,
                page_token: token.clone(),
                ..Default::default()
            }))
            .await
            .expect("page")
            .into_inner();
        assert!(page.hits.len() <= 3);
        seen.extend(
            page.hits
                .into_iter()
                .map(|h| format!("{}/{}", h.instance, h.name)),
        );
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "hits come in a stable order");

    // Bad input names the field, over gRPC and REST.
    let bad = search
        .search(q(SearchRequest {
            label_selector: "app in (".into(),
            ..Default::default()
        }))
        .await
        .expect_err("bad selector");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message().starts_with("label_selector"),
        "{}",
        bad.message()
    );
    let bad = search
        .search(q(SearchRequest {
            kinds: vec!["Pod".into()],
            ..Default::default()
        }))
        .await
        .expect_err("bad kind");
    assert!(bad.message().starts_with("kinds[0]"), "{}", bad.message());
    let rest = api.https_client(ADMIN).await;
    let ok = rest
        .request_text(
            http::Request::get(
                "/apis/kairship.io/v1alpha1/search?label_selector=app%3Dpayments&kinds=Deployment&kinds=StatefulSet&instances=karmada-1",
            )
            .body(Vec::new())
            .expect("request"),
        )
        .await
        .expect("REST search");
    let v: serde_json::Value = serde_json::from_str(&ok).expect("json");
    assert_eq!(v["hits"].as_array().map(Vec::len), Some(2), "{v}");
    match rest
        .request_text(
            http::Request::get("/apis/kairship.io/v1alpha1/search?instance_selector=%3D%3D")
                .body(Vec::new())
                .expect("request"),
        )
        .await
    {
        // HTTP 400 with google.rpc.Status naming the field (kube reads the body as text).
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{s:?}");
            assert!(
                s.message.contains("\"field\":\"instance_selector\""),
                "{}",
                s.message
            );
        }
        other => panic!("a bad selector over REST: {other:?}"),
    }
    api.stop().await;
}
