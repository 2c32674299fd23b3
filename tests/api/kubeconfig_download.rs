//! `GetKubeconfig` (REST and gRPC): the kubeconfig Kairship hands out is one kubectl uses
//! as it is. In the host form (the test server serves `*.kairship.localtest`, reached by
//! address) `get --raw` reaches the instance as it does directly; the caller's own token
//! goes in only when asked for (without it kubectl has to ask for credentials), and that
//! hand-out is audited without the token; a caller with no role on an instance gets no
//! kubeconfig for it; REST answers are never cached.

use std::path::{Path, PathBuf};

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::GetKubeconfigRequest;
use serde_json::Value;

use crate::auth::{with, ADMIN, VIEWER};
use crate::proxy::ok;
use crate::server::Api;

const P: &str = "/apis/kairship.io/v1alpha1";

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON ({e}): {text}"))
}

/// A REST GET as `token`: status, `Cache-Control`, body.
async fn rest_get(api: &Api, token: &str, path: &str) -> (u16, String, String) {
    let c = api.https_client(token).await;
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = c.send(req).await.expect("answer");
    let code = resp.status().as_u16();
    let cache = resp
        .headers()
        .get(http::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .expect("body")
        .to_bytes();
    (code, cache, String::from_utf8_lossy(&body).into_owned())
}

fn written(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, yaml).expect("write kubeconfig");
    p
}

/// `GetKubeconfig` over gRPC as `token`, with the caller's token in.
async fn over_grpc(
    api: &Api,
    token: &str,
    name: &str,
    form: &str,
) -> Result<kairship::proto::Kubeconfig, tonic::Status> {
    let req = GetKubeconfigRequest {
        name: name.into(),
        include_token: true,
        form: form.into(),
        server: String::new(),
    };
    InstanceServiceClient::new(api.channel.clone())
        .get_kubeconfig(with(token, req))
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_out_kubeconfig_works_with_kubectl_as_its_caller() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = crate::auth::signer("k1");
    let api = crate::auth::start(dir.path(), &serde_json::json!({"keys": [key.jwk]})).await;
    let direct = api.env.sim.kubeconfig("karmada-1");

    // REST, the default form: the host form, reached by address (path plus the host as
    // tls-server-name), the caller's token in, no shared cache.
    let (code, cache, body) = rest_get(
        &api,
        ADMIN,
        &format!("{P}/instances/karmada-1/kubeconfig?includeToken=true"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(cache, "no-store");
    let answer = json(&body);
    assert_eq!(answer["form"], "host", "{answer}");
    assert_eq!(answer["tlsServerName"], "karmada-1.kairship.localtest");
    assert_eq!(
        answer["server"],
        format!("{}{P}/instances/karmada-1/proxy", api.https)
    );
    assert_eq!(
        (answer["hasToken"].as_bool(), answer["hasCa"].as_bool()),
        (Some(true), Some(true))
    );
    let yaml = answer["kubeconfig"].as_str().expect("kubeconfig");
    assert!(yaml.starts_with("apiVersion: v1\n"), "YAML: {yaml}");
    let by_host = written(dir.path(), "admin.kubeconfig", yaml);

    // kubectl as it is: get --raw answers as the instance does directly, so does the
    // member's cluster proxy, and a write lands on the instance as alice.
    let version = ok(api.kubectl_with(&by_host, &["get", "--raw", "/version"]));
    assert_eq!(
        json(&version),
        json(&ok(api.kubectl_with(&direct, &["get", "--raw", "/version"])))
    );
    let nodes = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/nodes";
    assert_eq!(
        json(&ok(api.kubectl_with(&by_host, &["get", "--raw", nodes])))["items"]
            .as_array()
            .map(Vec::len),
        json(&ok(api.kubectl_with(&direct, &["get", "--raw", nodes])))["items"]
            .as_array()
            .map(Vec::len)
    );
    ok(api.kubectl_with(
        &by_host,
        &["create", "configmap", "from-download", "-n", "default"],
    ));
    assert!(ok(api.kubectl_with(
        &direct,
        &["get", "configmap", "from-download", "-n", "default"]
    ))
    .contains("from-download"));
    assert!(api.audited("alice", "proxy", "create", "configmaps", "", false));

    // The hand-out of a token is audited (as alice, on karmada-1), the token never.
    assert!(
        api.audit_events().iter().any(|e| {
            e["user"]["username"] == "alice"
                && e["objectRef"]["resource"] == "instances"
                && e["objectRef"]["subresource"] == "kubeconfig"
                && e["objectRef"]["name"] == "karmada-1"
                && e["responseStatus"]["code"] == 200
        }),
        "the kubeconfig with a token is audited"
    );
    let audit = std::fs::read_to_string(&api.audit).unwrap_or_default();
    assert!(!audit.contains(ADMIN), "no token in the audit log");

    // The path form, over gRPC from the gRPC port: Kairship's HTTPS address, no server
    // name; kubectl's everyday requests work (get --raw loses the path, as ever).
    let path_form = over_grpc(&api, ADMIN, "karmada-1", "path")
        .await
        .expect("path form");
    assert_eq!(path_form.tls_server_name, "");
    assert_eq!(
        path_form.server,
        format!("{}{P}/instances/karmada-1/proxy", api.https),
        "the gRPC port's kubeconfig names the HTTPS port"
    );
    let by_path = written(dir.path(), "path.kubeconfig", &path_form.kubeconfig);
    assert!(ok(api.kubectl_with(&by_path, &["get", "clusters"])).contains("member1"));

    // A viewer of karmada-1: a kubeconfig that reads there and is refused writes, as its
    // role says; none for karmada-2, and that refusal is audited.
    let mine = over_grpc(&api, VIEWER, "karmada-1", "")
        .await
        .expect("a viewer's kubeconfig");
    let victor = written(dir.path(), "victor.kubeconfig", &mine.kubeconfig);
    assert!(ok(api.kubectl_with(&victor, &["get", "clusters"])).contains("member1"));
    let write = api.kubectl_with(&victor, &["create", "configmap", "nope", "-n", "default"]);
    assert!(!write.status.success());
    let why = String::from_utf8_lossy(&write.stderr);
    assert!(why.contains("needs role \"edit\""), "{why}");
    let refused = over_grpc(&api, VIEWER, "karmada-2", "")
        .await
        .expect_err("no role on karmada-2");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(api.audited("victor", "grpc", "get", "instances", "karmada-2", true));

    // Without the token: no credentials at all, so kubectl asks for them (its prompt,
    // answered by nothing) instead of sending the request.
    let (code, _, body) =
        rest_get(&api, ADMIN, &format!("{P}/instances/karmada-1/kubeconfig")).await;
    assert_eq!(code, 200, "{body}");
    let bare = json(&body);
    assert_eq!(bare["hasToken"].as_bool(), None, "false, left out: {bare}");
    let yaml = bare["kubeconfig"].as_str().expect("kubeconfig");
    assert!(!yaml.contains(ADMIN) && !yaml.contains("token:"), "{yaml}");
    let anonymous = api.kubectl_with(
        &written(dir.path(), "bare.kubeconfig", yaml),
        &["get", "clusters"],
    );
    assert!(!anonymous.status.success());
    let asked = String::from_utf8_lossy(&anonymous.stdout);
    assert!(
        asked.contains("Please enter Username"),
        "kubectl asks for the credentials the kubeconfig lacks: {asked}{}",
        String::from_utf8_lossy(&anonymous.stderr)
    );

    // The server asked for, by name: the instance's own host on its port, no path.
    let (code, _, body) = rest_get(
        &api,
        ADMIN,
        &format!("{P}/instances/karmada-1/kubeconfig?server=https://kairship.example.test:8443"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        json(&body)["server"],
        "https://karmada-1.kairship.localtest:8443"
    );

    // Bad asks are refused naming the field; an instance that does not exist is named.
    for (query, field) in [("form=both", "form"), ("server=http://x", "server")] {
        let (code, _, body) = rest_get(
            &api,
            ADMIN,
            &format!("{P}/instances/karmada-1/kubeconfig?{query}"),
        )
        .await;
        assert_eq!(code, 400, "{query}: {body}");
        assert!(body.contains(field), "{query}: {body}");
    }
    let (code, _, body) = rest_get(&api, ADMIN, &format!("{P}/instances/absent/kubeconfig")).await;
    assert_eq!(code, 404, "{body}");
    api.stop().await;
}
