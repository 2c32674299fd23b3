//! Least privilege inside an instance, and the doors of the newer surfaces (issue 54's
//! review, each finding tried as an attacker would against `kairship demo`): a viewer
//! reading propagated Secrets out of Works, an editor reading member credentials in
//! Karmada's system namespaces and exfiltrating them with a cluster-scoped policy (also
//! straight at the instance, where its own guardrail policy refuses it), paths that
//! decode into something else than what was authorized, join dialling internal
//! addresses, a re-spelt webhook signature, and refused requests growing the audit log.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::JoinClusterRequest;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::{with, Demo};

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, String) {
    match body {
        Some(b) => kairship_test_support::http::json(client, method, path, b).await,
        None => kairship_test_support::http::send(client, method, path, None).await,
    }
}

/// The simulated instance's own kubeconfig (its administrator), beside the host's.
fn direct_kubeconfig(demo: &Demo, instance: &str) -> PathBuf {
    Path::new(
        demo.endpoints["host_kubeconfig"]
            .as_str()
            .expect("host kubeconfig"),
    )
    .with_file_name(format!("{instance}.kubeconfig"))
}

/// Finding: `view` read every Work, and a Work carries the manifest it propagates, a
/// Secret's data included (a viewer's Work list returned the Secret's value with 200 while
/// its Secret GET got 403). Now Works are admin's.
pub async fn a_viewer_reads_no_works(demo: &Demo) {
    let vera = demo.proxy("karmada-1", &demo.token("vera", &[])).await;
    for path in [
        "/apis/work.karmada.io/v1alpha1/works",
        "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-member1/works",
    ] {
        let (code, body) = send(&vera, "GET", path, None).await;
        assert_eq!(code, 403, "vera lists {path}: {body}");
    }
    println!("attack: a viewer lists Works (Secrets' data) -> 403");
}

/// Finding: `edit` was Kubernetes' `edit` everywhere: Secrets in `karmada-cluster` (each
/// member's token and impersonator), `kube-system` (bootstrap tokens) and
/// `karmada-system`, and ClusterPropagationPolicies that select them for a member the
/// editor reads (201). Now editors write only in workload namespaces and never
/// cluster-scoped policies; and a tenant the instance's own RBAC lets write policies,
/// reaching the instance directly, meets its guardrail policy.
pub async fn an_editor_gets_no_member_credentials(demo: &Demo) {
    demo.bind_group(
        "editors-edit",
        kairship::crd::Role::Edit,
        &["karmada-1"],
        "editors",
    )
    .await;
    let eddie = demo
        .proxy("karmada-1", &demo.token("eddie", &["editors"]))
        .await;
    // The binding arrives by watch: wait until eddie may write where workloads live.
    crate::eventually_ok(Duration::from_secs(20), "eddie's edit role", || async {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "eddies"}});
        let (code, body) = send(
            &eddie,
            "POST",
            "/api/v1/namespaces/default/configmaps?dryRun=All",
            Some(&cm),
        )
        .await;
        (code == 201).then_some(()).ok_or(format!("{code} {body}"))
    })
    .await;
    for ns in ["karmada-cluster", "kube-system", "karmada-system"] {
        let (code, body) = send(
            &eddie,
            "GET",
            &format!("/api/v1/namespaces/{ns}/secrets"),
            None,
        )
        .await;
        assert_eq!(code, 403, "eddie lists Secrets in {ns}: {body}");
    }
    let (code, body) = send(&eddie, "GET", "/api/v1/secrets", None).await;
    assert_eq!(code, 403, "eddie lists every Secret: {body}");
    let steal = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "steal"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret", "namespace": "karmada-cluster"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}});
    let (code, body) = send(
        &eddie,
        "POST",
        "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies",
        Some(&steal),
    )
    .await;
    assert_eq!(code, 403, "eddie's ClusterPropagationPolicy: {body}");
    let pp = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "steal", "namespace": "karmada-cluster"},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret"}], "placement": {}}});
    let (code, body) = send(
        &eddie,
        "POST",
        "/apis/policy.karmada.io/v1alpha1/namespaces/karmada-cluster/propagationpolicies",
        Some(&pp),
    )
    .await;
    assert_eq!(
        code, 403,
        "eddie's PropagationPolicy in karmada-cluster: {body}"
    );
    // Straight at the instance, as a tenant its own RBAC lets write every policy.
    let kubeconfig = direct_kubeconfig(demo, "karmada-1");
    let admin = kairship_test_support::fleet::client_from(&kubeconfig).await;
    kairship_test_support::scenarios::guardrails::hold(
        &kairship_test_support::scenarios::guardrails::Instance {
            kubeconfig: &kubeconfig,
            admin,
        },
        "default",
    )
    .await;
    println!("attack: an editor's member credentials (Secrets in system namespaces, CPPs, PPs there) -> 403; direct, the guardrail policy refuses");
}

/// Finding: authorization parsed the raw path and the handler the decoded one:
/// `pods/x%2Fexec` was authorized and audited as a `get` and ran as an exec;
/// `configmaps%3Fwatch=1` reached the instance as a watch that took no stream slot. Now
/// the edge decodes once and refuses paths that decode into another request.
pub async fn encoded_paths_are_refused(demo: &Demo) {
    let admin = demo.proxy("karmada-1", &demo.admin_token()).await;
    for path in [
        "/api/v1/namespaces/default/pods/x%2Fexec?command=id",
        "/api/v1/namespaces/default/configmaps%3Fwatch=1",
        "/api/v1/namespaces/%2e%2e/secrets",
        "/api/v1//namespaces/default/configmaps",
    ] {
        let started = Instant::now();
        let (code, body) = send(&admin, "GET", path, None).await;
        assert_eq!(code, 400, "{path}: {body}");
        assert!(body.contains("path"), "{path}: {body}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path} was held"
        );
    }
    println!("attack: %2F, %3F, .., // in a proxied path -> 400 at the edge");
}

/// Finding: join and remove dialled any `https://host:port` of the caller's kubeconfig,
/// loopback and link-local included, and answered with what failed there and, for
/// 4xx/5xx, the remote body. Now such addresses are refused before any connection (this
/// demo runs with --no-member-loopback, as `kairship run` refuses loopback always).
pub async fn join_dials_no_internal_address(demo: &Demo) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dialled = tokio::spawn(async move { listener.accept().await.is_ok() });
    let mallory = demo.token("mallory", &[]);
    let mut c = ClusterServiceClient::new(demo.grpc().await);
    for server in [
        format!("https://127.0.0.1:{port}"),
        "https://169.254.169.254:443".to_string(),
        "https://[::1]:6443".to_string(),
        "https://0.0.0.0:6443".to_string(),
    ] {
        let kc = kairship_wire::kubeconfig::build("m", &server, &demo.ca_pem(), "t");
        let e = c
            .join_cluster(with(
                &mallory,
                JoinClusterRequest {
                    instance: "karmada-2".into(),
                    name: "inside".into(),
                    kubeconfig: serde_json::to_string(&kc).expect("kubeconfig"),
                    ..Default::default()
                },
            ))
            .await
            .expect_err(&server);
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{server}: {e:?}");
        assert!(e.message().contains("refused"), "{server}: {}", e.message());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !dialled.is_finished(),
        "Kairship connected to the loopback listener"
    );
    dialled.abort();
    println!("attack: join to loopback, link-local, unspecified -> refused, never dialled");
}

/// Finding: the webhook's replay marker was built from the signature's text, and
/// `u8::from_str_radix` took `+a` for `0a`: a signed event re-spelt was accepted again.
pub async fn a_respelt_webhook_signature_is_a_replay(demo: &Demo) {
    let secret = std::fs::read(
        demo.endpoints["webhook_secret_file"]
            .as_str()
            .expect("secret file"),
    )
    .expect("webhook secret");
    let client = demo.client("", "").await;
    let event = json!({"id": "respelt", "type": "bind", "instance": "karmada-1", "role": "view",
        "subject": {"kind": "User", "name": "respelt-user"}})
    .to_string();
    let ts = jiff::Timestamp::now().as_second();
    let sig = kairship::auth::webhook::sign(&secret, ts, event.as_bytes());
    let post = |sig: String| {
        http::Request::post("/apis/kairship.io/v1alpha1/webhooks/global-management")
            .header("x-kairship-timestamp", ts.to_string())
            .header("x-kairship-signature", sig)
            .body(kube::client::Body::from(event.clone().into_bytes()))
            .expect("request")
    };
    let status = |r: Result<http::Response<kube::client::Body>, kube::Error>| {
        r.map(|r| r.status().as_u16()).unwrap_or(0)
    };
    assert_eq!(
        status(client.send(post(sig.clone())).await),
        200,
        "the event itself"
    );
    let hex = sig.trim_start_matches("sha256=");
    assert_eq!(
        status(client.send(post(sig.clone())).await),
        409,
        "its replay"
    );
    let upper = format!("sha256={}", hex.to_ascii_uppercase());
    assert_eq!(
        status(client.send(post(upper)).await),
        409,
        "re-spelt in upper case"
    );
    let signed = format!("sha256=+{}", &hex[1..]);
    let code = status(client.send(post(signed)).await);
    assert!(code == 401 || code == 409, "re-spelt with a sign: {code}");
    println!("attack: a re-spelt webhook signature -> 409 (replay) or 401, never 200");
}

/// Finding: each refused request with a 64 KiB User-Agent added 68 KB to audit.log,
/// written on the request path, without bound. Now refusals of unauthenticated requests
/// are audited at a bounded rate, off the request path, User-Agents cut at 1 KiB.
pub async fn refused_strangers_cannot_grow_the_audit_log(demo: &Demo) {
    let path = demo.endpoints["audit_log"]
        .as_str()
        .expect("audit_log")
        .to_string();
    let before = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let agent = "A".repeat(64 << 10);
    let mut refused = 0;
    for _ in 0..3 {
        let mut s = crate::denial::tls(demo).await;
        let mut req = String::new();
        for _ in 0..100 {
            req.push_str(&format!(
                "GET /apis/kairship.io/v1alpha1/instances HTTP/1.1\r\nHost: kairship\r\nUser-Agent: {agent}\r\nAuthorization: Bearer nope\r\n\r\n"
            ));
        }
        s.write_all(req.as_bytes()).await.expect("requests");
        let got = crate::denial::read_for(&mut s, Duration::from_secs(3)).await;
        refused += got.matches("401").count().min(1);
    }
    assert!(refused > 0, "the stranger's requests were answered");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let grown = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) - before;
    // 300 refusals: at most the burst of events, each with its agent cut at 1 KiB.
    let bound = (kairship::api::chain::audit::UNAUTHENTICATED_BURST as u64 + 40) * 2600;
    assert!(
        grown < bound,
        "the audit log grew {grown} B for 300 refusals (bound {bound})"
    );
    let text = std::fs::read_to_string(&path).expect("audit log");
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("system:anonymous"))
        .expect("a refusal's event");
    assert!(
        last.contains("...(truncated)"),
        "{}",
        &last[..200.min(last.len())]
    );
    println!(
        "attack: 300 refused requests with 64 KiB User-Agents -> the audit log grew {grown} B"
    );
}

/// Finding: one viewer could hold more long-running requests than an instance has
/// pass-through streams, so the admin's exec, `logs -f` and pass-through watches got 429.
/// Now each role leaves the streams above it: viewers (as many as they are) stop at their
/// share, and the admin still opens one.
pub async fn viewers_leave_the_admin_a_stream(demo: &Demo) {
    demo.bind_group(
        "watchers-view",
        kairship::crd::Role::View,
        &["karmada-1"],
        "watchers",
    )
    .await;
    let path = "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/configmaps?watch=1";
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut opened = 0usize;
    let mut refused = 0usize;
    let mut holders = Vec::new();
    // Nine viewers of eight watches each: more than their share of 100 streams.
    'viewers: for v in 0..9 {
        let token = demo.token(&format!("watcher-{v}"), &["watchers"]);
        for _ in 0..8 {
            let mut s = crate::denial::tls(demo).await;
            let req = format!(
                "GET {path} HTTP/1.1\r\nHost: kairship\r\nAuthorization: Bearer {token}\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.expect("request");
            let head = crate::denial::read_for(&mut s, Duration::from_secs(1)).await;
            if head.starts_with("HTTP/1.1 429") {
                refused += 1;
                if head.contains("kept for editors and administrators") && refused > 4 {
                    break 'viewers;
                }
                continue;
            }
            opened += 1;
            let mut stopped = stopped.clone();
            holders.push(tokio::spawn(async move {
                let _ = stopped.wait_for(|s| *s).await;
                drop(s);
            }));
        }
    }
    assert!(refused > 0, "viewers opened {opened} watches, none refused");
    let mut s = crate::denial::tls(demo).await;
    let admin = demo.admin_token();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: kairship\r\nAuthorization: Bearer {admin}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("request");
    let head = crate::denial::read_for(&mut s, Duration::from_secs(2)).await;
    assert!(
        !head.starts_with("HTTP/1.1 429"),
        "the admin's watch: {head:?}"
    );
    let _ = stop.send(true);
    for h in holders {
        let _ = h.await;
    }
    println!("attack: viewers open {opened} pass-through watches, {refused} refused at their share; the admin's still opens");
}

/// Finding: component and certificate calls acted on a same-named `Karmada` object
/// without Kairship's label. Now they refuse it, naming why.
pub async fn components_of_someone_elses_karmada(demo: &Demo, name: &str) {
    use kairship::proto::instance_service_client::InstanceServiceClient;
    use kairship::proto::{ListComponentsRequest, RenewCertificatesRequest};
    let mallory = demo.token("mallory", &[]);
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    let listed = c
        .list_components(with(&mallory, ListComponentsRequest { name: name.into() }))
        .await
        .expect_err("someone else's components");
    assert!(listed.message().contains("is not Kairship's"), "{listed:?}");
    let renewed = c
        .renew_certificates(with(
            &mallory,
            RenewCertificatesRequest { name: name.into() },
        ))
        .await
        .expect_err("someone else's certificates");
    assert!(
        renewed.message().contains("is not Kairship's"),
        "{renewed:?}"
    );
    println!("attack: components and certificates of an unlabelled Karmada -> refused");
}
