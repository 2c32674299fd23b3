//! What stands beside a resource template, shared by the workload views and the trace:
//! which policies and bindings the caller may see (`Beside`), the policies as Karmada's
//! claim rules read them, the claim Karmada recorded on a template, and a binding as a
//! placement.

use kairship_wire::policy_claim;
use kube::api::DynamicObject;
use serde_json::{json, Value};

use crate::api::convert;
use crate::api::request::{OnInstance, Reads, Verb};
use crate::cache::caches::Kind;
use crate::proto;

/// What the caller may see beside a workload, as the instance decides: the policies and
/// bindings of each namespace (and the cluster-wide policies); with the policies' selectors
/// decoded once for the request.
pub(super) struct Beside {
    allowed: std::collections::BTreeMap<(Kind, String), bool>,
    pub(super) policies: std::sync::OnceLock<Vec<Picker>>,
}

/// A policy, with what Karmada's claim rules read of it (name, priority, selectors).
pub(super) struct Picker {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
    pub policy: Value,
}

impl Beside {
    /// Reviews the kinds shown beside workloads in `namespaces` (decisions are cached by
    /// the instance's access reviews, so a page costs a few reviews at most).
    pub(super) async fn of(on: &OnInstance, namespaces: impl IntoIterator<Item = String>) -> Self {
        let mut seen = std::collections::BTreeMap::new();
        let namespaces: std::collections::BTreeSet<String> = namespaces.into_iter().collect();
        for kind in Kind::POLICIES.into_iter().chain([Kind::ResourceBinding]) {
            match kind.namespaced() {
                true => {
                    for ns in &namespaces {
                        let ok = on.may(Verb::List, kind, Some(ns)).await;
                        seen.insert((kind, ns.clone()), ok);
                    }
                }
                false => {
                    let ok = on.may(Verb::List, kind, None).await;
                    seen.insert((kind, String::new()), ok);
                }
            }
        }
        Self {
            allowed: seen,
            policies: std::sync::OnceLock::new(),
        }
    }

    pub(super) fn allows(&self, kind: Kind, namespace: &str) -> bool {
        let ns = if kind.namespaced() { namespace } else { "" };
        self.allowed
            .get(&(kind, ns.to_string()))
            .copied()
            .unwrap_or(false)
    }
}

/// The policies of the instance, decoded once for a request.
pub(super) fn pickers(reads: &Reads<'_>) -> Vec<Picker> {
    let mut out = Vec::new();
    for pk in Kind::POLICIES {
        let Ok(store) = reads.store(pk) else {
            continue;
        };
        for p in store.state() {
            let Ok(decoded) = p.decode() else {
                continue;
            };
            let d = &decoded.data;
            out.push(Picker {
                kind: pk,
                namespace: pk
                    .namespaced()
                    .then(|| p.namespace().unwrap_or_default().to_string()),
                name: p.name().to_string(),
                policy: json!({
                    "metadata": {"name": p.name(), "deletionTimestamp": decoded.metadata.deletion_timestamp},
                    "spec": {"priority": d.pointer("/spec/priority"), "resourceSelectors": d.pointer("/spec/resourceSelectors")},
                }),
            });
        }
    }
    out
}

/// Which propagation policy Karmada recorded as claiming a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Claim {
    Namespaced(String, String),
    Cluster(String),
}

/// The claim Karmada recorded: names in annotations (Karmada >= 1.7; labels before it).
pub(super) fn claim_of(o: &DynamicObject) -> Option<Claim> {
    let get = |key: &str| {
        [&o.metadata.annotations, &o.metadata.labels]
            .into_iter()
            .flatten()
            .find_map(|m| m.get(key).cloned())
    };
    if let Some(name) = get(policy_claim::PP_NAME) {
        let ns = get(policy_claim::PP_NAMESPACE)
            .or_else(|| o.metadata.namespace.clone())
            .unwrap_or_default();
        return Some(Claim::Namespaced(ns, name));
    }
    get(policy_claim::CPP_NAME).map(Claim::Cluster)
}

/// A (Cluster)ResourceBinding named `name` as a placement: where Karmada scheduled the
/// template, what each cluster reported, the binding's conditions and evictions.
pub(super) fn placement_of(name: String, rb: &Value) -> proto::Placement {
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let arr = |p: &str| {
        rb.pointer(p)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    proto::Placement {
        binding_name: name,
        clusters: arr("/spec/clusters")
            .iter()
            .map(|c| proto::TargetCluster {
                name: s(c, "name"),
                replicas: c
                    .get("replicas")
                    .and_then(Value::as_i64)
                    .and_then(|r| i32::try_from(r).ok())
                    .unwrap_or_default(),
            })
            .collect(),
        aggregated_status: arr("/status/aggregatedStatus")
            .iter()
            .map(|a| {
                let count = |k: &str| {
                    a.pointer(&format!("/status/{k}"))
                        .and_then(Value::as_i64)
                        .and_then(|r| i32::try_from(r).ok())
                        .unwrap_or_default()
                };
                proto::AggregatedStatus {
                    cluster_name: s(a, "clusterName"),
                    applied: a.get("applied").and_then(Value::as_bool).unwrap_or(false),
                    health: s(a, "health"),
                    replicas: count("replicas"),
                    ready_replicas: count("readyReplicas"),
                }
            })
            .collect(),
        conditions: convert::conditions(&rb["status"]["conditions"]),
        overrides: Vec::new(),
        evictions: super::failover::in_progress(rb),
    }
}

/// Karmada's Work.
pub(super) fn work_resource() -> kube::discovery::ApiResource {
    kube::discovery::ApiResource {
        group: "work.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "work.karmada.io/v1alpha1".into(),
        kind: "Work".into(),
        plural: "works".into(),
    }
}

/// The Works in cluster `cluster`'s execution namespace (`karmada-es-<cluster>`), read live
/// as the caller: Works carry the manifests they propagate, Secrets' data included, so
/// only those the instance lets read them do.
pub(super) async fn works_of(
    on: &OnInstance,
    cluster: &str,
) -> Result<kube::api::ObjectList<DynamicObject>, crate::error::ApiError> {
    let works = work_resource();
    let what = format!(
        "instance {:?}: the Works of cluster {cluster}",
        on.instance()
    );
    let namespace = format!("karmada-es-{cluster}");
    on.live(&what, |client| {
        let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, &namespace, &works);
        async move { api.list(&Default::default()).await }
    })
    .await
}
