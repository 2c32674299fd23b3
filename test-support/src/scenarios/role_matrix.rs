//! The role matrix: for each of Kairship's roles, each kind the roles table names
//! (`kairship_wire::roles::TABLE`), each class of namespace (workload, system, execution)
//! and each of read (list) and write (create, as a dry run), what the instance answers
//! through Kairship's proxy is what the table says: allowed, or 403. The same table, the
//! same requests, on the simulator and on a real karmada-apiserver; and for the
//! Kubernetes kinds, on a member through Karmada's cluster proxy.

use std::time::Duration;

use kairship_wire::roles::{access, Class, Role, TABLE};
use serde_json::{json, Value};

/// A client through Kairship's proxy to one instance (or member) per role.
pub struct RoleClients {
    pub view: kube::Client,
    pub edit: kube::Client,
    pub admin: kube::Client,
}

impl RoleClients {
    fn of(&self, role: Role) -> &kube::Client {
        match role {
            Role::View => &self.view,
            Role::Edit => &self.edit,
            Role::Admin => &self.admin,
        }
    }
}

/// The namespace of each class the matrix writes in.
pub struct Namespaces {
    pub workload: &'static str,
    pub system: &'static str,
    pub execution: Option<&'static str>,
}

/// The namespaces the matrix uses on an instance (it makes `matrix` and
/// `karmada-es-member1` there first)...
pub const ON_INSTANCE: Namespaces = Namespaces {
    workload: "matrix",
    system: "karmada-system",
    execution: Some("karmada-es-member1"),
};

/// ...and on its member `member1` (Karmada propagates `matrix` there).
pub const ON_MEMBER: Namespaces = Namespaces {
    workload: "matrix",
    system: "kube-system",
    execution: None,
};

/// Under an instance's proxy: its member `member1`, through Karmada's cluster proxy.
pub const MEMBER1: &str = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy";

impl Namespaces {
    fn of(&self, class: Class) -> Option<&'static str> {
        match class {
            Class::Workload => Some(self.workload),
            Class::System => Some(self.system),
            Class::Execution => self.execution,
            Class::Cluster => None,
        }
    }
}

fn version(group: &str, resource: &str) -> &'static str {
    match (group, resource) {
        ("", _) => "v1",
        ("apps" | "batch", _) => "v1",
        ("work.karmada.io", "works") => "v1alpha1",
        ("work.karmada.io", _) => "v1alpha2",
        _ => "v1alpha1",
    }
}

fn path(group: &str, resource: &str, namespace: Option<&str>) -> String {
    let base = match group {
        "" => "/api/v1".to_string(),
        g => format!("/apis/{g}/{}", version(g, resource)),
    };
    match namespace {
        Some(ns) => format!("{base}/namespaces/{ns}/{resource}"),
        None => format!("{base}/{resource}"),
    }
}

/// A valid object of `resource` to create (as a dry run) in `namespace`; the workload
/// namespace `workload` is what cluster-scoped policies select.
pub fn object(group: &str, resource: &str, namespace: Option<&str>, workload: &str) -> Value {
    let name = "role-matrix";
    let api_version = match group {
        "" => "v1".to_string(),
        g => format!("{g}/{}", version(g, resource)),
    };
    let pod = json!({"metadata": {"labels": {"app": name}},
        "spec": {"restartPolicy": if resource == "jobs" {"Never"} else {"Always"},
            "containers": [{"name": "c", "image": "nginx"}]}});
    let (kind, spec): (&str, Value) = match resource {
        "deployments" => (
            "Deployment",
            json!({"selector": {"matchLabels": {"app": name}}, "template": pod}),
        ),
        "statefulsets" => (
            "StatefulSet",
            json!({"serviceName": name, "selector": {"matchLabels": {"app": name}}, "template": pod}),
        ),
        "jobs" => ("Job", json!({"template": pod})),
        "services" => ("Service", json!({"ports": [{"port": 80}]})),
        "configmaps" => ("ConfigMap", Value::Null),
        "secrets" => ("Secret", Value::Null),
        "propagationpolicies" => (
            "PropagationPolicy",
            json!({
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}],
            "placement": {}}),
        ),
        "overridepolicies" => (
            "OverridePolicy",
            json!({
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": name}],
            "overrideRules": []}),
        ),
        "clusterpropagationpolicies" => (
            "ClusterPropagationPolicy",
            json!({
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": workload, "name": name}],
            "placement": {}}),
        ),
        "clusteroverridepolicies" => (
            "ClusterOverridePolicy",
            json!({
            "resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": workload, "name": name}],
            "overrideRules": []}),
        ),
        "resourcebindings" => (
            "ResourceBinding",
            json!({
            "resource": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": namespace, "name": name}}),
        ),
        "clusterresourcebindings" => (
            "ClusterResourceBinding",
            json!({
            "resource": {"apiVersion": "v1", "kind": "Namespace", "name": name}}),
        ),
        "works" => ("Work", json!({"workload": {"manifests": []}})),
        "clusters" => (
            "Cluster",
            json!({"syncMode": "Push", "apiEndpoint": "https://192.0.2.1:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": name}}),
        ),
        "namespaces" => ("Namespace", Value::Null),
        other => panic!("the role matrix has no object for {other}"),
    };
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(ns) = namespace {
        o["metadata"]["namespace"] = ns.into();
    }
    match kind {
        "ConfigMap" => o["data"] = json!({"k": "v"}),
        "Secret" => o["stringData"] = json!({"k": "v"}),
        _ if !spec.is_null() => o["spec"] = spec,
        _ => {}
    }
    o
}

/// Whether the instance let `client` do it (not 401 or 403), with the answer for the
/// report.
async fn allowed(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<String>,
) -> (bool, String) {
    let body = body.map(|b| ("application/json", b.into_bytes()));
    let (code, text) = crate::http::send(client, method, path, body).await;
    let message = crate::http::message(&text);
    (
        code != 0 && code != 401 && code != 403,
        format!("{method} {path}: {code} {message}"),
    )
}

/// Where the matrix runs.
pub enum Target {
    /// The instance's own API: every row.
    Instance,
    /// A member through Karmada's cluster proxy: the Kubernetes kinds only (Karmada's
    /// are the instance's), in workload and system namespaces; `writes`: writes too (the
    /// simulator's cluster proxy serves reads only).
    Member { writes: bool },
}

/// Every cell of the matrix on `clients`; the cells whose answer differs from the table.
pub async fn mismatches(clients: &RoleClients, ns: &Namespaces, target: Target) -> Vec<String> {
    let mut wrong = Vec::new();
    for row in TABLE {
        for (group, resource) in row.resources {
            let member = matches!(target, Target::Member { .. });
            if member && !matches!(*group, "" | "apps" | "batch") {
                continue;
            }
            let classes: Vec<Class> = match row.namespaced {
                true => Class::NAMESPACES.to_vec(),
                false => vec![Class::Cluster],
            };
            for class in classes {
                let namespace = match class {
                    Class::Cluster => None,
                    c => match ns.of(c) {
                        Some(n) => Some(n),
                        None => continue,
                    },
                };
                for role in Role::ALL {
                    let Some(expected) = access(role, group, resource, class) else {
                        continue;
                    };
                    let at = path(group, resource, namespace);
                    let body = object(group, resource, namespace, ns.workload).to_string();
                    let writes_too = !matches!(target, Target::Member { writes: false });
                    for writes in [false, true] {
                        if writes && !writes_too {
                            continue;
                        }
                        let want = expected.allows(writes);
                        let (got, answer) = match writes {
                            false => allowed(clients.of(role), "GET", &at, None).await,
                            true => {
                                let create = format!("{at}?dryRun=All");
                                allowed(clients.of(role), "POST", &create, Some(body.clone())).await
                            }
                        };
                        if got != want {
                            wrong.push(format!(
                                "{} {} {resource} in a {} namespace: the table says {}, the instance answered {answer}",
                                role.as_str(),
                                if writes { "writes" } else { "reads" },
                                class.as_str(),
                                if want { "allowed" } else { "refused" },
                            ));
                        }
                    }
                }
            }
        }
    }
    wrong
}

/// Waits until editors may read Secrets in the workload namespace (Kairship binds them
/// there a moment after the namespace appears, and propagates that to the members), then
/// checks the matrix.
pub async fn holds(clients: &RoleClients, ns: &Namespaces, target: Target, within: Duration) {
    let probe = path("", "secrets", Some(ns.workload));
    let bound = crate::poll(within, crate::POLL, || async {
        match allowed(&clients.edit, "GET", &probe, None).await {
            (true, _) => Ok(()),
            (false, answer) => Err(answer),
        }
    })
    .await;
    if let Err(answer) = bound {
        panic!("editors were never bound in {}: {answer}", ns.workload);
    }
    let wrong = mismatches(clients, ns, target).await;
    assert!(
        wrong.is_empty(),
        "the roles table and the instance disagree:\n{}",
        wrong.join("\n")
    );
}
