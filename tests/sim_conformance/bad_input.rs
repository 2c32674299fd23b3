//! Bad input gets the right Kubernetes `Status` and leaves the store unchanged; object
//! lifecycle rules (finalizers, status subresource, generation, generateName).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::common::Sim;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
    content_type: &str,
) -> Result<Value, Box<kube::core::Status>> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .expect("request");
    match client.request::<Value>(req).await {
        Ok(v) => Ok(v),
        Err(kube::Error::Api(s)) => Err(s),
        Err(e) => panic!("transport error for {method} {path}: {e}"),
    }
}

async fn expect_status(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Vec<u8>,
    code: u16,
    reason: &str,
    mentions: &str,
) {
    let err = call(client, method, path, body, "application/json")
        .await
        .expect_err("must fail");
    assert_eq!(
        (err.code, err.reason.as_str()),
        (code, reason),
        "{method} {path}: {err:?}"
    );
    assert!(
        err.message.contains(mentions),
        "message {:?} should mention {mentions:?}",
        err.message
    );
}

#[tokio::test]
async fn bad_requests_get_status_errors_and_change_nothing() {
    let sim = Sim::start(1).await;
    let client = sim.client("karmada-1").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "keep"}, "data": {"a": "1"}}))
            .expect("cm"),
    )
    .await
    .expect("create");
    let before = serde_json::to_value(cms.list(&ListParams::default()).await.expect("list").items)
        .expect("json");

    expect_status(
        &client,
        "POST",
        CMS,
        b"{not json".to_vec(),
        400,
        "BadRequest",
        "not valid JSON",
    )
    .await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    expect_status(
        &client,
        "POST",
        CMS,
        secret.to_string().into_bytes(),
        400,
        "BadRequest",
        "kind",
    )
    .await;
    let bad_name =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
    expect_status(
        &client,
        "POST",
        CMS,
        bad_name.to_string().into_bytes(),
        422,
        "Invalid",
        "metadata.name",
    )
    .await;
    let no_name = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
    expect_status(
        &client,
        "POST",
        CMS,
        no_name.to_string().into_bytes(),
        422,
        "Invalid",
        "name or generateName",
    )
    .await;
    expect_status(
        &client,
        "GET",
        "/apis/example.com/v1/widgets",
        vec![],
        404,
        "NotFound",
        "could not find",
    )
    .await;
    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"x": "y".repeat(4 << 20)}});
    expect_status(
        &client,
        "POST",
        CMS,
        huge.to_string().into_bytes(),
        413,
        "RequestEntityTooLarge",
        "limit",
    )
    .await;
    let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    expect_status(
        &client,
        "POST",
        "/api/v1/namespaces/nope/configmaps",
        elsewhere.to_string().into_bytes(),
        404,
        "NotFound",
        "nope",
    )
    .await;
    let mismatched = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "kube-system"}});
    expect_status(
        &client,
        "POST",
        CMS,
        mismatched.to_string().into_bytes(),
        400,
        "BadRequest",
        "namespace",
    )
    .await;
    let bad_patch = call(
        &client,
        "PATCH",
        &format!("{CMS}/keep"),
        b"[{\"op\":\"remove\",\"path\":\"/nope\"}]".to_vec(),
        "application/json-patch+json",
    )
    .await
    .expect_err("fails");
    assert_eq!(bad_patch.code, 422);
    let bad_selector = cms
        .list(&ListParams::default().labels("a in b"))
        .await
        .expect_err("bad selector");
    assert!(
        matches!(bad_selector, kube::Error::Api(ref s) if s.code == 400),
        "{bad_selector:?}"
    );
    let stale = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep", "resourceVersion": "1"}, "data": {"a": "2"}});
    expect_status(
        &client,
        "PUT",
        &format!("{CMS}/keep"),
        stale.to_string().into_bytes(),
        409,
        "Conflict",
        "modified",
    )
    .await;

    let after = serde_json::to_value(cms.list(&ListParams::default()).await.expect("list").items)
        .expect("json");
    assert_eq!(before, after, "rejected requests leave the store unchanged");
}

#[tokio::test]
async fn missing_or_wrong_token_is_401() {
    let sim = Sim::start(1).await;
    let mut kc =
        kube::config::Kubeconfig::read_from(sim.kubeconfig("karmada-1")).expect("kubeconfig");
    if let Some(auth) = kc.auth_infos[0].auth_info.as_mut() {
        auth.token = Some("wrong-token".to_string().into());
    }
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    match Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized")),
        other => panic!("a wrong token must be 401, got {other:?}"),
    }
}

#[tokio::test]
async fn finalizers_status_subresource_generation_and_generate_name() {
    let sim = Sim::start(1).await;
    let client = sim.client("karmada-1").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
        )
        .expect("cm"),
    )
    .await
    .expect("create");
    cms.delete("held", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let held = cms
        .get("held")
        .await
        .expect("still there while finalizers remain");
    assert!(held.metadata.deletion_timestamp.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("clear finalizers");
    assert!(
        cms.get_opt("held").await.expect("get").is_none(),
        "removed once finalizers are empty"
    );

    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}, "status": {"replicas": 7}})).expect("deploy");
    let created = deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    assert_eq!(
        created.status,
        Some(Default::default()),
        "status is not set through the main resource (it reads back empty)"
    );
    let st = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"readyReplicas": 1}, "spec": {"replicas": 9}})),
        )
        .await
        .expect("status");
    assert_eq!(st.status.as_ref().and_then(|s| s.ready_replicas), Some(1));
    assert_eq!(
        st.spec.as_ref().and_then(|s| s.replicas),
        Some(1),
        "a status write leaves spec alone"
    );
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status changes do not bump generation"
    );
    let sp = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("spec");
    assert_eq!(sp.metadata.generation, Some(2));
    let labelled = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("labels");
    assert_eq!(
        labelled.metadata.generation,
        Some(2),
        "metadata changes do not bump generation"
    );

    let generated = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).expect("cm"),
        )
        .await
        .expect("generateName");
    let name = generated.metadata.name.expect("name");
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}
