//! Identity through the proxy: requests reach the instance as the caller (impersonation),
//! so the instance's own RBAC decides; reads served from the cache get the same answer
//! (access reviews); every write leaves an audit event.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::auth::{claims, jwt, signer, start, ADMIN, AUDIENCE, EDITOR, VIEWER};
use crate::common::eventually;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_decides_as_it_would_for_the_caller() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let viewer = api.proxy_kubeconfig_as("karmada-1", VIEWER);
    let editor = api.proxy_kubeconfig_as("karmada-1", EDITOR);
    let admin = api.proxy_kubeconfig_as("karmada-1", ADMIN);

    // A secret holding credentials, as Karmada keeps member-cluster tokens.
    let out = api.kubectl_with(
        &admin,
        &[
            "create",
            "secret",
            "generic",
            "member1",
            "-n",
            "default",
            "--from-literal=token=s3cr3t",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // The viewer (Kairship role view) cannot list, get or watch Secrets: the instance says no.
    for args in [
        &["get", "secrets", "-n", "default"][..],
        &["get", "secret", "member1", "-n", "default", "-o", "json"],
        &["get", "secrets", "-A", "--watch", "--request-timeout=5s"],
    ] {
        let out = api.kubectl_with(&viewer, args);
        let err = stderr(&out);
        assert!(
            !out.status.success(),
            "viewer ran {args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            err.contains("Forbidden") || err.contains("forbidden"),
            "{args:?}: {err}"
        );
        // Kairship's proxy refuses it first (the roles table: Secrets are edit's), in the
        // instance's words otherwise.
        assert!(
            err.contains("User \"victor\"") || err.contains("user \"victor\""),
            "{args:?}: {err}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cr3t"));
    }
    // The raw answer is the instance's 403 Status.
    let c = api.https_client(VIEWER).await;
    let req = http::Request::get(
        "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/secrets",
    )
    .body(Vec::new())
    .expect("request");
    let err = c
        .request::<serde_json::Value>(req)
        .await
        .expect_err("refused");
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
            assert!(s.message.contains("may not read secrets"), "{}", s.message);
        }
        other => panic!("expected a Status, got {other:?}"),
    }
    // A client's own Impersonate-* headers are not passed on.
    let req = http::Request::get(
        "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/secrets",
    )
    .header("Impersonate-User", "admin")
    .header("Impersonate-Group", "system:masters")
    .body(Vec::new())
    .expect("request");
    assert!(c.request::<serde_json::Value>(req).await.is_err());

    // The viewer reads Deployments, from the cache (JSON) and passed through (Table).
    let out = api.kubectl_with(&viewer, &["get", "deployments", "-A", "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = api.kubectl_with(&viewer, &["get", "deployments", "-A"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // The editor writes workloads and reads Secrets (Kubernetes' edit role) but not RBAC.
    let out = api.kubectl_with(&editor, &["get", "secret", "member1", "-n", "default"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = api.kubectl_with(
        &editor,
        &[
            "create",
            "rolebinding",
            "grab",
            "--clusterrole=admin",
            "--user=mallory",
            "-n",
            "default",
        ],
    );
    let err = stderr(&out);
    assert!(
        !out.status.success()
            && err.contains("rolebindings.rbac.authorization.k8s.io is forbidden"),
        "{err}"
    );
    let out = api.kubectl_with(
        &editor,
        &["create", "configmap", "audited", "-n", "default"],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // Every write through the proxy left one audit event: user, surface, verb, object, code.
    assert!(
        api.audited("erin", "proxy", "create", "configmaps", "", false),
        "no audit event for the configmap create in:\n{:#?}",
        api.audit_events()
    );
    assert!(
        api.audited("erin", "proxy", "create", "rolebindings", "", true),
        "no audit event for the refused rolebinding in:\n{:#?}",
        api.audit_events()
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_get_the_instance_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    // karmada-2's RBAC no longer grants Kairship's view role anything.
    let instance = api.env.sim.client("karmada-2").await;
    let crb = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        "clusterrolebindings",
    );
    Api::<DynamicObject>::all_with(instance.clone(), &crb)
        .delete("kairship:view", &DeleteParams::default())
        .await
        .expect("delete the binding");
    // The `sre` group holds view on karmada-2 in Kairship; deployments are cached there.
    let token = jwt(&key, "k1", claims("sam", AUDIENCE, 300));
    let sre = api.proxy_kubeconfig_as("karmada-2", &token);
    let out = api.kubectl_with(&sre, &["get", "deployments", "-A", "-o", "json"]);
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("forbidden"), "{err}");
    // Restored: within the short life of a denial, the cache serves again.
    kairship::bootstrap::apply_instance_rbac(&instance)
        .await
        .expect("restore");
    eventually(
        Duration::from_secs(20),
        "cached read allowed again",
        || async {
            api.kubectl_with(&sre, &["get", "deployments", "-A", "-o", "json"])
                .status
                .success()
                .then_some(())
        },
    )
    .await;
    api.stop().await;
}
