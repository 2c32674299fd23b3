//! The role matrix on the simulated fleet (test-support's `role_matrix`, the same requests
//! the real tier makes): what view, edit and admin may do inside an instance, through
//! Kairship's proxy, and on a member through Karmada's cluster proxy, is what the roles
//! table says. And the README shows that table.

use std::time::Duration;

use kairship::auth::AuthConfig;
use kairship::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
use kairship_test_support::scenarios::role_matrix::{self, RoleClients, Target};
use kube::api::{Api, PostParams};

use crate::server::Api as KairshipApi;

const TOKENS: [(&str, &str, Role); 3] = [
    ("matrix-view-token", "vic", Role::View),
    ("matrix-edit-token", "eddie", Role::Edit),
    ("matrix-admin-token", "ada", Role::Admin),
];

async fn clients(api: &KairshipApi, prefix: &str) -> RoleClients {
    let client = |token: &str| {
        let server = format!(
            "{}/apis/kairship.io/v1alpha1/instances/karmada-1/proxy{prefix}",
            api.https
        );
        let kc = kairship_wire::kubeconfig::build("matrix", &server, &api.ca_pem, token);
        let digest: String = token.bytes().take(12).map(|b| format!("{b:02x}")).collect();
        let path = api
            .env
            .sim
            .dir
            .path()
            .join(format!("matrix-{digest}-{}.kubeconfig", prefix.len()));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write");
        path
    };
    let (v, e, a) = (
        client(TOKENS[0].0),
        client(TOKENS[1].0),
        client(TOKENS[2].0),
    );
    RoleClients {
        view: crate::common::client_from(&v).await,
        edit: crate::common::client_from(&e).await,
        admin: crate::common::client_from(&a).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_may_do_what_the_roles_table_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    let lines: Vec<String> = TOKENS
        .iter()
        .map(|(t, u, _)| format!("{t},{u},{u},"))
        .collect();
    std::fs::write(&tokens, lines.join("\n")).expect("tokens");
    let auth = AuthConfig {
        token_file: Some(tokens),
        ..Default::default()
    };
    let api = KairshipApi::start_full(1, None, Some(auth)).await;
    let bindings: Api<InstanceRoleBinding> = Api::all(api.env.host.clone());
    for (_, user, role) in TOKENS {
        let spec = InstanceRoleBindingSpec {
            role,
            instances: vec!["karmada-1".into()],
            subjects: vec![Subject {
                kind: SubjectKind::User,
                name: user.into(),
            }],
        };
        bindings
            .create(
                &PostParams::default(),
                &InstanceRoleBinding::new(user, spec),
            )
            .await
            .expect("binding");
    }
    // A workload namespace, made by the instance's own administrator.
    let instance = api.env.sim.client("karmada-1").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(instance.clone());
    for name in ["matrix", "karmada-es-member1"] {
        let mut ns = k8s_openapi::api::core::v1::Namespace::default();
        ns.metadata.name = Some(name.into());
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("namespace {name}: {e}"),
        }
    }
    let on_instance = clients(&api, "").await;
    role_matrix::holds(
        &on_instance,
        &role_matrix::ON_INSTANCE,
        Target::Instance,
        Duration::from_secs(30),
    )
    .await;
    // On a member, through Karmada's cluster proxy: the bindings Kairship propagates.
    let on_member = clients(&api, role_matrix::MEMBER1).await;
    role_matrix::holds(
        &on_member,
        &role_matrix::ON_MEMBER,
        Target::Member { writes: false },
        Duration::from_secs(30),
    )
    .await;
    api.stop().await;
}

/// A tenant reaching the simulated instance directly, whom its own RBAC lets write every
/// policy and Cluster, meets Kairship's guardrail policy (evaluated in CEL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_guards_member_credentials_itself() {
    let (env, tree) = crate::harness::Env::running(1).await;
    let instance = kairship_test_support::scenarios::guardrails::Instance {
        kubeconfig: &env.sim.kubeconfig("karmada-1"),
        admin: env.sim.client("karmada-1").await,
    };
    kairship_test_support::scenarios::guardrails::hold(&instance, "default").await;
    tree.shutdown().await;
}

#[test]
fn the_readme_shows_the_roles_table() {
    let doc = std::fs::read_to_string(crate::common::repo_path("docs/security.md"))
        .expect("docs/security.md");
    let table = kairship_wire::roles::markdown();
    assert!(
        doc.contains(&table),
        "docs/security.md's roles table differs from kairship_wire::roles; it should read:\n{table}"
    );
}
