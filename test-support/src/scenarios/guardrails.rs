//! Kairship's guardrails inside an instance (`deploy/instance-rbac.yaml`'s
//! ValidatingAdmissionPolicy), met by a caller who reaches the instance directly and whom
//! the instance's own RBAC lets write policies everywhere: the policy still refuses what
//! would hand out member credentials, and lets the rest through. Run on the
//! simulator (which evaluates the policy with a CEL interpreter) and on a real
//! karmada-apiserver.

use serde_json::{json, Value};

/// The instance's administrator (`system:masters`): `kubeconfig` and a client of it.
pub struct Instance<'a> {
    pub kubeconfig: &'a std::path::Path,
    pub admin: kube::Client,
}

/// A client of the instance's administrator impersonating `user` in `groups`.
async fn impersonating(kubeconfig: &std::path::Path, user: &str, groups: &[&str]) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    config.auth_info.impersonate = Some(user.into());
    config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
    kube::Client::try_from(config).expect("client")
}

async fn send(client: &kube::Client, method: &str, path: &str, body: &Value) -> (u16, String) {
    crate::http::json(client, method, path, body).await
}

const CPP: &str = "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies";

fn pp_path(ns: &str) -> String {
    format!("/apis/policy.karmada.io/v1alpha1/namespaces/{ns}/propagationpolicies")
}

fn cpp(name: &str, selector: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": name}, "spec": {"resourceSelectors": [selector], "placement": {}}})
}

fn pp(ns: &str) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "guardrails", "namespace": ns},
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "Secret"}], "placement": {}}})
}

/// The guardrails hold on `instance` (with a workload namespace `workload`), for a tenant
/// the instance's RBAC lets write every policy.
pub async fn hold(instance: &Instance<'_>, workload: &str) {
    // The tenant's own, native grants: writes of every policy, cluster-wide.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "guardrails-tenant"},
        "rules": [{"apiGroups": ["policy.karmada.io"], "resources": ["*"], "verbs": ["*"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "guardrails-tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "guardrails-tenant"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "tenants"}]});
    for (path, obj) in [
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", role),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            binding,
        ),
    ] {
        let (code, body) = send(&instance.admin, "POST", path, &obj).await;
        assert!(code == 201 || code == 409, "{path}: {code} {body}");
    }
    let tenant = impersonating(instance.kubeconfig, "mallory", &["tenants"]).await;
    let dry = |p: &str| format!("{p}?dryRun=All");
    let refused = |what: &str, (code, body): (u16, String)| {
        assert_eq!(code, 403, "{what}: {body}");
        assert!(
            body.contains("kairship-guardrails") && body.contains("Kairship's guardrails"),
            "{what}: refused by something else than the guardrails: {body}"
        );
    };
    // Member credentials out through a cluster-scoped policy: by namespace, or any Secret.
    let creds = cpp(
        "steal-member-credentials",
        json!({"apiVersion": "v1", "kind": "Secret", "namespace": "karmada-cluster"}),
    );
    refused(
        "a CPP selecting karmada-cluster's Secrets",
        send(&tenant, "POST", &dry(CPP), &creds).await,
    );
    let any_secret = cpp(
        "every-secret",
        json!({"apiVersion": "v1", "kind": "Secret", "namespace": workload}),
    );
    refused(
        "a CPP selecting Secrets",
        send(&tenant, "POST", &dry(CPP), &any_secret).await,
    );
    let everywhere = cpp(
        "everywhere",
        json!({"apiVersion": "v1", "kind": "ConfigMap"}),
    );
    refused(
        "a CPP selecting every namespace",
        send(&tenant, "POST", &dry(CPP), &everywhere).await,
    );
    // A policy inside a system namespace.
    refused(
        "a PP in karmada-cluster",
        send(
            &tenant,
            "POST",
            &dry(&pp_path("karmada-cluster")),
            &pp("karmada-cluster"),
        )
        .await,
    );
    // What tenants may do: a policy in a workload namespace, a CPP naming one.
    let (code, body) = send(&tenant, "POST", &dry(&pp_path(workload)), &pp(workload)).await;
    assert!(code < 300, "a PP in {workload}: {code} {body}");
    let named = cpp(
        "workload-configmaps",
        json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": workload}),
    );
    let (code, body) = send(&tenant, "POST", &dry(CPP), &named).await;
    assert!(code < 300, "a CPP naming {workload}: {code} {body}");
    // The instance's administrators are not held back.
    let (code, body) = send(&instance.admin, "POST", &dry(CPP), &creds).await;
    assert!(code < 300, "the administrator's CPP: {code} {body}");
    let kairship_admin =
        impersonating(instance.kubeconfig, "ada", &["tenants", "kairship:admin"]).await;
    let (code, body) = send(&kairship_admin, "POST", &dry(CPP), &everywhere).await;
    assert!(
        code < 300,
        "Kairship's admin's CPP selecting every namespace: {code} {body}"
    );
}
