//! Who may do what: the one table of role decisions, for every gRPC method (and so every
//! REST route, which transcodes to them), every proxied path and the few other protected
//! routes. The authorization layer decides from here; handlers hold no role literals.
//! A method without a rule is refused (and a unit test fails when one is missing).

use http::Method;
use kairship_wire::routes::{self, Route};

use crate::auth::Role;

/// Whose role a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The role on one instance, named by this (dotted) field of the request message.
    Instance(&'static str),
    /// Any authenticated caller: what the answer shows is filtered per instance by the
    /// caller's roles (lists, search, the caller's own roles).
    Caller,
    /// The role on every instance: the answer covers the whole fleet.
    Fleet,
}

/// One decision: the role needed where `scope` says, and what the request does, for the
/// refusal's words and the audit event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub need: Role,
    pub scope: Scope,
    /// Kubernetes' verb for what it does (get, list, create, update, delete, ...), or the
    /// action's own (restart, cordon).
    pub verb: &'static str,
    /// What it acts on, as an audit `objectRef.resource`.
    pub resource: &'static str,
    pub api_group: &'static str,
    /// Fields of the request message naming the object, when it names one.
    pub namespace_field: Option<&'static str>,
    pub name_field: Option<&'static str>,
    /// Answered by whichever replica the caller reached, never passed to the instance's
    /// owner: the answer is about how the caller reached Kairship, not the instance.
    pub anywhere: bool,
}

impl Rule {
    /// Whether the request changes something (audited always, not only when refused).
    pub fn writes(&self) -> bool {
        !matches!(self.verb, "get" | "list" | "watch")
    }

    /// "create workloads", for refusals.
    pub fn action(&self) -> String {
        format!("{} {}", self.verb, self.resource)
    }
}

const KAIRSHIP: &str = "kairship.io";
const KARMADA: &str = "";

const fn rule(need: Role, scope: Scope, verb: &'static str, resource: &'static str) -> Rule {
    Rule {
        need,
        scope,
        verb,
        resource,
        api_group: KARMADA,
        namespace_field: None,
        name_field: None,
        anywhere: false,
    }
}

const fn named(mut r: Rule, field: &'static str) -> Rule {
    r.name_field = Some(field);
    r
}

const fn in_namespace(mut r: Rule, field: &'static str) -> Rule {
    r.namespace_field = Some(field);
    r
}

const fn anywhere(mut r: Rule) -> Rule {
    r.anywhere = true;
    r
}

const fn kairship(mut r: Rule) -> Rule {
    r.api_group = KAIRSHIP;
    r
}

const INSTANCE: Scope = Scope::Instance("instance");
use Role::{Admin, Edit, View};

/// Every gRPC method of the API with its rule, by full path.
pub const GRPC: &[(&str, Rule)] = &[
    (
        "/kairship.v1alpha1.InstanceService/CreateInstance",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("instance.metadata.name"),
                "create",
                "instances",
            ),
            "instance.metadata.name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/GetInstance",
        kairship(named(
            rule(View, Scope::Instance("name"), "get", "instances"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/ListInstances",
        kairship(rule(View, Scope::Caller, "list", "instances")),
    ),
    (
        "/kairship.v1alpha1.InstanceService/UpdateInstance",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("instance.metadata.name"),
                "update",
                "instances",
            ),
            "instance.metadata.name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/DeleteInstance",
        kairship(named(
            rule(Admin, Scope::Instance("name"), "delete", "instances"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/GetInstanceStats",
        kairship(named(
            rule(View, Scope::Instance("name"), "get", "instances/stats"),
            "name",
        )),
    ),
    (
        // Anyone who may read the instance through the proxy may have a kubeconfig for it.
        "/kairship.v1alpha1.InstanceService/GetKubeconfig",
        kairship(anywhere(named(
            rule(View, Scope::Instance("name"), "get", "instances/kubeconfig"),
            "name",
        ))),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/ListWorkloadPods",
        in_namespace(
            named(rule(View, INSTANCE, "get", "workloads/pods"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/GetPodLogs",
        in_namespace(
            named(rule(View, INSTANCE, "get", "pods/log"), "pod"),
            "namespace",
        ),
    ),
    (
        // Each step is read as the caller besides: the instance decides what is shown.
        "/kairship.v1alpha1.WorkloadService/TraceResource",
        in_namespace(
            named(rule(View, INSTANCE, "get", "trace"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/ListWorkloadEvents",
        in_namespace(
            named(rule(View, INSTANCE, "get", "workloads/events"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/PromoteWorkload",
        in_namespace(
            named(rule(Edit, INSTANCE, "promote", "workloads"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.InstanceService/ListComponents",
        kairship(named(
            rule(
                View,
                Scope::Instance("name"),
                "list",
                "instances/components",
            ),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/RestartComponent",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "restart",
                "instances/components",
            ),
            "component",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/GetComponentLogs",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "get",
                "instances/components/log",
            ),
            "component",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/HibernateInstance",
        kairship(named(
            rule(Admin, Scope::Instance("name"), "hibernate", "instances"),
            "name",
        )),
    ),
    (
        // Any request the caller may send wakes it too.
        "/kairship.v1alpha1.InstanceService/WakeInstance",
        kairship(named(
            rule(View, Scope::Instance("name"), "wake", "instances"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/RenewCertificates",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "renew",
                "instances/certificates",
            ),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/CreateBackup",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "create",
                "instances/backups",
            ),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/ListBackups",
        kairship(named(
            rule(View, Scope::Instance("name"), "list", "instances/backups"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/GetBackup",
        kairship(named(
            rule(View, Scope::Instance("name"), "get", "instances/backups"),
            "backup",
        )),
    ),
    (
        "/kairship.v1alpha1.InstanceService/DeleteBackup",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "delete",
                "instances/backups",
            ),
            "backup",
        )),
    ),
    // The instance restored into; a backup of another instance needs its admin too
    // (checked by the handler).
    (
        "/kairship.v1alpha1.InstanceService/RestoreBackup",
        kairship(named(
            rule(
                Admin,
                Scope::Instance("name"),
                "restore",
                "instances/backups",
            ),
            "backup",
        )),
    ),
    (
        "/kairship.v1alpha1.ClusterService/ListClusters",
        rule(View, INSTANCE, "list", "clusters"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/GetCluster",
        named(rule(View, INSTANCE, "get", "clusters"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/JoinCluster",
        named(rule(Admin, INSTANCE, "create", "clusters"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/CreateRegistrationToken",
        kairship(rule(Admin, INSTANCE, "create", "registrationtokens")),
    ),
    (
        "/kairship.v1alpha1.ClusterService/RemoveCluster",
        named(rule(Admin, INSTANCE, "delete", "clusters"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/CordonCluster",
        named(rule(Admin, INSTANCE, "cordon", "clusters"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/UncordonCluster",
        named(rule(Admin, INSTANCE, "uncordon", "clusters"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/ListClusterNodes",
        named(rule(View, INSTANCE, "list", "clusters/nodes"), "name"),
    ),
    (
        "/kairship.v1alpha1.ClusterService/SetClusterTaints",
        named(rule(Admin, INSTANCE, "update", "clusters/taints"), "name"),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/ListWorkloads",
        in_namespace(rule(View, INSTANCE, "list", "workloads"), "namespace"),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/GetWorkload",
        in_namespace(
            named(rule(View, INSTANCE, "get", "workloads"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/CreateWorkload",
        rule(Edit, INSTANCE, "create", "workloads"),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/UpdateWorkload",
        rule(Edit, INSTANCE, "update", "workloads"),
    ),
    (
        "/kairship.v1alpha1.WorkloadService/DeleteWorkload",
        in_namespace(
            named(rule(Edit, INSTANCE, "delete", "workloads"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.PolicyService/ListPolicies",
        in_namespace(rule(View, INSTANCE, "list", "policies"), "namespace"),
    ),
    (
        "/kairship.v1alpha1.PolicyService/GetPolicy",
        in_namespace(
            named(rule(View, INSTANCE, "get", "policies"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.PolicyService/CreatePolicy",
        rule(Edit, INSTANCE, "create", "policies"),
    ),
    (
        "/kairship.v1alpha1.PolicyService/UpdatePolicy",
        rule(Edit, INSTANCE, "update", "policies"),
    ),
    (
        "/kairship.v1alpha1.PolicyService/DeletePolicy",
        in_namespace(
            named(rule(Edit, INSTANCE, "delete", "policies"), "name"),
            "namespace",
        ),
    ),
    (
        "/kairship.v1alpha1.SupervisorService/ListActors",
        rule(View, Scope::Caller, "list", "actors"),
    ),
    (
        "/kairship.v1alpha1.SupervisorService/RestartInstance",
        kairship(named(
            rule(Admin, Scope::Instance("name"), "restart", "instances"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.SupervisorService/ListControllers",
        kairship(named(
            rule(
                View,
                Scope::Instance("name"),
                "list",
                "instances/controllers",
            ),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.SupervisorService/GetLeader",
        rule(View, Scope::Caller, "get", "leader"),
    ),
    (
        "/kairship.v1alpha1.AccessService/GetCaller",
        rule(View, Scope::Caller, "get", "caller"),
    ),
    (
        "/kairship.v1alpha1.SearchService/Search",
        rule(View, Scope::Caller, "list", "search"),
    ),
    // A rollout plan reads every instance a rollout could select: for callers who see
    // the whole fleet (a role on every instance); nothing is written.
    (
        "/kairship.v1alpha1.RolloutService/PlanRollout",
        kairship(rule(View, Scope::Fleet, "plan", "rollouts")),
    ),
    // Rollouts change every instance they select: starting, pausing, resuming or aborting
    // one needs the admin role on every instance; reading them, a role on every instance.
    (
        "/kairship.v1alpha1.RolloutService/StartRollout",
        kairship(named(
            rule(Admin, Scope::Fleet, "create", "rollouts"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.RolloutService/ListRollouts",
        kairship(rule(View, Scope::Fleet, "list", "rollouts")),
    ),
    (
        "/kairship.v1alpha1.RolloutService/GetRollout",
        kairship(named(rule(View, Scope::Fleet, "get", "rollouts"), "name")),
    ),
    (
        "/kairship.v1alpha1.RolloutService/PauseRollout",
        kairship(named(
            rule(Admin, Scope::Fleet, "pause", "rollouts"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.RolloutService/ResumeRollout",
        kairship(named(
            rule(Admin, Scope::Fleet, "resume", "rollouts"),
            "name",
        )),
    ),
    (
        "/kairship.v1alpha1.RolloutService/AbortRollout",
        kairship(named(
            rule(Admin, Scope::Fleet, "abort", "rollouts"),
            "name",
        )),
    ),
    // Server reflection describes the API, holds no data: any authenticated caller.
    (
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        rule(View, Scope::Caller, "get", "reflection"),
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        rule(View, Scope::Caller, "get", "reflection"),
    ),
];

/// The rule of a gRPC method, by its full path.
pub fn grpc(path: &str) -> Option<&'static Rule> {
    GRPC.iter().find(|(p, _)| *p == path).map(|(_, r)| r)
}

/// Protected HTTP routes that are not REST methods nor the proxy: the chaos report (it
/// names every instance) and `/metrics` on the HTTPS port (likewise).
pub fn http(path: &str) -> Option<Rule> {
    let fleet = |resource| Some(rule(View, Scope::Fleet, "get", resource));
    if path == "/metrics" {
        return fleet("metrics");
    }
    if path.starts_with(&format!("{}/chaos/", crate::api::API_PREFIX)) {
        return fleet("chaosreports");
    }
    None
}

/// The least role for a proxied request: the roles table's where it names the kind
/// (`kairship_wire::roles`); otherwise reads are view's, writes in workload namespaces
/// edit's, and the rest admin's. Namespaces an operator labels system ones are the
/// instance's RBAC's to refuse (this sees the path alone).
fn need(
    group: &str,
    plural: &str,
    namespace: Option<&str>,
    namespaced: bool,
    writes: bool,
) -> Role {
    use kairship_wire::roles::{least, Class};
    let class = match namespaced {
        true => Class::of(namespace, false),
        false => Class::Cluster,
    };
    if let Some(r) = least(group, plural, class, writes) {
        return r.into();
    }
    match (writes, class) {
        (false, _) => Role::View,
        (true, Class::Workload) => Role::Edit,
        (true, _) => Role::Admin,
    }
}

/// The rule of a request through the proxy to an instance's own API, by [`need`].
/// Through Karmada's cluster proxy, what it reaches on the member decides (the member's
/// own bindings of Kairship's groups then decide again, there).
pub fn proxy(method: &Method, path: &str, watching: bool) -> ProxyRule {
    if let Some(on_member) = member_path(path) {
        let mut r = proxy(method, on_member, watching);
        r.on_member = true;
        return r;
    }
    let (plural, group, namespace, name, subresource, namespaced) = match routes::parse(path) {
        Route::Resource(rp) => {
            let ns = rp.namespace.is_some();
            (
                rp.plural,
                rp.group,
                rp.namespace,
                rp.name,
                rp.subresource,
                ns,
            )
        }
        _ => (String::new(), String::new(), None, None, None, false),
    };
    let verb = match *method {
        Method::GET | Method::HEAD | Method::OPTIONS if watching => "watch",
        Method::GET | Method::HEAD | Method::OPTIONS if name.is_none() && !plural.is_empty() => {
            "list"
        }
        Method::GET | Method::HEAD | Method::OPTIONS => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_none() => "deletecollection",
        Method::DELETE => "delete",
        _ => "change",
    };
    // exec, attach and port-forward are `create` whatever the method (a WebSocket upgrade
    // is a GET), as kube-apiserver authorizes them.
    let verb = match subresource.as_deref() {
        Some("exec" | "attach" | "portforward") => "create",
        _ => verb,
    };
    let writes = !matches!(verb, "get" | "list" | "watch");
    let need = need(&group, &plural, namespace.as_deref(), namespaced, writes);
    ProxyRule {
        need,
        verb,
        resource: plural,
        api_group: group,
        namespace,
        name,
        subresource,
        on_member: false,
    }
}

/// A proxied request's decision and what it addresses (the audit's `objectRef`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRule {
    pub need: Role,
    pub verb: &'static str,
    /// Empty for paths that are not a resource (discovery, `/version`).
    pub resource: String,
    pub api_group: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Through Karmada's cluster proxy, on a member cluster.
    pub on_member: bool,
}

impl ProxyRule {
    pub fn writes(&self) -> bool {
        !matches!(self.verb, "get" | "list" | "watch")
    }

    /// "create deployments on a member cluster", for refusals.
    pub fn action(&self) -> String {
        let what = match self.resource.as_str() {
            "" => "the API",
            r => r,
        };
        let verb = match self.verb {
            "get" | "list" | "watch" => "read",
            v => v,
        };
        match self.on_member {
            true => format!("{verb} {what} on a member cluster"),
            false => format!("{verb} {what}"),
        }
    }
}

/// The member path of a request through Karmada's cluster proxy
/// (`/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy/{path}`).
fn member_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/apis/cluster.karmada.io/v1alpha1/clusters/")?;
    let (_, after) = rest.split_once('/')?;
    let member = after.strip_prefix("proxy")?;
    match member {
        "" => Some("/"),
        m if m.starts_with('/') => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
