//! The role matrix and the guardrails on real karmada-apiservers (test-support's
//! `role_matrix` and `guardrails`, the same requests the simulated fleet gets): view (the
//! demo's viewer token), edit (a Dex user whose group is bound edit on karmada-1) and
//! admin (the demo's admin token), through Kairship's proxy, on the instance and on a
//! member through Karmada's cluster proxy; and a tenant with cluster-wide policy rights of
//! the instance's own refused by the instance's admission policy.

use std::time::Duration;

use kairship_realfleet::dex::Dex;
use kairship_test_support::scenarios::guardrails;
use kairship_test_support::scenarios::role_matrix::{self, RoleClients, Target};

use crate::identity::{bind, proxy_kubeconfig, CLIENT};
use crate::Demo;

async fn client(path: &std::path::Path) -> kube::Client {
    crate::common::client_from(path).await
}

async fn clients(demo: &Demo, instance: &str, prefix: &str, editor: &str) -> RoleClients {
    let kc = |token: &str, tag: &str| {
        let path = proxy_kubeconfig(demo, instance, token, tag);
        // The kubeconfig's server, under Karmada's cluster proxy when asked.
        let mut text = std::fs::read_to_string(&path).expect("kubeconfig");
        let server = format!("/apis/kairship.io/v1alpha1/instances/{instance}/proxy");
        text = text.replace(&server, &format!("{server}{prefix}"));
        std::fs::write(&path, text).expect("kubeconfig");
        path
    };
    let tag = if prefix.is_empty() {
        "matrix"
    } else {
        "matrix-member"
    };
    RoleClients {
        view: client(&kc(&demo.token("viewer"), &format!("{tag}-view"))).await,
        edit: client(&kc(editor, &format!("{tag}-edit"))).await,
        admin: client(&kc(&demo.token("admin"), &format!("{tag}-admin"))).await,
    }
}

pub async fn matrix_and_guardrails(demo: &Demo, dex: &Dex) {
    let instance = demo.endpoints["tokens"]["viewer_instance"]
        .as_str()
        .unwrap_or("karmada-1")
        .to_string();
    bind(
        demo,
        "matrix-edit",
        "edit",
        &[&instance],
        "oidc:payments-sre",
    );
    let alice = &dex.users[1];
    let editor = dex
        .password_token(CLIENT, alice)
        .await
        .expect("alice's token");
    let direct = demo.direct(&instance);
    for ns in ["matrix", "karmada-system", "karmada-es-member1"] {
        let out = demo.kubectl(&direct, &["create", "namespace", ns]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("AlreadyExists"),
            "namespace {ns}: {err}"
        );
    }
    let on_instance = clients(demo, &instance, "", &editor).await;
    role_matrix::holds(
        &on_instance,
        &role_matrix::ON_INSTANCE,
        Target::Instance,
        Duration::from_secs(60),
    )
    .await;
    let on_member = clients(demo, &instance, role_matrix::MEMBER1, &editor).await;
    role_matrix::holds(
        &on_member,
        &role_matrix::ON_MEMBER,
        Target::Member { writes: true },
        Duration::from_secs(90),
    )
    .await;
    guardrails::hold(
        &guardrails::Instance {
            kubeconfig: &direct,
            admin: client(&direct).await,
        },
        "matrix",
    )
    .await;
}
