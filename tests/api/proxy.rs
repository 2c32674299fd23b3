//! kubectl and the Python client through Kairship's proxy: reads from the cache, Tables,
//! watches and writes passed through, and Kubernetes `Status` errors.

use std::process::Command;
use std::time::{Duration, Instant};

use kairship_test_support::{poll, PROCESS_POLL};
use serde_json::Value;

use crate::common::{kubectl_bin, shared_karmada};
use crate::server::Api;

fn kubectl(api: &Api, instance: &str, args: &[&str]) -> std::process::Output {
    api.kubectl_with(&api.proxy_kubeconfig(instance), args)
}

pub(crate) fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_works_through_the_proxy() {
    let api = Api::start(1).await;
    let clusters: Value = serde_json::from_str(&ok(kubectl(
        &api,
        "karmada-1",
        &["get", "clusters", "-o", "json"],
    )))
    .expect("json");
    assert_eq!(clusters["items"].as_array().map(Vec::len), Some(2));
    let table = ok(kubectl(&api, "karmada-1", &["get", "clusters"]));
    assert!(
        table.contains("READY") && table.contains("member1"),
        "{table}"
    );
    let selected: Value = serde_json::from_str(&ok(kubectl(
        &api,
        "karmada-1",
        &["get", "clusters", "-l", "region=eu-west-1", "-o", "json"],
    )))
    .expect("json");
    assert_eq!(selected["items"].as_array().map(Vec::len), Some(1));
    assert!(ok(kubectl(&api, "karmada-1", &["api-resources"])).contains("propagationpolicies"));

    let sample = shared_karmada("samples/nginx-deployment.yaml");
    assert!(ok(kubectl(
        &api,
        "karmada-1",
        &["apply", "-f", sample.to_str().expect("path")]
    ))
    .contains("created"));
    // The write went to the instance; the cache serves it once the watch delivered it.
    let deploy = poll(Duration::from_secs(10), PROCESS_POLL, || {
        let out = kubectl(
            &api,
            "karmada-1",
            &["get", "deployment", "nginx", "-o", "json"],
        );
        async move {
            match out.status.success() {
                true => Ok(serde_json::from_slice::<Value>(&out.stdout).expect("json")),
                false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
            }
        }
    })
    .await
    .unwrap_or_else(|e| panic!("nginx never showed up: {e}"));
    assert_eq!(deploy["spec"]["replicas"], 2);

    // A watch is streamed through: it sees a sentinel first, so it is open before the write.
    ok(kubectl(
        &api,
        "karmada-1",
        &["create", "configmap", "sentinel"],
    ));
    let mut cmd = Command::new(kubectl_bin());
    cmd.arg("--kubeconfig")
        .arg(api.proxy_kubeconfig("karmada-1"))
        .args([
            "get",
            "configmaps",
            "-w",
            "-o",
            "name",
            "--request-timeout=0",
        ]);
    let mut watch = crate::common::Lines::spawn(cmd);
    watch.wait_for("configmap/sentinel");
    ok(kubectl(
        &api,
        "karmada-1",
        &["create", "configmap", "through-proxy"],
    ));
    watch.wait_for("configmap/through-proxy");
    drop(watch);

    ok(kubectl(
        &api,
        "karmada-1",
        &["delete", "deployment", "nginx"],
    ));
    let gone = kubectl(&api, "karmada-1", &["get", "deployment", "nginx"]);
    assert!(!gone.status.success());
    api.stop().await;
}

async fn source(client: &kube::Client, path: &str, accept: &str) -> String {
    let req = http::Request::get(path)
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = client.send(req).await.expect("answer");
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    resp.headers()
        .get(kairship::api::proxy::SOURCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_reads_come_from_the_cache_and_the_rest_passes_through() {
    let api = Api::start(1).await;
    let client = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let clusters = "/apis/cluster.karmada.io/v1alpha1/clusters";
    assert_eq!(source(&client, clusters, "application/json").await, "cache");
    assert_eq!(
        source(&client, &format!("{clusters}/member1"), "application/json").await,
        "cache"
    );
    assert_eq!(
        source(
            &client,
            "/api/v1/namespaces/default/configmaps",
            "application/json"
        )
        .await,
        "instance",
        "uncached kinds pass through"
    );
    assert_eq!(
        source(
            &client,
            clusters,
            "application/json;as=Table;v=v1;g=meta.k8s.io"
        )
        .await,
        "instance",
        "Tables pass through"
    );
    // Paging from the cache follows continue tokens.
    let req = http::Request::get(format!("{clusters}?limit=1"))
        .body(Vec::new())
        .expect("request");
    let first: Value = client.request(req).await.expect("page");
    assert_eq!(first["items"].as_array().map(Vec::len), Some(1));
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue token")
        .to_string();
    let req = http::Request::get(format!("{clusters}?limit=1&continue={token}"))
        .body(Vec::new())
        .expect("request");
    let second: Value = client.request(req).await.expect("page 2");
    assert_ne!(
        first["items"][0]["metadata"]["name"],
        second["items"][0]["metadata"]["name"]
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_works_through_the_proxy() {
    let api = Api::start(1).await;
    crate::common::run_python(
        "sim_client.py",
        vec![api.proxy_kubeconfig("karmada-1").display().to_string()],
    )
    .await;
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_errors_are_kubernetes_statuses() {
    let api = Api::start(2).await;
    let client = crate::common::client_from(&api.proxy_kubeconfig("nope")).await;
    let req = http::Request::get("/api/v1/namespaces")
        .body(Vec::new())
        .expect("request");
    match client.request::<Value>(req).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
            assert!(s.message.contains("\"nope\""), "{}", s.message);
        }
        other => panic!("an unknown instance must be a 404 Status, got {other:?}"),
    }
    let missing = kubectl(&api, "karmada-1", &["get", "clusters", "member9"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("\"member9\" not found"));

    api.env.take_down("karmada-1").await;
    let t = Instant::now();
    let down = kubectl(&api, "karmada-1", &["get", "clusters", "-o", "json"]);
    assert!(!down.status.success());
    let err = String::from_utf8_lossy(&down.stderr);
    assert!(
        err.contains("unreachable") || err.contains("ServiceUnavailable") || err.contains("503"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "fails fast: {:?}",
        t.elapsed()
    );
    ok(kubectl(
        &api,
        "karmada-2",
        &["get", "clusters", "-o", "name"],
    ));
    api.stop().await;
}

/// Malformed query parameters get the instance's own 400 answer on the cache path too
/// (compared with the same request passed through to the instance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queries_are_answered_as_the_instance_answers_them() {
    use http_body_util::BodyExt;
    let api = Api::start(1).await;
    let client = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let answer = |path: String, forced: bool| {
        let client = client.clone();
        async move {
            let mut req = http::Request::get(path).header("accept", "application/json");
            if forced {
                req = req.header(kairship::api::proxy::SOURCE_HEADER, "instance");
            }
            let resp = client
                .send(req.body(kube::client::Body::empty()).expect("request"))
                .await
                .expect("answer");
            let code = resp.status().as_u16();
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            (
                code,
                v["kind"].as_str().unwrap_or_default().to_string(),
                v["reason"].as_str().unwrap_or_default().to_string(),
            )
        }
    };
    for q in [
        "limit=abc",
        "labelSelector=a%20in%20(",
        "fieldSelector=metadata.nam",
        "resourceVersion=abc",
    ] {
        let path = format!("/apis/cluster.karmada.io/v1alpha1/clusters?{q}");
        let cached = answer(path.clone(), false).await;
        let instance = answer(path, true).await;
        assert_eq!(cached.0, 400, "{q}: {cached:?}");
        assert_eq!(
            cached, instance,
            "{q}: the cache path answers differently from the instance"
        );
    }
    api.stop().await;
}

/// A kind whose watch fails (its CRD deleted on the instance) is read from the instance,
/// which says the resource is gone, rather than from a cache that can no longer follow it;
/// once the kind is back and its watch resumes, the cache answers again.
/// A GET's status code and where its answer came from.
async fn answered_by(client: &kube::Client, path: &str) -> Option<(u16, String)> {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .ok()?;
    let resp = client.send(req).await.ok()?;
    let from = resp
        .headers()
        .get(kairship::api::proxy::SOURCE_HEADER)?
        .to_str()
        .ok()?
        .to_string();
    Some((resp.status().as_u16(), from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_watch_fails_is_read_from_the_instance() {
    let api = Api::start(1).await;
    let client = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let path = "/apis/policy.karmada.io/v1alpha1/overridepolicies";
    assert_eq!(source(&client, path, "application/json").await, "cache");
    const CRD: &str = "overridepolicies.policy.karmada.io";
    let crd = api.env.take_crd("karmada-1", CRD).await;
    crate::common::eventually(
        Duration::from_secs(20),
        "a 404 from the instance",
        || async {
            let (code, from) = answered_by(&client, path).await?;
            (code == 404 && from == "instance").then_some(())
        },
    )
    .await;
    api.env.give_back_crd("karmada-1", crd).await;
    crate::common::eventually(
        Duration::from_secs(60),
        "the cache answering again",
        || async {
            let (code, from) = answered_by(&client, path).await?;
            (code == 200 && from == "cache").then_some(())
        },
    )
    .await;
    api.stop().await;
}
