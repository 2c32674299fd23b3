//! Authentication and per-instance authorization on every surface (gRPC, REST, the proxy
//! with kubectl), bindings taking effect without a restart, OIDC JWTs, startup refusals,
//! and the HMAC-signed global-management webhook.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use kairship::auth::{Auth, AuthConfig, JwksSource, OidcConfig};
use kairship::crd::{
    InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind, SOURCE_LABEL,
};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::supervisor_service_client::SupervisorServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};
use tonic::Code;

use crate::common::eventually;
use crate::rest::{call, P};
use crate::server::Api as KairshipApi;

mod access;
mod oidc;
mod webhook;

pub(crate) const ADMIN: &str = "admin-token-0001";
pub(crate) const VIEWER: &str = "viewer-token-0002";
pub(crate) const EDITOR: &str = "editor-token-0003";
const NOBODY: &str = "nobody-token-0004";
const DAVE: &str = "dave-token-0005";
const ISSUER: &str = "https://idp.example.test";
pub(crate) const AUDIENCE: &str = "kairship";
const SECRET: &str = "a-shared-webhook-secret-of-some-length";

/// An ES256 signing key and its JWK.
pub(crate) struct Signer {
    pkcs8: Vec<u8>,
    pub(crate) jwk: Value,
}

pub(crate) fn signer(kid: &str) -> Signer {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("pair");
    let point = pair.public_key().as_ref();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    Signer {
        pkcs8: pkcs8.as_ref().to_vec(),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
            "x": b64.encode(&point[1..33]), "y": b64.encode(&point[33..65])}),
    }
}

pub(crate) fn jwt(s: &Signer, kid: &str, claims: Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_der(&s.pkcs8),
    )
    .expect("sign")
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

pub(crate) fn claims(sub: &str, aud: &str, exp_in: i64) -> Value {
    json!({"iss": ISSUER, "aud": aud, "sub": sub, "groups": ["sre"], "iat": now(), "exp": now() + exp_in})
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn config(dir: &Path, jwks: &Value) -> AuthConfig {
    let tokens = format!(
        "{ADMIN},alice,1,\"ops\"\n{VIEWER},victor,2\n{EDITOR},erin,3,\"team-a,misc\"\n{NOBODY},nora,4\n{DAVE},dave,5\n"
    );
    AuthConfig {
        token_file: Some(write(dir, "tokens.csv", &tokens)),
        oidc: Some(OidcConfig {
            issuer: ISSUER.into(),
            audience: AUDIENCE.into(),
            jwks: JwksSource::File(write(dir, "jwks.json", &jwks.to_string())),
            username_claim: "sub".into(),
            groups_claim: "groups".into(),
            username_prefix: Some("-".into()),
            groups_prefix: String::new(),
        }),
        webhook_secret_file: Some(write(dir, "webhook.secret", SECRET)),
        disabled: false,
        operator: Some("kairship-test-operator".into()),
        namespace: "kairship-system".into(),
    }
}

fn binding(
    role: Role,
    instances: &[&str],
    kind: SubjectKind,
    name: &str,
) -> InstanceRoleBindingSpec {
    InstanceRoleBindingSpec {
        role,
        instances: instances.iter().map(|s| s.to_string()).collect(),
        subjects: vec![Subject {
            kind,
            name: name.into(),
        }],
    }
}

async fn bind(host: &kube::Client, name: &str, spec: InstanceRoleBindingSpec) {
    let api: Api<InstanceRoleBinding> = Api::all(host.clone());
    api.create(
        &PostParams::default(),
        &InstanceRoleBinding::new(name, spec),
    )
    .await
    .expect("create binding");
}

/// A request carrying `token` as gRPC metadata.
pub(crate) fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    r
}

fn denied<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, mentions: &[&str]) {
    let s = r.expect_err("refused");
    assert_eq!(s.code(), code, "{s:?}");
    for m in mentions {
        assert!(
            s.message().contains(m),
            "{:?} should mention {m:?}",
            s.message()
        );
    }
}

fn names(list: &ListInstancesResponse) -> Vec<String> {
    list.instances
        .iter()
        .filter_map(|i| i.metadata.as_ref().map(|m| m.name.clone()))
        .collect()
}

pub(crate) async fn start(dir: &Path, jwks: &Value) -> KairshipApi {
    let api = KairshipApi::start_full(2, None, Some(config(dir, jwks))).await;
    let host = api.env.host.clone();
    bind(
        &host,
        "victor-view",
        binding(Role::View, &["karmada-1"], SubjectKind::User, "victor"),
    )
    .await;
    bind(
        &host,
        "team-a-edit",
        binding(Role::Edit, &["karmada-1"], SubjectKind::Group, "team-a"),
    )
    .await;
    bind(
        &host,
        "sre-view",
        binding(Role::View, &["karmada-2"], SubjectKind::Group, "sre"),
    )
    .await;
    // Last: bindings arrive through one watch, in order, so once the admin (group ops)
    // sees everything every binding above has arrived too (a test once asked as sre
    // before sre-view had).
    bind(
        &host,
        "ops-admin",
        binding(Role::Admin, &["*"], SubjectKind::Group, "ops"),
    )
    .await;
    let c = InstanceServiceClient::new(api.channel.clone());
    eventually(Duration::from_secs(10), "bindings cached", || {
        let mut c = c.clone();
        async move {
            let l = c
                .list_instances(with(ADMIN, ListInstancesRequest::default()))
                .await
                .ok()?;
            (names(&l.into_inner()).len() == 2).then_some(())
        }
    })
    .await;
    api
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_is_allowed_and_denied_over_grpc_and_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let mut inst = InstanceServiceClient::new(api.channel.clone());
    let mut work = WorkloadServiceClient::new(api.channel.clone());
    let mut sup = SupervisorServiceClient::new(api.channel.clone());

    // No token, a wrong token: UNAUTHENTICATED, saying nothing about instances.
    let anon = inst
        .get_instance(GetInstanceRequest {
            name: "karmada-1".into(),
        })
        .await;
    denied(anon, Code::Unauthenticated, &["bearer token"]);
    let wrong = inst
        .get_instance(with(
            "not-a-token",
            GetInstanceRequest {
                name: "karmada-1".into(),
            },
        ))
        .await
        .expect_err("refused");
    assert_eq!(wrong.code(), Code::Unauthenticated);
    assert!(!wrong.message().contains("karmada"), "{}", wrong.message());

    // view: lists only its instance; reads allowed; writes and other instances refused.
    let l = inst
        .list_instances(with(VIEWER, ListInstancesRequest::default()))
        .await
        .expect("list");
    assert_eq!(names(&l.into_inner()), vec!["karmada-1"]);
    inst.get_instance(with(
        VIEWER,
        GetInstanceRequest {
            name: "karmada-1".into(),
        },
    ))
    .await
    .expect("viewer reads its instance");
    work.list_workloads(with(
        VIEWER,
        ListWorkloadsRequest {
            instance: "karmada-1".into(),
            ..Default::default()
        },
    ))
    .await
    .expect("viewer lists workloads");
    denied(
        inst.get_instance(with(
            VIEWER,
            GetInstanceRequest {
                name: "karmada-2".into(),
            },
        ))
        .await,
        Code::PermissionDenied,
        &["victor", "karmada-2", "\"view\""],
    );
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "authz", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "a", "image": "a"}]}}}});
    let create = |token: &str| {
        with(
            token,
            CreateWorkloadRequest {
                instance: "karmada-1".into(),
                object_json: deploy.to_string(),
            },
        )
    };
    denied(
        work.create_workload(create(VIEWER)).await,
        Code::PermissionDenied,
        &["create workloads", "\"edit\""],
    );
    denied(
        sup.restart_instance(with(
            VIEWER,
            RestartInstanceRequest {
                name: "karmada-1".into(),
            },
        ))
        .await,
        Code::PermissionDenied,
        &["\"admin\""],
    );
    let actors = sup
        .list_actors(with(VIEWER, ListActorsRequest {}))
        .await
        .expect("actors")
        .into_inner();
    let seen: Vec<_> = actors.actors.iter().map(|a| a.instance.as_str()).collect();
    assert_eq!(
        seen,
        vec!["karmada-1"],
        "a viewer of one instance sees only its actor"
    );
    // ...and that instance's controllers, not another's.
    let ours = sup
        .list_controllers(with(
            VIEWER,
            ListControllersRequest {
                name: "karmada-1".into(),
            },
        ))
        .await
        .expect("controllers")
        .into_inner();
    assert_eq!(ours.controllers.len(), kairship::controllers::TABLE.len());
    denied(
        sup.list_controllers(with(
            VIEWER,
            ListControllersRequest {
                name: "karmada-2".into(),
            },
        ))
        .await,
        Code::PermissionDenied,
        &["victor", "karmada-2", "\"view\""],
    );

    // No binding at all: nothing listed, and a missing instance looks like a forbidden one.
    let l = inst
        .list_instances(with(NOBODY, ListInstancesRequest::default()))
        .await
        .expect("list");
    assert!(names(&l.into_inner()).is_empty());
    for name in ["karmada-1", "no-such-instance"] {
        denied(
            inst.get_instance(with(NOBODY, GetInstanceRequest { name: name.into() }))
                .await,
            Code::PermissionDenied,
            &["nora", "no role"],
        );
    }

    // edit (through a group): workload writes, no instance lifecycle.
    work.create_workload(create(EDITOR))
        .await
        .expect("editor creates a workload");
    work.delete_workload(with(
        EDITOR,
        DeleteWorkloadRequest {
            instance: "karmada-1".into(),
            kind: "Deployment".into(),
            namespace: "default".into(),
            name: "authz".into(),
        },
    ))
    .await
    .expect("editor deletes it");
    denied(
        inst.delete_instance(with(
            EDITOR,
            DeleteInstanceRequest {
                name: "karmada-1".into(),
            },
        ))
        .await,
        Code::PermissionDenied,
        &["delete instances", "\"admin\"", "has role \"edit\""],
    );
    denied(
        work.create_workload(with(
            EDITOR,
            CreateWorkloadRequest {
                instance: "karmada-2".into(),
                object_json: deploy.to_string(),
            },
        ))
        .await,
        Code::PermissionDenied,
        &["karmada-2"],
    );

    // admin on every instance (group ops): lifecycle and restarts; sees the whole tree.
    sup.restart_instance(with(
        ADMIN,
        RestartInstanceRequest {
            name: "karmada-2".into(),
        },
    ))
    .await
    .expect("admin restarts an actor");
    let all = sup
        .list_actors(with(ADMIN, ListActorsRequest {}))
        .await
        .expect("actors")
        .into_inner();
    assert!(
        all.actors.iter().any(|a| a.instance.is_empty()),
        "the admin sees root and manager"
    );

    // REST: the same decisions, as HTTP statuses with google.rpc.Status bodies.
    let none = api.https_client("").await;
    let (code, body) = call(&none, "GET", &format!("{P}/instances"), None).await;
    assert_eq!((code, body["code"].as_i64()), (401, Some(16)), "{body}");
    let viewer = api.https_client(VIEWER).await;
    let (code, body) = call(&viewer, "GET", &format!("{P}/instances"), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["instances"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );
    let (code, body) = call(&viewer, "GET", &format!("{P}/instances/karmada-2"), None).await;
    assert_eq!((code, body["code"].as_i64()), (403, Some(7)), "{body}");
    assert!(body["message"]
        .as_str()
        .unwrap_or_default()
        .contains("karmada-2"));
    let (code, _) = call(
        &viewer,
        "POST",
        &format!("{P}/instances/karmada-1:restart"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 403);
    let admin = api.https_client(ADMIN).await;
    let (code, body) = call(
        &admin,
        "POST",
        &format!("{P}/instances/karmada-1:restart"),
        Some(json!({})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = call(&admin, "GET", &format!("{P}/actors"), None).await;
    assert_eq!(code, 200, "{body}");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_a_viewer_and_bindings_changing_live() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let viewer1 = api.proxy_kubeconfig_as("karmada-1", VIEWER);
    let out = api.kubectl_with(&viewer1, &["get", "deployments", "-A", "-o", "name"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = api.kubectl_with(&viewer1, &["create", "configmap", "nope", "-n", "default"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("may not create configmaps")
            && err.contains("\"edit\""),
        "{err}"
    );
    let viewer2 = api.proxy_kubeconfig_as("karmada-2", VIEWER);
    let out = api.kubectl_with(&viewer2, &["get", "deployments", "-A"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Forbidden"), "{err}");
    let anon = api.proxy_kubeconfig_as("karmada-1", "bogus");
    let out = api.kubectl_with(&anon, &["get", "deployments", "-A"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("must be logged in"),
        "{err}"
    );
    // The editor writes namespaced objects but not cluster-scoped ones.
    let editor = api.proxy_kubeconfig_as("karmada-1", EDITOR);
    let out = api.kubectl_with(&editor, &["create", "configmap", "yes", "-n", "default"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = api.kubectl_with(&editor, &["create", "namespace", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("Forbidden"));

    // A new binding takes effect without a restart, and so does its removal.
    let host = api.env.host.clone();
    bind(
        &host,
        "victor-view-2",
        binding(Role::View, &["karmada-2"], SubjectKind::User, "victor"),
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the new binding in effect",
        || async {
            api.kubectl_with(&viewer2, &["get", "deployments", "-A"])
                .status
                .success()
                .then_some(())
        },
    )
    .await;
    let bindings: Api<InstanceRoleBinding> = Api::all(host.clone());
    bindings
        .delete("victor-view-2", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        Duration::from_secs(10),
        "the removed binding no longer in effect",
        || async {
            (!api
                .kubectl_with(&viewer2, &["get", "deployments", "-A"])
                .status
                .success())
            .then_some(())
        },
    )
    .await;
    api.stop().await;
}
