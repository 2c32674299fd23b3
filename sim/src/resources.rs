//! What an API server serves: resource definitions (group, versions, kind, plural, scope,
//! subresources, printer columns). Built-in kinds are described here by their facts;
//! custom kinds come from `CustomResourceDefinition` objects, through one code path for
//! the CRDs a server starts with and the ones clients create.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

pub use kairship_wire::resource::{def_from_crd, PrinterColumn, ResourceDef};

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    status: bool,
}

const fn b(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    status: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        short,
        namespaced,
        status,
    }
}

/// Served by every simulated API server, host and Karmada alike.
const COMMON: &[Builtin] = &[
    b("", "v1", "Namespace", "namespaces", &["ns"], false, true),
    b("", "v1", "ConfigMap", "configmaps", &["cm"], true, false),
    b("", "v1", "Secret", "secrets", &[], true, false),
    b("", "v1", "Service", "services", &["svc"], true, true),
    b(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        &["sa"],
        true,
        false,
    ),
    b("", "v1", "Event", "events", &["ev"], true, false),
    // Stored, not enforced (no quota admission is simulated).
    b(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        &["quota"],
        true,
        true,
    ),
    b(
        "",
        "v1",
        "LimitRange",
        "limitranges",
        &["limits"],
        true,
        false,
    ),
    // Served without a kubelet too: on a karmada-apiserver, Pods simply stay Pending,
    // and the Node list is empty (members' nodes are made by the simulated kubelets).
    b("", "v1", "Pod", "pods", &["po"], true, true),
    b("", "v1", "Node", "nodes", &["no"], false, true),
    b(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        &["rc"],
        true,
        true,
    ),
    // Every kube-apiserver serves the aggregation API (empty here: the simulator's
    // aggregated kinds are built in).
    b(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        &[],
        false,
        true,
    ),
    b(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        &["rs"],
        true,
        true,
    ),
    b(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        &["deploy"],
        true,
        true,
    ),
    b(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        &["sts"],
        true,
        true,
    ),
    b("apps", "v1", "DaemonSet", "daemonsets", &["ds"], true, true),
    b("batch", "v1", "Job", "jobs", &[], true, true),
    b(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        &[],
        true,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        &[],
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        &[],
        true,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        &[],
        true,
        false,
    ),
    // Reviews are answered, never stored (see `rbac::review`).
    b(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        &[],
        false,
        false,
    ),
    b(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        &[],
        false,
        false,
    ),
    // Who the caller is, as `kubectl auth whoami` asks (answered, never stored).
    b(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        &[],
        false,
        false,
    ),
    // Admission policies, which client writes are admitted by (store::admission).
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        &[],
        false,
        true,
    ),
    b(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        &[],
        false,
        false,
    ),
    b(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
        true,
    ),
];

/// Served by karmada-aggregated-apiserver, not a CRD (see shared/karmada/README.md).
const KARMADA_AGGREGATED: &[Builtin] = &[b(
    "cluster.karmada.io",
    "v1alpha1",
    "Cluster",
    "clusters",
    &[],
    false,
    true,
)];

fn builtin_def(x: &Builtin) -> ResourceDef {
    let mut printer_columns = Vec::new();
    if x.kind == "Cluster" {
        printer_columns = vec![
            PrinterColumn::new("VERSION", "string", ".status.kubernetesVersion", 0),
            PrinterColumn::new("MODE", "string", ".spec.syncMode", 0),
            PrinterColumn::new(
                "READY",
                "string",
                ".status.conditions[?(@.type==\"Ready\")].status",
                0,
            ),
            PrinterColumn::new("AGE", "date", ".metadata.creationTimestamp", 0),
        ];
    }
    ResourceDef {
        group: x.group.to_string(),
        versions: vec![x.version.to_string()],
        kind: x.kind.to_string(),
        plural: x.plural.to_string(),
        singular: x.kind.to_lowercase(),
        short_names: x.short.iter().map(|s| s.to_string()).collect(),
        // kube-apiserver's `all`: what `kubectl get all` lists (no ConfigMaps, Secrets or
        // Nodes).
        categories: if [
            "pods",
            "services",
            "replicationcontrollers",
            "deployments",
            "replicasets",
            "statefulsets",
            "daemonsets",
            "jobs",
        ]
        .contains(&x.plural)
        {
            vec!["all".to_string()]
        } else {
            vec![]
        },
        namespaced: x.namespaced,
        status_subresource: x.status,
        printer_columns,
        builtin: true,
        crd: None,
    }
}

/// Which set of kinds an API server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// The global services cluster.
    Host,
    /// A karmada-apiserver (with karmada-aggregated-apiserver).
    Karmada,
    /// A member cluster's kube-apiserver (holds what Karmada propagates, and Nodes).
    Member,
}

/// Facts of a CRD a server starts with, turned into a CRD object at start-up.
struct CrdFacts {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    namespaced: bool,
    /// (version, storage, status subresource)
    versions: &'static [(&'static str, bool, bool)],
    columns: &'static [(&'static str, &'static str)],
}

const READY_COL: (&str, &str) = ("READY", ".status.conditions[?(@.type==\"Ready\")].status");
const PRIO_COLS: &[(&str, &str)] = &[
    ("CONFLICT-RESOLUTION", ".spec.conflictResolution"),
    ("PRIORITY", ".spec.priority"),
];
const BINDING_COLS: &[(&str, &str)] = &[
    (
        "SCHEDULED",
        ".status.conditions[?(@.type==\"Scheduled\")].status",
    ),
    (
        "FULLYAPPLIED",
        ".status.conditions[?(@.type==\"FullyApplied\")].status",
    ),
];
const BINDING_VERSIONS: &[(&str, bool, bool)] =
    &[("v1alpha2", true, true), ("v1alpha1", false, true)];

const HOST_CRDS: &[CrdFacts] = &[CrdFacts {
    group: "operator.karmada.io",
    kind: "Karmada",
    plural: "karmadas",
    short: &[],
    namespaced: true,
    versions: &[("v1alpha1", true, true)],
    columns: &[READY_COL],
}];

const KARMADA_CRDS: &[CrdFacts] = &[
    CrdFacts {
        group: "policy.karmada.io",
        kind: "PropagationPolicy",
        plural: "propagationpolicies",
        short: &["pp"],
        namespaced: true,
        versions: &[("v1alpha1", true, false)],
        columns: PRIO_COLS,
    },
    CrdFacts {
        group: "policy.karmada.io",
        kind: "ClusterPropagationPolicy",
        plural: "clusterpropagationpolicies",
        short: &["cpp"],
        namespaced: false,
        versions: &[("v1alpha1", true, false)],
        columns: PRIO_COLS,
    },
    CrdFacts {
        group: "policy.karmada.io",
        kind: "ClusterTaintPolicy",
        plural: "clustertaintpolicies",
        short: &[],
        namespaced: false,
        versions: &[("v1alpha1", true, false)],
        columns: &[],
    },
    CrdFacts {
        group: "policy.karmada.io",
        kind: "OverridePolicy",
        plural: "overridepolicies",
        short: &["op"],
        namespaced: true,
        versions: &[("v1alpha1", true, false)],
        columns: &[],
    },
    CrdFacts {
        group: "policy.karmada.io",
        kind: "ClusterOverridePolicy",
        plural: "clusteroverridepolicies",
        short: &["cop"],
        namespaced: false,
        versions: &[("v1alpha1", true, false)],
        columns: &[],
    },
    CrdFacts {
        group: "work.karmada.io",
        kind: "ResourceBinding",
        plural: "resourcebindings",
        short: &["rb"],
        namespaced: true,
        versions: BINDING_VERSIONS,
        columns: BINDING_COLS,
    },
    CrdFacts {
        group: "work.karmada.io",
        kind: "ClusterResourceBinding",
        plural: "clusterresourcebindings",
        short: &["crb"],
        namespaced: false,
        versions: BINDING_VERSIONS,
        columns: BINDING_COLS,
    },
    CrdFacts {
        group: "work.karmada.io",
        kind: "Work",
        plural: "works",
        short: &["wk"],
        namespaced: true,
        versions: &[("v1alpha1", true, true)],
        columns: &[(
            "APPLIED",
            ".status.conditions[?(@.type==\"Applied\")].status",
        )],
    },
];

impl CrdFacts {
    fn to_object(&self) -> Value {
        let name = format!("{}.{}", self.plural, self.group);
        let versions: Vec<Value> = self
            .versions
            .iter()
            .map(|(v, storage, status)| {
                let mut cols: Vec<Value> = self
                    .columns
                    .iter()
                    .map(|(n, p)| json!({"name": n, "type": "string", "jsonPath": p}))
                    .collect();
                // As Karmada's CRDs do: an AGE column after their own, none without any.
                if !cols.is_empty() {
                    cols.push(json!({"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}));
                }
                let mut ver = json!({
                    "name": v, "served": true, "storage": storage,
                    "schema": {"openAPIV3Schema": crate::openapi::karmada::stored(&name, v)},
                    "additionalPrinterColumns": cols,
                });
                if *status {
                    ver["subresources"] = json!({"status": {}});
                }
                ver
            })
            .collect();
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": self.group,
                "names": {
                    "kind": self.kind, "listKind": format!("{}List", self.kind),
                    "plural": self.plural, "singular": self.kind.to_lowercase(),
                },
                "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
                "versions": versions,
            }
        });
        // As Karmada's CRDs: short names where they have some, and every one but
        // ClusterTaintPolicy in the karmada-io category.
        if !self.short.is_empty() {
            crd["spec"]["names"]["shortNames"] = json!(self.short);
        }
        if self.kind != "ClusterTaintPolicy" {
            crd["spec"]["names"]["categories"] = json!(["karmada-io"]);
        }
        crd
    }
}

/// Built-in resources of a flavor, and the CRD objects it starts with.
pub fn initial(flavor: Flavor) -> (Vec<ResourceDef>, Vec<Value>) {
    let mut defs: Vec<ResourceDef> = COMMON.iter().map(builtin_def).collect();
    let crds = match flavor {
        Flavor::Host => HOST_CRDS,
        Flavor::Karmada => {
            defs.extend(KARMADA_AGGREGATED.iter().map(builtin_def));
            KARMADA_CRDS
        }
        Flavor::Member => &[],
    };
    (defs, crds.iter().map(CrdFacts::to_object).collect())
}

/// Access reviews are answered, never stored: `create` is their only verb.
pub fn is_review(def: &ResourceDef) -> bool {
    def.group == "authorization.k8s.io"
        || (def.group == "authentication.k8s.io" && def.plural == "selfsubjectreviews")
}

/// Index of served resources, looked up by the pieces of a request path.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    by_group_plural: BTreeMap<(String, String), Arc<ResourceDef>>,
}

impl Registry {
    pub fn new(defs: Vec<ResourceDef>) -> Self {
        let mut r = Self::default();
        for d in defs {
            r.insert(d);
        }
        r
    }

    pub fn insert(&mut self, def: ResourceDef) {
        self.by_group_plural
            .insert((def.group.clone(), def.plural.clone()), Arc::new(def));
    }

    pub fn remove_crd(&mut self, crd_name: &str) -> Option<Arc<ResourceDef>> {
        let key = self
            .by_group_plural
            .iter()
            .find(|(_, d)| d.crd.as_deref() == Some(crd_name))
            .map(|(k, _)| k.clone())?;
        self.by_group_plural.remove(&key)
    }

    /// The resource served at `group/version/plural`, if that version is served.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.by_group_plural
            .get(&(group.to_string(), plural.to_string()))
            .filter(|d| d.versions.iter().any(|v| v == version))
            .cloned()
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.by_group_plural.values()
    }

    /// Groups with their served versions (preferred first), core group excluded.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for d in self.all().filter(|d| !d.group.is_empty()) {
            let vs = out.entry(d.group.clone()).or_default();
            for v in &d.versions {
                if !vs.contains(v) {
                    vs.push(v.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_crds_round_trip_into_definitions() {
        let (_, crds) = initial(Flavor::Karmada);
        let defs: Vec<ResourceDef> = crds
            .iter()
            .map(|c| def_from_crd(c).expect("valid seeded CRD"))
            .collect();
        let rb = defs
            .iter()
            .find(|d| d.plural == "resourcebindings")
            .expect("rb");
        assert_eq!(rb.versions, vec!["v1alpha2", "v1alpha1"]);
        assert!(rb.status_subresource && rb.namespaced);
        let cpp = defs
            .iter()
            .find(|d| d.plural == "clusterpropagationpolicies")
            .expect("cpp");
        assert!(!cpp.namespaced && !cpp.status_subresource);
        // CONFLICT-RESOLUTION, PRIORITY and AGE, as Karmada's CRD declares them.
        assert_eq!(cpp.printer_columns.len(), 3);
        assert_eq!(cpp.printer_columns[2].kind, "date");
    }
}
