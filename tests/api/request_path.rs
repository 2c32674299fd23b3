//! One request path for every surface: an instance operator narrows `kairship:edit` to one
//! namespace (a RoleBinding instead of the ClusterRoleBinding), and an editor meets that
//! decision through gRPC, REST and the proxy alike: writes in `payments` go through,
//! writes in `default` are refused in the instance's own words, lists show `payments`
//! only and say so, each write and refusal leaves an audit line naming the caller and the
//! surface, and a gRPC create is seen by a proxy read right after. And nothing under
//! `src/api` reaches an instance's caches or client but through `api::request`.

use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;
use std::time::Duration;
use tonic::Code;

use crate::auth::{signer, start, ADMIN, EDITOR};

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    r
}

fn deployment(ns: &str, name: &str) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    .to_string()
}

fn ar(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk(group, "v1", kind), plural)
}

/// On `instance`: `kairship:edit` holds `edit` in `payments` only.
async fn narrow_edit_to_payments(instance: &kube::Client) {
    let ns: Api<DynamicObject> =
        Api::all_with(instance.clone(), &ar("", "Namespace", "namespaces"));
    let payments: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "payments"}}),
    )
    .expect("namespace");
    ns.create(&PostParams::default(), &payments)
        .await
        .expect("create payments");
    // The operator keeps Kairship's editors out of `default` (kairship.io/edit=false): the
    // namespace-roles controller takes their binding there away and binds them in payments...
    let off = json!({"metadata": {"labels": {kairship_wire::roles::EDIT_LABEL: "false"}}});
    ns.patch("default", &PatchParams::default(), &Patch::Merge(&off))
        .await
        .expect("label default");
    // ...and removes their cluster-wide reads (editors read as viewers do, everywhere).
    let crbs: Api<DynamicObject> = Api::all_with(
        instance.clone(),
        &ar(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
        ),
    );
    crbs.delete("kairship:edit", &Default::default())
        .await
        .expect("remove the cluster-wide reads");
    let rbs = |n: &str| {
        Api::<DynamicObject>::namespaced_with(
            instance.clone(),
            n,
            &ar("rbac.authorization.k8s.io", "RoleBinding", "rolebindings"),
        )
    };
    let (payments, default) = (rbs("payments"), rbs("default"));
    crate::common::eventually(
        Duration::from_secs(20),
        "editors bound in payments only",
        || {
            let (p, d) = (payments.clone(), default.clone());
            async move {
                let bound = p.get_opt("kairship:edit").await.ok().flatten().is_some();
                let gone = d.get_opt("kairship:edit").await.ok().flatten().is_none();
                (bound && gone).then_some(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_narrowed_to_one_namespace_meets_it_on_every_surface() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    narrow_edit_to_payments(&api.env.sim.client("karmada-1").await).await;
    let mut grpc = WorkloadServiceClient::new(api.channel.clone());
    // The admin's workload in `default`: the editor must not see it.
    grpc.create_workload(with(
        ADMIN,
        CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: deployment("default", "admins-own"),
        },
    ))
    .await
    .expect("the admin creates in default");

    // gRPC: allowed in payments, refused in default with the instance's reason.
    let created = grpc
        .create_workload(with(
            EDITOR,
            CreateWorkloadRequest {
                instance: "karmada-1".into(),
                object_json: deployment("payments", "ledger"),
            },
        ))
        .await
        .expect("create in payments over gRPC");
    assert_eq!(
        created.into_inner().metadata.map(|m| m.name).as_deref(),
        Some("ledger")
    );
    // Read-your-writes across surfaces: the proxy (from its cache) sees it at once.
    let editor = api.proxy_kubeconfig_as("karmada-1", EDITOR);
    let out = api.kubectl_with(
        &editor,
        &[
            "get",
            "deployment",
            "ledger",
            "-n",
            "payments",
            "-o",
            "name",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = grpc
        .create_workload(with(
            EDITOR,
            CreateWorkloadRequest {
                instance: "karmada-1".into(),
                object_json: deployment("default", "sneaky"),
            },
        ))
        .await
        .expect_err("refused in default");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("User \"erin\" cannot create resource \"deployments\"")
            && refused.message().contains("\"default\""),
        "the instance's own reason: {}",
        refused.message()
    );

    // REST: the same, through the gRPC services it calls.
    let rest = api.https_client(EDITOR).await;
    let post = |ns: &str, name: &str| {
        let body = json!({"instance": "karmada-1", "objectJson": deployment(ns, name)}).to_string();
        http::Request::post("/apis/kairship.io/v1alpha1/instances/karmada-1/workloads")
            .header("content-type", "application/json")
            .body(body.into_bytes())
            .expect("request")
    };
    rest.request_text(post("payments", "ledger-rest"))
        .await
        .expect("create in payments over REST");
    match rest.request_text(post("default", "sneaky-rest")).await {
        // REST answers a google.rpc.Status: its code is gRPC's PERMISSION_DENIED (7).
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 7, "{s:?}");
            assert!(
                s.message.contains("cannot create resource \"deployments\""),
                "{}",
                s.message
            );
        }
        other => panic!("REST create in default: {other:?}"),
    }

    // The proxy: kubectl as erin.
    let out = api.kubectl_with(
        &editor,
        &[
            "create",
            "deployment",
            "ledger-proxy",
            "--image=nginx",
            "-n",
            "payments",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = api.kubectl_with(
        &editor,
        &[
            "create",
            "deployment",
            "sneaky-proxy",
            "--image=nginx",
            "-n",
            "default",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"));

    // Lists across namespaces show payments only, and say they were filtered.
    let listed = grpc
        .list_workloads(with(
            EDITOR,
            ListWorkloadsRequest {
                instance: "karmada-1".into(),
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
    assert!(listed.filtered, "the answer says namespaces were left out");
    // Asking for default outright is refused, as kube-apiserver refuses it.
    let refused = grpc
        .list_workloads(with(
            EDITOR,
            ListWorkloadsRequest {
                instance: "karmada-1".into(),
                namespace: "default".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("default refused");
    assert_eq!(refused.code(), Code::PermissionDenied);

    // Deletes, over gRPC and REST.
    grpc.delete_workload(with(
        EDITOR,
        DeleteWorkloadRequest {
            instance: "karmada-1".into(),
            kind: "Deployment".into(),
            namespace: "payments".into(),
            name: "ledger".into(),
        },
    ))
    .await
    .expect("delete over gRPC");
    let del = http::Request::delete(
        "/apis/kairship.io/v1alpha1/instances/karmada-1/namespaces/payments/workloads/Deployment/ledger-rest",
    )
    .body(Vec::new())
    .expect("request");
    rest.request_text(del).await.expect("delete over REST");

    // One audit event per write and refusal, naming erin, the surface and the object.
    for (surface, verb, name, refused) in [
        ("grpc", "create", "ledger", false),
        ("grpc", "create", "sneaky", true),
        ("rest", "create", "ledger-rest", false),
        ("rest", "create", "sneaky-rest", true),
        ("proxy", "create", "", false),
        ("proxy", "create", "", true),
        ("grpc", "delete", "ledger", false),
        ("rest", "delete", "ledger-rest", false),
    ] {
        assert!(
            api.audited("erin", surface, verb, "deployments", name, refused),
            "no audit event ({surface} {verb} {name:?} refused={refused}) in:\n{:#?}",
            api.audit_events()
        );
    }
    api.stop().await;
}

/// Nothing under `src/api` outside `api::request` reaches an instance's reader: every
/// read and write goes through the request path's steps.
#[test]
fn only_the_request_path_reaches_instances() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api");
    let mut stack = vec![root.clone()];
    let mut offenders = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src/api").flatten() {
            let p = e.path();
            if p.is_dir() {
                if p != root.join("request") {
                    stack.push(p);
                }
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for needle in [
                "tree.reader(",
                "InstanceReader",
                ".limiter",
                ".access.allowed(",
            ] {
                if text.contains(needle) {
                    offenders.push(format!("{} uses {needle}", p.display()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "bypassing api::request: {offenders:#?}"
    );
}
