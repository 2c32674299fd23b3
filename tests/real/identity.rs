//! The caller's identity on real Karmada: tokens from a real OIDC provider (Dex) on every
//! surface, and an editor whom the instance's operator narrowed to one namespace meeting
//! that decision through gRPC, REST and the proxy alike.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use kairship_realfleet::dex::{Client, Dex, DexConfig, User};
use kairship_test_support::{poll, POLL};
use serde_json::{json, Value};
use tonic::Code;

use crate::Demo;

pub const CLIENT: &str = "kairship";
/// Another application of the same provider: its tokens are not for Kairship.
const OTHER_CLIENT: &str = "other-app";
/// Short, so the tier can check an expired token without a dedicated wait.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// Kairship's tolerance of clock skew on `exp`.
const LEEWAY: Duration = Duration::from_secs(30);

pub fn dana() -> User {
    User {
        email: "dana@example.com".into(),
        username: "dana".into(),
        password: kairship_realfleet::pki::token(),
        groups: vec!["kairship-admins".into()],
    }
}

pub fn alice() -> User {
    User {
        email: "alice@example.com".into(),
        username: "alice".into(),
        password: kairship_realfleet::pki::token(),
        groups: vec!["payments-sre".into()],
    }
}

pub async fn start_dex(dir: &Path, users: Vec<User>) -> Dex {
    let public = |id: &str| Client {
        id: id.into(),
        secret: None,
        redirect_uris: vec!["https://127.0.0.1/ui/".into()],
    };
    Dex::start(DexConfig {
        bin: kairship_realfleet::default_bin_dir(),
        dir: dir.to_path_buf(),
        users,
        clients: vec![public(CLIENT), public(OTHER_CLIENT)],
        id_token_expiry: TOKEN_LIFETIME,
        allowed_origins: Vec::new(),
    })
    .await
    .expect("dex starts")
}

/// The flags `kairship demo` takes to trust `dex`, with kube-apiserver-style prefixes.
pub fn demo_flags(dex: &Dex) -> Vec<String> {
    [
        "--oidc-issuer-url",
        &dex.issuer,
        "--oidc-client-id",
        CLIENT,
        "--oidc-jwks-url",
        &dex.jwks_url(),
        "--oidc-ca-file",
        &dex.ca_file.display().to_string(),
        "--oidc-username-claim",
        "email",
        "--oidc-username-prefix",
        "oidc:",
        "--oidc-groups-prefix",
        "oidc:",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    r
}

/// A kubeconfig through Kairship's proxy for `instance` carrying `token`.
pub(crate) fn proxy_kubeconfig(demo: &Demo, instance: &str, token: &str, tag: &str) -> PathBuf {
    let ca = std::fs::read_to_string(demo.endpoints["ca"].as_str().expect("ca")).expect("ca");
    let server = format!(
        "{}/apis/kairship.io/v1alpha1/instances/{instance}/proxy",
        demo.endpoints["http"].as_str().expect("http")
    );
    let path = demo.dir.path().join(format!("{tag}-{instance}.kubeconfig"));
    kairship_wire::kubeconfig::write(
        &path,
        &kairship_wire::kubeconfig::build(instance, &server, &ca, token),
    )
    .expect("write kubeconfig");
    path
}

pub(crate) async fn rest(demo: &Demo, token: &str) -> kube::Client {
    let ca = std::fs::read_to_string(demo.endpoints["ca"].as_str().expect("ca")).expect("ca");
    let kc = kairship_wire::kubeconfig::build(
        "rest",
        demo.endpoints["http"].as_str().expect("http"),
        &ca,
        token,
    );
    let kc: kube::config::Kubeconfig = serde_json::from_value(kc).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// Binds `group` (as Kairship sees it, prefixed) to `role` on `instances`.
pub fn bind(demo: &Demo, name: &str, role: &str, instances: &[&str], group: &str) {
    let host = demo.dir.path().join("real/host/admin.kubeconfig");
    let file = demo.dir.path().join(format!("{name}.json"));
    let b = json!({"apiVersion": "kairship.io/v1alpha1", "kind": "InstanceRoleBinding",
        "metadata": {"name": name},
        "spec": {"role": role, "instances": instances, "subjects": [{"kind": "Group", "name": group}]}});
    std::fs::write(&file, b.to_string()).expect("write binding");
    demo.ok(&host, &["apply", "-f", &file.display().to_string()]);
}

/// Refused the same way on every surface, whatever was wrong with the token.
async fn refused_everywhere(demo: &Demo, token: &str, why: &str) {
    let mut grpc = InstanceServiceClient::new(demo.channel().await);
    let s = grpc
        .list_instances(with(token, ListInstancesRequest::default()))
        .await
        .expect_err(why);
    assert_eq!(s.code(), Code::Unauthenticated, "{why}: {s:?}");
    assert_eq!(s.message(), "a valid bearer token is required", "{why}");
    let req = http::Request::get("/apis/kairship.io/v1alpha1/instances")
        .body(Vec::new())
        .expect("request");
    match rest(demo, token).await.request_text(req).await {
        Err(kube::Error::Api(s)) => {
            // google.rpc.Status: UNAUTHENTICATED (16), with HTTP 401.
            assert_eq!(s.code, 16, "{why}: {s:?}");
            assert_eq!(s.message, "a valid bearer token is required", "{why}");
        }
        other => panic!("{why}: REST answered {other:?}"),
    }
    let kc = proxy_kubeconfig(demo, "karmada-1", token, "refused");
    let out = demo.kubectl(&kc, &["get", "clusters"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("a valid bearer token is required"),
        "{why}: {err}"
    );
}

/// A password-grant token of a Dex user in `kairship-admins` works on gRPC, REST and the
/// proxy, where the instance sees the OIDC user with Kairship's prefixes; tokens of another
/// issuer, for another audience, or expired are refused with 401 and the same message.
/// `stale` is a token obtained at least `TOKEN_LIFETIME + LEEWAY` ago, or is waited on.
pub async fn dex_tokens_on_every_surface(demo: &Demo, dex: &Dex, stale: (String, Instant)) {
    let dana = &dex.users[0];
    let token = dex.password_token(CLIENT, dana).await.expect("a Dex token");
    let mut grpc = InstanceServiceClient::new(demo.channel().await);
    let listed = grpc
        .list_instances(with(&token, ListInstancesRequest::default()))
        .await
        .expect("gRPC with a Dex token")
        .into_inner();
    assert_eq!(listed.instances.len(), 2);
    let req = http::Request::get("/apis/kairship.io/v1alpha1/instances")
        .body(Vec::new())
        .expect("request");
    let body = rest(demo, &token)
        .await
        .request_text(req)
        .await
        .expect("REST with a Dex token");
    assert!(body.contains("karmada-1"), "{body}");
    // The proxy acts as the OIDC user on the real karmada-apiserver: it says who it saw.
    let kc = proxy_kubeconfig(demo, "karmada-1", &token, "dana");
    let who: Value = serde_json::from_str(&demo.ok(&kc, &["auth", "whoami", "-o", "json"]))
        .expect("whoami JSON");
    let info = &who["status"]["userInfo"];
    assert_eq!(info["username"], "oidc:dana@example.com", "{who}");
    let groups: Vec<&str> = info["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for g in ["oidc:kairship-admins", "kairship:admin"] {
        assert!(groups.contains(&g), "{g} missing from {groups:?}");
    }
    demo.ok(&kc, &["get", "deployments", "-A"]);

    // Refused, all alike: another issuer, another audience, expired.
    let elsewhere = start_dex(&demo.dir.path().join("dex-elsewhere"), vec![dana.clone()]).await;
    let foreign = elsewhere
        .password_token(CLIENT, dana)
        .await
        .expect("a foreign token");
    refused_everywhere(demo, &foreign, "a token from another issuer").await;
    let other = dex
        .password_token(OTHER_CLIENT, dana)
        .await
        .expect("a token for another app");
    refused_everywhere(demo, &other, "a token for another audience").await;
    let (stale, issued) = stale;
    let expired_at = issued + TOKEN_LIFETIME + LEEWAY + Duration::from_secs(2);
    if let Some(wait) = expired_at.checked_duration_since(Instant::now()) {
        tokio::time::sleep(wait).await;
    }
    refused_everywhere(demo, &stale, "an expired token").await;
    println!("Dex tokens: accepted on gRPC, REST and the proxy (as oidc:dana@example.com); another issuer, another audience and expired refused alike");
}

fn deployment(ns: &str, name: &str) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    .to_string()
}

/// alice (`payments-sre`, Kairship role edit on karmada-2) where the instance's operator
/// narrowed `kairship:edit` to `payments`: the instance decides on every surface.
pub async fn narrowed_editor(demo: &Demo, dex: &Dex) {
    let direct = demo.direct("karmada-2");
    demo.ok(&direct, &["create", "namespace", "payments"]);
    // The operator narrows Kairship's editors on this instance: not in `default`
    // (Kairship's namespace-roles controller then binds them in payments only), and no
    // reads elsewhere.
    demo.ok(&direct, &["delete", "clusterrolebinding", "kairship:edit"]);
    demo.ok(
        &direct,
        &["label", "namespace", "default", "kairship.io/edit=false"],
    );
    bind(
        demo,
        "payments-sre-edit",
        "edit",
        &["karmada-2"],
        "oidc:payments-sre",
    );
    let alice = &dex.users[1];
    let token = dex
        .password_token(CLIENT, alice)
        .await
        .expect("alice's token");
    let mut grpc = WorkloadServiceClient::new(demo.channel().await);
    // The binding arrives through a watch: wait until alice may write.
    let create = |ns: &str, name: &str| {
        with(
            &token,
            CreateWorkloadRequest {
                instance: "karmada-2".into(),
                object_json: deployment(ns, name),
            },
        )
    };
    let created = poll(Duration::from_secs(20), POLL, || {
        let mut grpc = grpc.clone();
        let request = create("payments", "ledger");
        async move {
            match grpc.create_workload(request).await {
                Ok(_) => Ok(()),
                Err(s) if s.code() == Code::PermissionDenied => Err(s),
                Err(s) => panic!("alice creates in payments over gRPC: {s:?}"),
            }
        }
    })
    .await;
    if let Err(s) = created {
        panic!("alice creates in payments over gRPC: {s:?}");
    }
    // Kairship took the editors' binding in default away too.
    let unbound = poll(
        Duration::from_secs(20),
        kairship_test_support::PROCESS_POLL,
        || {
            let out = demo.kubectl(
                &direct,
                &["get", "rolebinding", "kairship:edit", "-n", "default"],
            );
            async move { (!out.status.success()).then_some(()).ok_or(out) }
        },
    )
    .await;
    assert!(
        unbound.is_ok(),
        "the editors' binding in default stays: {unbound:?}"
    );
    // Read-your-writes: kubectl through the proxy finds it at once.
    let kc = proxy_kubeconfig(demo, "karmada-2", &token, "alice");
    demo.ok(&kc, &["get", "deployment", "ledger", "-n", "payments"]);
    let refused = grpc
        .create_workload(create("default", "sneaky"))
        .await
        .expect_err("default refused");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("User \"oidc:alice@example.com\" cannot create resource \"deployments\""),
        "{}",
        refused.message()
    );
    // REST.
    let client = rest(demo, &token).await;
    let post = |ns: &str, name: &str| {
        http::Request::post("/apis/kairship.io/v1alpha1/instances/karmada-2/workloads")
            .header("content-type", "application/json")
            .body(
                json!({"instance": "karmada-2", "objectJson": deployment(ns, name)})
                    .to_string()
                    .into_bytes(),
            )
            .expect("request")
    };
    client
        .request_text(post("payments", "ledger-rest"))
        .await
        .expect("REST create in payments");
    match client.request_text(post("default", "sneaky-rest")).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.code == 7 && s.message.contains("forbidden"), "{s:?}")
        }
        other => panic!("REST create in default: {other:?}"),
    }
    // The proxy.
    demo.ok(
        &kc,
        &[
            "create",
            "deployment",
            "ledger-proxy",
            "--image=nginx",
            "-n",
            "payments",
        ],
    );
    let out = demo.kubectl(
        &kc,
        &[
            "create",
            "deployment",
            "sneaky-proxy",
            "--image=nginx",
            "-n",
            "default",
        ],
    );
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("forbidden"));
    // Lists: payments only (nginx in default stays hidden), and said to be filtered.
    let listed = grpc
        .list_workloads(with(
            &token,
            ListWorkloadsRequest {
                instance: "karmada-2".into(),
                ..Default::default()
            },
        ))
        .await
        .expect("list")
        .into_inner();
    let spaces: std::collections::BTreeSet<String> = listed
        .workloads
        .iter()
        .filter_map(|w| w.metadata.as_ref().map(|m| m.namespace.clone()))
        .collect();
    assert_eq!(
        spaces.into_iter().collect::<Vec<_>>(),
        vec!["payments".to_string()]
    );
    assert!(listed.filtered);
    // Deletes.
    grpc.delete_workload(with(
        &token,
        DeleteWorkloadRequest {
            instance: "karmada-2".into(),
            kind: "Deployment".into(),
            namespace: "payments".into(),
            name: "ledger".into(),
        },
    ))
    .await
    .expect("delete over gRPC");
    let del = http::Request::delete("/apis/kairship.io/v1alpha1/instances/karmada-2/namespaces/payments/workloads/Deployment/ledger-rest")
        .body(Vec::new())
        .expect("request");
    client.request_text(del).await.expect("delete over REST");
    // One audit event per write and refusal, naming alice and the surface.
    let path = demo.endpoints["audit_log"].as_str().expect("audit_log");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for (surface, refused) in [
        ("grpc", false),
        ("grpc", true),
        ("rest", false),
        ("rest", true),
        ("proxy", false),
        ("proxy", true),
    ] {
        let found = events.iter().any(|e| {
            e["user"]["username"] == "oidc:alice@example.com"
                && e["annotations"]["kairship.io/surface"] == surface
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| (c >= 400) == refused)
        });
        assert!(
            found,
            "no audit event for alice on {surface} (refused: {refused}) in {path}"
        );
    }
    // Back as it was, for the rest of the tier.
    demo.ok(
        &direct,
        &["delete", "rolebinding", "kairship:edit", "-n", "payments"],
    );
    demo.ok(
        &direct,
        &[
            "create",
            "clusterrolebinding",
            "kairship:edit",
            "--clusterrole=edit",
            "--group=kairship:edit",
        ],
    );
    println!("narrowed editor: gRPC, REST and the proxy write in payments, are refused in default in the instance's words, list payments only (filtered), audited per surface");
}
