//! The bootstrap roles every kube-apiserver creates at start (facts of Kubernetes'
//! bootstrap policy, abridged to the resources the simulator serves or clients name):
//! `cluster-admin` for `system:masters`, the user-facing `admin`/`edit`/`view` built by
//! aggregation from `system:aggregate-to-*`, and discovery for every authenticated user.

use serde_json::{json, Value};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const AGG: &str = "rbac.authorization.k8s.io/aggregate-to-";

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn role(name: &str, labels: Value, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": labels,
                        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
           "rules": rules})
}

fn aggregated(name: &str, labels: Value, selector_key: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": labels,
                        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
           "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector_key: "true"}}]},
           "rules": []})
}

/// Namespaced workload kinds readable by `view` (no Secrets: they hold credentials).
fn viewable() -> Vec<Value> {
    vec![
        rule(
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
            READ,
        ),
        rule(&[""], &["namespaces"], READ),
        rule(
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
            READ,
        ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            READ,
        ),
        rule(
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
            READ,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            READ,
        ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
            READ,
        ),
        rule(&["discovery.k8s.io"], &["endpointslices"], READ),
    ]
}

fn editable() -> Vec<Value> {
    vec![
        rule(&[""], &["secrets"], READ),
        rule(
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
            READ,
        ),
        rule(&[""], &["serviceaccounts"], &["impersonate"]),
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
            ],
            &["create", "delete", "deletecollection", "patch", "update"],
        ),
        rule(
            &[""],
            &[
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
            WRITE,
        ),
        rule(
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
            WRITE,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
        rule(&["batch"], &["cronjobs", "jobs"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            WRITE,
        ),
        rule(&["discovery.k8s.io"], &["endpointslices"], WRITE),
    ]
}

fn administrable() -> Vec<Value> {
    vec![
        rule(
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
            &["create"],
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["rolebindings", "roles"],
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
        ),
    ]
}

pub fn cluster_roles() -> Vec<Value> {
    vec![
        role(
            "cluster-admin",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults"}),
            vec![
                rule(&["*"], &["*"], &["*"]),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ],
        ),
        aggregated(
            "admin",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults"}),
            &format!("{AGG}admin"),
        ),
        aggregated(
            "edit",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", format!("{AGG}admin"): "true"}),
            &format!("{AGG}edit"),
        ),
        aggregated(
            "view",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", format!("{AGG}edit"): "true"}),
            &format!("{AGG}view"),
        ),
        role(
            "system:aggregate-to-admin",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", format!("{AGG}admin"): "true"}),
            administrable(),
        ),
        role(
            "system:aggregate-to-edit",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", format!("{AGG}edit"): "true"}),
            editable(),
        ),
        role(
            "system:aggregate-to-view",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults", format!("{AGG}view"): "true"}),
            viewable(),
        ),
        role(
            "system:discovery",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults"}),
            vec![
                json!({"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                "/livez", "/readyz", "/openapi", "/openapi/*", "/version", "/version/"], "verbs": ["get"]}),
            ],
        ),
        role(
            "system:basic-user",
            json!({"kubernetes.io/bootstrapping": "rbac-defaults"}),
            vec![rule(
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                &["create"],
            )],
        ),
    ]
}

fn binding(name: &str, role: &str, group: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]})
}

pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", "system:masters"),
        binding(
            "system:discovery",
            "system:discovery",
            "system:authenticated",
        ),
        binding(
            "system:basic-user",
            "system:basic-user",
            "system:authenticated",
        ),
    ]
}
