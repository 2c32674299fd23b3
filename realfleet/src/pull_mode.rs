//! What a karmada-apiserver needs before `karmadactl register` can add a Pull mode member,
//! as Karmada's installers set it up (`artifacts/deploy/bootstrap-token-configuration.yaml`
//! in Karmada's module): the `cluster-info` ConfigMap anyone may read, bootstrap tokens'
//! group allowed to post CSRs and have them approved, agents allowed to renew their own,
//! and the identity `karmadactl register` uses to write each agent's RBAC. The signing
//! itself is kube-controller-manager's (`bootstrapsigner`, `csrsigning`), the approval
//! karmada-controller-manager's (`agentcsrapproving`, on by default).

use serde_json::{json, Value};

use crate::karmada::{apply, ar};
use crate::Error;

/// Karmada's group for bootstrap tokens that register clusters.
pub const TOKEN_GROUP: &str = "system:bootstrappers:karmada:default-cluster-token";
/// The group of every karmada-agent's client certificate.
pub const AGENT_GROUP: &str = "system:karmada:agents";
/// Who `karmadactl register` is while it writes an agent's RBAC.
const RBAC_GENERATOR: &str = "system:karmada:agent:rbac-generator";

fn labels() -> Value {
    json!({"karmada.io/bootstrapping": "rbac-defaults"})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels()}, "rules": rules})
}

fn cluster_role_binding(name: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]})
}

fn group(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name})
}

fn user(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name})
}

/// Sets `client`'s karmada-apiserver up for Pull mode; `server` and `ca_pem` are what
/// `cluster-info` advertises (karmadactl register checks the CA against its pin).
pub async fn bootstrap(client: &kube::Client, server: &str, ca_pem: &str) -> Result<(), Error> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n"
    );
    let configmaps = ar("", "v1", "ConfigMap", "configmaps");
    apply(
        client,
        &configmaps,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": kubeconfig}}),
    )
    .await?;
    let roles = ar("rbac.authorization.k8s.io", "v1", "Role", "roles");
    let role_bindings = ar(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
    );
    let info = "system:karmada:bootstrap-signer-clusterinfo";
    apply(
        client,
        &roles,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": info, "namespace": "kube-public", "labels": labels()},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["cluster-info"], "verbs": ["get"]}]}),
    )
    .await?;
    apply(
        client,
        &role_bindings,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": info, "namespace": "kube-public", "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": info},
            "subjects": [user("system:anonymous")]}),
    )
    .await?;
    let csr_rule = |sub: &str| {
        json!([{"apiGroups": ["certificates.k8s.io"],
            "resources": [format!("certificatesigningrequests/{sub}")], "verbs": ["create"]}])
    };
    let autoapprover = "system:karmada:certificatesigningrequest:autoapprover";
    let selfautoapprover = "system:karmada:certificatesigningrequest:selfautoapprover";
    let everything = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
    let objects = [
        cluster_role_binding(
            "system:karmada:agent-bootstrap",
            "system:node-bootstrapper",
            group(TOKEN_GROUP),
        ),
        cluster_role(autoapprover, csr_rule("clusteragent")),
        cluster_role_binding(
            "system:karmada:agent-autoapprove-bootstrap",
            autoapprover,
            group(TOKEN_GROUP),
        ),
        cluster_role(selfautoapprover, csr_rule("selfclusteragent")),
        cluster_role_binding(
            "system:karmada:agent-autoapprove-certificate-rotation",
            selfautoapprover,
            group(AGENT_GROUP),
        ),
        cluster_role("system:karmada:agent-rbac-generator", everything),
        cluster_role_binding(
            "system:karmada:agent-rbac-generator",
            "system:karmada:agent-rbac-generator",
            user(RBAC_GENERATOR),
        ),
    ];
    let crs = ar(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
    );
    let crbs = ar(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    );
    for o in objects {
        let res = match o["kind"] == "ClusterRole" {
            true => &crs,
            false => &crbs,
        };
        apply(client, res, o).await?;
    }
    Ok(())
}
