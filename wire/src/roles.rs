//! What Kairship's roles mean inside a Karmada instance: the one table that Kairship's
//! proxy decides from, that `deploy/instance-rbac.yaml` and the guardrail policy implement
//! on the instance itself, that the role-matrix tests check on the simulator and on a
//! real karmada-apiserver, and that the README shows.
//!
//! A Karmada control plane is not a Kubernetes cluster: its system namespaces hold the
//! keys to every member (`karmada-cluster/<member>` is a token bound to everything on the
//! member, `<member>-impersonator` may impersonate anyone there), and a Work carries the
//! full manifest it propagates, Secrets' data included. So view and edit never read
//! Secrets outside the workload namespaces, never read Works, and never write
//! cluster-scoped policies (which select objects in every namespace); edit writes only in
//! workload namespaces.

/// Kairship's roles on an instance, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    View,
    Edit,
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::View, Role::Edit, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::View => "view",
            Role::Edit => "edit",
            Role::Admin => "admin",
        }
    }

    /// The group Kairship adds to the caller's groups on the instance for this role.
    pub fn group(self) -> &'static str {
        match self {
            Role::View => "kairship:view",
            Role::Edit => "kairship:edit",
            Role::Admin => "kairship:admin",
        }
    }
}

/// Karmada's and Kubernetes' own system namespaces on an instance. An operator adds
/// others by labelling them [`SYSTEM_LABEL`]`=true`.
pub const SYSTEM_NAMESPACES: [&str; 5] = [
    "karmada-system",
    "karmada-cluster",
    "kube-system",
    "kube-public",
    "kube-node-lease",
];

/// The prefix of Karmada's execution namespaces (`karmada-es-<member>`), where the Works
/// for each member live.
pub const EXECUTION_PREFIX: &str = "karmada-es-";

/// The label that makes a namespace a system namespace (value `"true"`).
pub const SYSTEM_LABEL: &str = "kairship.io/system-namespace";

/// The label that keeps Kairship's edit role out of a workload namespace (value
/// `"false"`): how an operator narrows editors on one instance.
pub const EDIT_LABEL: &str = "kairship.io/edit";

/// Where an object lives, as the roles tell namespaces apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Where tenants' workloads and their policies live: every other namespace.
    Workload,
    /// Karmada's and Kubernetes' own, and those an operator labels.
    System,
    /// `karmada-es-*`: the Works Karmada made for each member.
    Execution,
    /// Cluster-scoped objects.
    Cluster,
}

impl Class {
    pub const NAMESPACES: [Class; 3] = [Class::Workload, Class::System, Class::Execution];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Workload => "workload",
            Class::System => "system",
            Class::Execution => "execution",
            Class::Cluster => "cluster-scoped",
        }
    }

    /// The class of `namespace` (none: cluster-scoped); `labelled` says whether the
    /// namespace carries [`SYSTEM_LABEL`]`=true`.
    pub fn of(namespace: Option<&str>, labelled: bool) -> Class {
        match namespace {
            None | Some("") => Class::Cluster,
            Some(ns) if ns.starts_with(EXECUTION_PREFIX) => Class::Execution,
            Some(ns) if labelled || SYSTEM_NAMESPACES.contains(&ns) => Class::System,
            Some(_) => Class::Workload,
        }
    }
}

/// What a role may do with a kind in a class of namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    None,
    /// get, list, watch.
    Read,
    /// Read, and create, update, patch, delete.
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::None => "-",
            Access::Read => "read",
            Access::Write => "write",
        }
    }

    pub fn allows(self, writes: bool) -> bool {
        match self {
            Access::None => false,
            Access::Read => !writes,
            Access::Write => true,
        }
    }
}

/// A group of kinds the roles treat alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// How the README names it.
    pub what: &'static str,
    /// (API group, resource) of its kinds.
    pub resources: &'static [(&'static str, &'static str)],
    /// Access per role (view, edit, admin): for namespaced kinds in workload, system and
    /// execution namespaces; for cluster-scoped kinds the first of each.
    pub view: [Access; 3],
    pub edit: [Access; 3],
    pub admin: [Access; 3],
    pub namespaced: bool,
    /// Why, for the README.
    pub why: &'static str,
}

use Access::{None as No, Read as R, Write as W};

/// The table. A kind in none of its rows is Kubernetes' business alone: view reads what
/// Kubernetes' `view` reads, edit writes in workload namespaces what Kubernetes' `edit`
/// writes, admin is `cluster-admin`.
pub const TABLE: &[Row] = &[
    Row {
        what: "Workloads and their configuration (Deployments, StatefulSets, Jobs, Services, ConfigMaps, ...)",
        resources: &[
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
            ("", "services"),
            ("", "configmaps"),
        ],
        view: [R, R, R],
        edit: [W, R, R],
        admin: [W, W, W],
        namespaced: true,
        why: "edit writes where the workloads live; the system namespaces run Karmada itself",
    },
    Row {
        what: "Secrets",
        resources: &[("", "secrets")],
        view: [No, No, No],
        edit: [W, No, No],
        admin: [W, W, W],
        namespaced: true,
        why: "the system namespaces hold every member's credentials and the bootstrap tokens",
    },
    Row {
        what: "PropagationPolicies, OverridePolicies",
        resources: &[
            ("policy.karmada.io", "propagationpolicies"),
            ("policy.karmada.io", "overridepolicies"),
        ],
        view: [R, R, R],
        edit: [W, R, R],
        admin: [W, W, W],
        namespaced: true,
        why: "a policy in a system namespace could propagate its Secrets to a member",
    },
    Row {
        what: "ResourceBindings",
        resources: &[("work.karmada.io", "resourcebindings")],
        view: [R, R, R],
        edit: [R, R, R],
        admin: [W, W, W],
        namespaced: true,
        why: "Karmada writes them; they show where each workload was placed",
    },
    Row {
        what: "Works",
        resources: &[("work.karmada.io", "works")],
        view: [No, No, No],
        edit: [No, No, No],
        admin: [W, W, W],
        namespaced: true,
        why: "a Work carries the manifest it propagates, Secrets' data included; Kairship's views show per-member status from the bindings",
    },
    Row {
        what: "ClusterPropagationPolicies, ClusterOverridePolicies",
        resources: &[
            ("policy.karmada.io", "clusterpropagationpolicies"),
            ("policy.karmada.io", "clusteroverridepolicies"),
        ],
        view: [R, No, No],
        edit: [R, No, No],
        admin: [W, No, No],
        namespaced: false,
        why: "they select objects in every namespace, the system namespaces' Secrets included",
    },
    Row {
        what: "ClusterResourceBindings",
        resources: &[("work.karmada.io", "clusterresourcebindings")],
        view: [R, No, No],
        edit: [R, No, No],
        admin: [W, No, No],
        namespaced: false,
        why: "Karmada writes them",
    },
    Row {
        what: "Clusters (cordoning and taints included)",
        resources: &[("cluster.karmada.io", "clusters")],
        view: [R, No, No],
        edit: [R, No, No],
        admin: [W, No, No],
        namespaced: false,
        why: "a Cluster's endpoint and secret references decide where Karmada sends the member's credentials; its taints steer every tenant's placements",
    },
    Row {
        what: "Namespaces",
        resources: &[("", "namespaces")],
        view: [R, No, No],
        edit: [R, No, No],
        admin: [W, No, No],
        namespaced: false,
        why: "a namespace's labels decide whether it is a system namespace",
    },
];

/// The row of `(group, resource)`, if the table names it.
pub fn row(group: &str, resource: &str) -> Option<&'static Row> {
    TABLE.iter().find(|r| {
        r.resources
            .iter()
            .any(|(g, p)| *g == group && *p == resource)
    })
}

/// What `role` may do with `(group, resource)` in `class`, when the table names it. A
/// namespaced kind in [`Class::Cluster`] is a request across every namespace.
pub fn access(role: Role, group: &str, resource: &str, class: Class) -> Option<Access> {
    let row = row(group, resource)?;
    let by_role = match role {
        Role::View => &row.view,
        Role::Edit => &row.edit,
        Role::Admin => &row.admin,
    };
    Some(match (row.namespaced, class) {
        (false, _) => by_role[0],
        (true, Class::Workload) => by_role[0],
        (true, Class::System) => by_role[1],
        (true, Class::Execution) => by_role[2],
        // Across every namespace (a list or watch with none named): what it may do in all.
        (true, Class::Cluster) => by_role.iter().copied().min().unwrap_or(Access::None),
    })
}

/// The least role that may read (or, `writes`, change) `(group, resource)` in `class`;
/// `None` when the table does not name it (the instance's RBAC alone decides).
pub fn least(group: &str, resource: &str, class: Class, writes: bool) -> Option<Role> {
    row(group, resource)?;
    Role::ALL
        .into_iter()
        .find(|r| access(*r, group, resource, class).is_some_and(|a| a.allows(writes)))
}

/// The table as Markdown, as the README shows it.
pub fn markdown() -> String {
    let mut out = String::from("| Kinds | view | edit | admin | Why |\n|---|---|---|---|---|\n");
    let cell = |a: &[Access; 3], namespaced: bool| match namespaced {
        false => a[0].as_str().to_string(),
        true if a[0] == a[1] && a[1] == a[2] => format!("{} (all)", a[0].as_str()),
        true => format!("{} / {} / {}", a[0].as_str(), a[1].as_str(), a[2].as_str()),
    };
    for r in TABLE {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.what,
            cell(&r.view, r.namespaced),
            cell(&r.edit, r.namespaced),
            cell(&r.admin, r.namespaced),
            r.why
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_classed() {
        assert_eq!(Class::of(Some("shop"), false), Class::Workload);
        assert_eq!(Class::of(Some("shop"), true), Class::System);
        assert_eq!(Class::of(Some("karmada-cluster"), false), Class::System);
        assert_eq!(
            Class::of(Some("karmada-es-member1"), false),
            Class::Execution
        );
        assert_eq!(Class::of(None, false), Class::Cluster);
    }

    #[test]
    fn roles_grow_and_keep_the_keys_from_view_and_edit() {
        for row in TABLE {
            for i in 0..3 {
                assert!(row.view[i] <= row.edit[i], "{}", row.what);
                assert!(row.edit[i] <= row.admin[i], "{}", row.what);
            }
        }
        for class in [Class::System, Class::Execution] {
            assert_eq!(least("", "secrets", class, false), Some(Role::Admin));
        }
        assert_eq!(
            least("", "secrets", Class::Workload, true),
            Some(Role::Edit)
        );
        assert_eq!(
            least("work.karmada.io", "works", Class::Execution, false),
            Some(Role::Admin)
        );
        assert_eq!(
            least(
                "policy.karmada.io",
                "clusterpropagationpolicies",
                Class::Cluster,
                true
            ),
            Some(Role::Admin)
        );
        assert_eq!(
            least("apps", "deployments", Class::System, false),
            Some(Role::View)
        );
        assert_eq!(
            least("apps", "deployments", Class::System, true),
            Some(Role::Admin)
        );
        assert_eq!(least("example.com", "widgets", Class::Workload, true), None);
        assert_eq!(
            least("", "secrets", Class::Cluster, false),
            Some(Role::Admin)
        );
        assert_eq!(
            least("", "configmaps", Class::Cluster, false),
            Some(Role::View)
        );
        assert!(markdown().contains("| Secrets | - (all) | write / - / - | write (all) |"));
    }
}
