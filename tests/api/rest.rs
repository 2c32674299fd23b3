//! REST over HTTPS: the paths pinned in ../shared/DESIGN.md, proto3 JSON, and `google.rpc.Status`
//! errors with the matching HTTP status.

use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::server::Api;

pub async fn client(api: &Api) -> kube::Client {
    api.https_client("rest-test-token").await
}

pub async fn call(c: &kube::Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        ))
        .expect("request");
    let resp = c.send(req).await.expect("answer");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        code,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
    )
}

pub const P: &str = "/apis/kairship.io/v1alpha1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_paths_json_mapping_and_errors() {
    let api = Api::start(2).await;
    let c = client(&api).await;

    let (code, list) = call(&c, "GET", &format!("{P}/instances"), None).await;
    assert_eq!(code, 200, "{list}");
    let items = list["instances"].as_array().expect("instances");
    assert_eq!(items.len(), 2);
    // proto3 JSON: lowerCamelCase names, enums by name, int64 as strings.
    assert_eq!(items[0]["spec"]["mode"], "INSTANCE_MODE_EXTERNAL");
    assert!(items[0]["spec"]["kubeconfigSecretRef"]["name"].is_string());
    assert!(
        items[0]["metadata"]["generation"].is_string(),
        "int64 travels as a string: {}",
        items[0]["metadata"]
    );

    let (code, one) = call(&c, "GET", &format!("{P}/instances/karmada-1"), None).await;
    assert_eq!(
        (code, one["status"]["phase"].as_str()),
        (200, Some("Running"))
    );
    let (code, stats) = call(&c, "GET", &format!("{P}/instances/karmada-1/stats"), None).await;
    assert_eq!((code, stats["clustersTotal"].as_i64()), (200, Some(2)));
    let (code, page) = call(
        &c,
        "GET",
        &format!("{P}/instances?options.page_size=1"),
        None,
    )
    .await;
    assert_eq!(
        (code, page["instances"].as_array().map(Vec::len)),
        (200, Some(1))
    );
    assert!(page["nextPageToken"].is_string());
    let (code, actors) = call(&c, "GET", &format!("{P}/actors"), None).await;
    assert_eq!(code, 200);
    assert!(actors["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .any(|a| a["name"] == "instance/karmada-2"));
    let (code, restarted) = call(
        &c,
        "POST",
        &format!("{P}/instances/karmada-2:restart"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (code, restarted["actor"]["state"].as_str()),
        (200, Some("Running")),
        "{restarted}"
    );

    // Errors: google.rpc.Status with the HTTP status grpc-gateway uses.
    let (code, err) = call(&c, "GET", &format!("{P}/instances/nope"), None).await;
    assert_eq!((code, err["code"].as_i64()), (404, Some(5)), "{err}");
    assert!(err["message"].as_str().is_some_and(|m| m.contains("nope")));
    let (code, err) = call(
        &c,
        "POST",
        &format!("{P}/instances"),
        Some(json!({"metadata": {"name": "Bad_Name"}, "spec": {"mode": "INSTANCE_MODE_MANAGED"}})),
    )
    .await;
    assert_eq!(code, 400, "{err}");
    assert_eq!(
        err["details"][0]["fieldViolations"][0]["field"], "instance.metadata.name",
        "{err}"
    );
    let (code, _) = call(
        &c,
        "GET",
        &format!("{P}/instances?options.page_size=many"),
        None,
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = call(
        &c,
        "POST",
        &format!("{P}/instances"),
        Some(Value::String("not an object".into())),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = call(&c, "GET", &format!("{P}/widgets"), None).await;
    assert_eq!(code, 404);

    // Create and delete through REST; the tree picks the new instance up.
    let body = json!({"metadata": {"name": "via-rest"}, "spec": {"mode": "INSTANCE_MODE_EXTERNAL", "kubeconfigSecretRef": {"namespace": crate::harness::NS, "name": "karmada-1-kubeconfig"}}});
    let (code, created) = call(&c, "POST", &format!("{P}/instances"), Some(body)).await;
    assert_eq!(
        (code, created["metadata"]["name"].as_str()),
        (200, Some("via-rest")),
        "{created}"
    );
    api.env
        .wait_phase(
            "via-rest",
            kairship::crd::Phase::Running,
            std::time::Duration::from_secs(20),
        )
        .await;
    let (code, _) = call(&c, "DELETE", &format!("{P}/instances/via-rest"), None).await;
    assert_eq!(code, 200);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused_on_every_surface() {
    use kairship::proto::workload_service_client::WorkloadServiceClient;
    let api = Api::start(1).await;
    let big = "x".repeat(5 * 1024 * 1024);
    // REST: 413 with a google.rpc.Status body.
    let c = client(&api).await;
    let (code, body) = call(
        &c,
        "POST",
        &format!("{P}/instances"),
        Some(json!({"metadata": {"name": "big", "labels": {"a": big}}})),
    )
    .await;
    assert_eq!(code, 413, "{body}");
    assert_eq!(
        body["code"], 8,
        "RESOURCE_EXHAUSTED, as gRPC says it: {body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("larger than"),
        "{body}"
    );
    // Proxy: 413 with a Kubernetes Status.
    let proxy = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            json!({"metadata": {"name": "big"}, "data": {"a": big}})
                .to_string()
                .into_bytes(),
        ))
        .expect("request");
    let resp = proxy.send(req).await.expect("answer");
    assert_eq!(resp.status(), 413);
    let status: Value =
        serde_json::from_slice(&resp.into_body().collect().await.expect("body").to_bytes())
            .expect("json");
    assert_eq!(status["reason"], "RequestEntityTooLarge", "{status}");
    // gRPC: tonic's 4 MiB message limit, met before anything reads the message
    // (RESOURCE_EXHAUSTED, as grpc-go says it, naming the limit); nothing created.
    let mut w = WorkloadServiceClient::new(api.channel.clone());
    let err = w
        .create_workload(kairship::proto::CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: big.clone(),
        })
        .await
        .expect_err("too large");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("larger than"), "{err:?}");
    let (code, _) = call(&c, "GET", &format!("{P}/instances/big"), None).await;
    assert_eq!(code, 404, "nothing was created");
    api.stop().await;
}
