//! Each instance at a host of its own (`<instance>.kairship.localtest`, reached by
//! address with the name as `tls-server-name`): kubectl's `get --raw`, which drops a
//! kubeconfig server's path, reaches the instance and answers as the instance does
//! directly; the path form and the demo's kubeconfig (both at once) still work; the Python
//! client reads the same; a request on a connection opened for another host is refused
//! with 421.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::auth::{ADMIN, VIEWER};
use crate::proxy::ok;
use crate::server::Api;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON ({e}): {text}"))
}

/// The status line and body of one HTTP/1.1 GET over TLS opened for `sni`, sent to `host`.
async fn raw_get(api: &Api, sni: &str, host: &str, path: &str) -> (u16, String) {
    raw_get_as(api, "proxy-test-token", sni, host, path).await
}

/// As [`raw_get`], sending `token`.
async fn raw_get_as(api: &Api, token: &str, sni: &str, host: &str, path: &str) -> (u16, String) {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(api.ca_pem.as_bytes()) {
        roots.add(c.expect("CA pem")).expect("CA added");
    }
    let config = rustls::ClientConfig::builder_with_provider(kairship_wire::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let addr = api.https.trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("the wildcard certificate covers the instance's host");
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut out))
        .await
        .expect("answered in time")
        .ok();
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (code, body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_raw_reaches_the_instance_by_its_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = crate::auth::signer("k1");
    let api = crate::auth::start(dir.path(), &serde_json::json!({"keys": [key.jwk]})).await;
    let by_host = api.host_kubeconfig_as("karmada-1", ADMIN);
    let by_path = api.proxy_kubeconfig_as("karmada-1", ADMIN);
    let direct = api.env.sim.kubeconfig("karmada-1");

    // kubectl get --raw through the host form answers as the instance does directly.
    let version = json(&ok(
        api.kubectl_with(&by_host, &["get", "--raw", "/version"])
    ));
    assert_eq!(
        version,
        json(&ok(api.kubectl_with(&direct, &["get", "--raw", "/version"])))
    );
    let nodes = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/nodes";
    let names = |v: Value| -> Vec<Value> {
        v["items"]
            .as_array()
            .map(|a| a.iter().map(|i| i["metadata"]["name"].clone()).collect())
            .unwrap_or_default()
    };
    let through = names(json(&ok(
        api.kubectl_with(&by_host, &["get", "--raw", nodes])
    )));
    assert!(
        !through.is_empty(),
        "member1's nodes through its cluster proxy"
    );
    assert_eq!(
        through,
        names(json(&ok(
            api.kubectl_with(&direct, &["get", "--raw", nodes])
        )))
    );
    // The path form alone loses its prefix on get --raw: it reaches Kairship's root.
    let lost = api.kubectl_with(&by_path, &["get", "--raw", "/version"]);
    assert!(
        !lost.status.success() || json(&String::from_utf8_lossy(&lost.stdout)) != version,
        "the path form's get --raw does not reach the instance"
    );

    // Each instance's own authorization: a viewer of karmada-1 alone reads there, and is
    // refused at karmada-2's host.
    let victor = api.host_kubeconfig_as("karmada-1", VIEWER);
    assert!(ok(api.kubectl_with(&victor, &["get", "clusters"])).contains("member1"));
    let elsewhere = api.kubectl_with(
        &api.host_kubeconfig_as("karmada-2", VIEWER),
        &["get", "clusters"],
    );
    assert!(!elsewhere.status.success());
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("Forbidden"));
    assert!(api.audited("victor", "proxy", "list", "clusters", "", true));

    // Everyday kubectl through the host form, and the request is the proxy's, audited.
    let clusters = json(&ok(
        api.kubectl_with(&by_host, &["get", "clusters", "-o", "json"])
    ));
    assert_eq!(clusters["items"].as_array().map(Vec::len), Some(2));
    // A write through the host form is the proxy's, as the caller, audited on karmada-1.
    ok(api.kubectl_with(
        &by_host,
        &["create", "configmap", "by-host", "-n", "default"],
    ));
    assert!(api.audited("alice", "proxy", "create", "configmaps", "", false));
    assert!(
        api.audit_events().iter().any(|e| {
            e["annotations"]["kairship.io/instance"] == "karmada-1"
                && e["objectRef"]["resource"] == "configmaps"
                && e["verb"] == "create"
        }),
        "the write is audited on karmada-1"
    );
    let direct_cm =
        ok(api.kubectl_with(&direct, &["get", "configmap", "by-host", "-n", "default"]));
    assert!(
        direct_cm.contains("by-host"),
        "the write reached the instance"
    );

    // The demo's kubeconfig carries both: its path, and the host as TLS server name.
    let mut both = json(&std::fs::read_to_string(&by_path).expect("kubeconfig"));
    both["clusters"][0]["cluster"]["tls-server-name"] = "karmada-1.kairship.localtest".into();
    let both_path = by_path.with_extension("both.kubeconfig");
    std::fs::write(&both_path, both.to_string()).expect("write");
    assert_eq!(
        json(&ok(
            api.kubectl_with(&both_path, &["get", "--raw", "/version"])
        )),
        version
    );
    assert!(ok(api.kubectl_with(&both_path, &["get", "clusters"])).contains("member1"));

    // The Python client honours tls-server-name: its checks pass through the host form.
    crate::common::run_python("sim_client.py", vec![by_host.display().to_string()]).await;
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_another_host_than_its_connection_is_refused() {
    let api = Api::start(2).await;
    let one = "karmada-1.kairship.localtest";
    let two = "karmada-2.kairship.localtest";
    // The same connection's name and host: the instance answers.
    let (code, body) = raw_get(&api, one, one, "/apis/cluster.karmada.io/v1alpha1/clusters").await;
    assert_eq!(code, 200, "{body}");
    // An address as Host (client-go's tls-server-name) names nothing: the SNI decides.
    let (code, _) = raw_get(&api, one, "127.0.0.1", "/version").await;
    assert_eq!(code, 200);

    // SNI for karmada-1, Host karmada-2: refused, as a Kubernetes Status naming both.
    let (code, body) = raw_get(&api, one, two, "/api/v1/namespaces").await;
    assert_eq!(code, 421, "{body}");
    let status = json(&body);
    assert_eq!(status["kind"], "Status", "{body}");
    assert!(
        status["message"].as_str().is_some_and(|m| m.contains(two)),
        "{body}"
    );
    // Kairship's own name on a connection opened for an instance, and the reverse.
    let (code, _) = raw_get(&api, one, "localhost.localdomain", "/version").await;
    assert_eq!(code, 421);
    let (code, _) = raw_get(&api, "localhost", one, "/version").await;
    assert_eq!(code, 421);
    // The path form naming another instance than the connection's host.
    let other = "/apis/kairship.io/v1alpha1/instances/karmada-2/proxy/version";
    let (code, body) = raw_get(&api, one, one, other).await;
    assert_eq!(code, 421, "{body}");
    // ... and naming the same one is the demo's kubeconfig: answered.
    let same = "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/version";
    assert_eq!(raw_get(&api, one, one, same).await.0, 200);
    // Kairship's own REST API answers on an instance's host too (a REST client reusing an
    // instance's kubeconfig), for any instance.
    let (code, body) = raw_get(
        &api,
        one,
        one,
        "/apis/kairship.io/v1alpha1/instances/karmada-2",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["metadata"]["name"], "karmada-2");
    // Under the domain but not an instance's host.
    let deep = "a.b.kairship.localtest";
    assert_eq!(raw_get(&api, "localhost", deep, "/version").await.0, 404);
    // An instance that does not exist: the proxy's own 404.
    let nobody = "nobody.kairship.localtest";
    assert_eq!(raw_get(&api, nobody, nobody, "/version").await.0, 404);
    api.stop().await;
}
