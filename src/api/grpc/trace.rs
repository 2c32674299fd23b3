//! TraceResource: how one resource template of an instance got where it is. The
//! propagation policies of its namespace and the cluster's (the one Karmada let claim it,
//! and why each other did not), its (Cluster)ResourceBinding with the scheduling result and
//! conditions, the Work on each target cluster with its state there, and the events of
//! each step. Policies and bindings come from the caches; the template, Works and events
//! are read live as the caller, so the instance's RBAC decides. Nothing of a Secret's
//! values, nor any Work's manifest, is ever put in the answer.

use kairship_wire::policy_claim;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use super::beside::{claim_of, pickers, placement_of, Beside, Claim, Picker};
use super::workload_pods::{about, event};
use crate::api::convert;
use crate::api::request::{OnInstance, Verb};
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto;

/// Events read per namespace (the newest kept by the instance).
const EVENTS_READ: u32 = 500;

/// What a trace names: the template's resource, and whether it lives in a namespace.
struct Resolved {
    resource: ApiResource,
    namespaced: bool,
}

/// A kind every instance serves: group, version, kind, plural, short names, namespaced.
type Known = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    bool,
);

/// Kinds every Karmada instance serves, so the common ones need no discovery.
const KNOWN: &[Known] = &[
    ("apps", "v1", "Deployment", "deployments", &["deploy"], true),
    ("apps", "v1", "StatefulSet", "statefulsets", &["sts"], true),
    ("apps", "v1", "DaemonSet", "daemonsets", &["ds"], true),
    ("apps", "v1", "ReplicaSet", "replicasets", &["rs"], true),
    ("batch", "v1", "Job", "jobs", &[], true),
    ("batch", "v1", "CronJob", "cronjobs", &["cj"], true),
    ("", "v1", "Service", "services", &["svc"], true),
    ("", "v1", "ConfigMap", "configmaps", &["cm"], true),
    ("", "v1", "Secret", "secrets", &[], true),
    ("", "v1", "ServiceAccount", "serviceaccounts", &["sa"], true),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        &["pvc"],
        true,
    ),
    ("", "v1", "Namespace", "namespaces", &["ns"], false),
    (
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        &["ing"],
        true,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        &["netpol"],
        true,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        &["pdb"],
        true,
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        &["hpa"],
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        &[],
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
    ),
];

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: match group {
            "" => version.to_string(),
            g => format!("{g}/{version}"),
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Whether `asked` names a kind by its name, plural or a short name (any case).
fn names(asked: &str, kind: &str, plural: &str, short: &[&str]) -> bool {
    let a = asked.to_ascii_lowercase();
    a == kind.to_ascii_lowercase() || a == plural || short.contains(&a.as_str())
}

/// The resource `req` names: from the kinds every instance serves, else the instance's
/// discovery (read as the caller).
async fn resolve(on: &OnInstance, req: &proto::TraceResourceRequest) -> Result<Resolved, ApiError> {
    if req.kind.is_empty() {
        return Err(ApiError::invalid(
            "kind",
            "name the template's kind (Deployment, svc, ...)",
        ));
    }
    let fits = |g: &str, v: &str| {
        (req.group.is_empty() && req.version.is_empty() || req.group == g)
            && (req.version.is_empty() || req.version == v)
    };
    if let Some((g, v, k, p, _, ns)) = KNOWN
        .iter()
        .find(|(g, v, k, p, s, _)| names(&req.kind, k, p, s) && fits(g, v))
    {
        return Ok(Resolved {
            resource: resource(g, v, k, p),
            namespaced: *ns,
        });
    }
    let what = format!("instance {:?}: the API's kinds", on.instance());
    let discovery = on
        .live(&what, |client| async move {
            kube::discovery::Discovery::new(client).run().await
        })
        .await?;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            let short: Vec<&str> = Vec::new();
            if names(&req.kind, &ar.kind, &ar.plural, &short) && fits(&ar.group, &ar.version) {
                return Ok(Resolved {
                    namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                    resource: ar,
                });
            }
        }
    }
    Err(ApiError::NotFound(format!(
        "instance {:?} serves no kind {:?}{}",
        on.instance(),
        req.kind,
        match (req.group.as_str(), req.version.as_str()) {
            ("", "") => String::new(),
            (g, v) => format!(" in {g}/{v}"),
        }
    )))
}

pub async fn trace(
    on: &OnInstance,
    req: proto::TraceResourceRequest,
) -> Result<proto::Trace, ApiError> {
    check_name("name", &req.name)?;
    if !req.namespace.is_empty() {
        check_name("namespace", &req.namespace)?;
    }
    let r = resolve(on, &req).await?;
    if r.namespaced && req.namespace.is_empty() {
        return Err(ApiError::invalid(
            "namespace",
            format!(
                "{} is namespaced: name the template's namespace",
                r.resource.kind
            ),
        ));
    }
    let ns = if r.namespaced {
        req.namespace.as_str()
    } else {
        ""
    };
    let what = format!(
        "instance {:?}: {} {}",
        on.instance(),
        r.resource.kind,
        match ns {
            "" => req.name.clone(),
            ns => format!("{ns}/{}", req.name),
        }
    );
    let template: DynamicObject = on
        .live(&what, |client| {
            let api: kube::Api<DynamicObject> = match ns {
                "" => kube::Api::all_with(client, &r.resource),
                ns => kube::Api::namespaced_with(client, ns, &r.resource),
            };
            let name = req.name.clone();
            async move { api.get(&name).await }
        })
        .await
        .map_err(|e| match e {
            ApiError::NotFound(_) => ApiError::NotFound(format!("{what} not found")),
            e => e,
        })?;
    let beside = Beside::of(on, [ns.to_string()].into_iter().filter(|n| !n.is_empty())).await;
    let mut unavailable = Vec::new();
    let mut t = shape(&r.resource, &template);
    let claimed = claim_of(&template);
    let shown = as_template(&r.resource, &template);
    let all = pickers(&on.unreviewed());
    t.policies = traced_policies(
        &all,
        &beside,
        ns,
        &shown,
        claimed.as_ref(),
        &mut unavailable,
    );
    t.overrides = overrides(&all, &beside, ns, &shown);

    let binding = format!("{}-{}", req.name, r.resource.kind.to_lowercase());
    t.binding = match ns {
        "" => cluster_binding(on, &binding, &mut unavailable).await,
        ns => {
            let may = beside.allows(Kind::ResourceBinding, ns);
            let reads = on
                .read(Verb::Get, Kind::ResourceBinding, Some(ns), Some(&binding))
                .await;
            match (may, reads) {
                (true, Ok(reads)) => reads
                    .store(Kind::ResourceBinding)?
                    .get(Some(ns), &binding)
                    .and_then(|o| o.decode().ok())
                    .map(|rb| placement_of(binding.clone(), &rb.data)),
                _ => {
                    unavailable.push(format!(
                        "the binding {ns}/{binding}: you may not read ResourceBindings here"
                    ));
                    None
                }
            }
        }
    };
    if let Some(b) = &t.binding {
        t.works = works(on, b, ns, &mut unavailable).await;
    }
    t.events = events(on, ns, &req.name, &binding, &t.works, &mut unavailable).await;
    t.unavailable = unavailable;
    Ok(t)
}

/// The template's identity, labels and (for a Secret or ConfigMap) keys: never values.
fn shape(r: &ApiResource, o: &DynamicObject) -> proto::Trace {
    let keys = match (r.group.as_str(), r.kind.as_str()) {
        ("", "Secret" | "ConfigMap") => ["data", "binaryData", "stringData"]
            .iter()
            .filter_map(|f| o.data.get(*f).and_then(Value::as_object))
            .flat_map(|m| m.keys().cloned())
            .collect(),
        _ => Vec::new(),
    };
    proto::Trace {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        name: o.metadata.name.clone().unwrap_or_default(),
        uid: o.metadata.uid.clone().unwrap_or_default(),
        labels: o
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        keys,
        ..Default::default()
    }
}

/// What Karmada's selectors read of a template.
fn as_template(r: &ApiResource, o: &DynamicObject) -> Value {
    json!({
        "apiVersion": r.api_version, "kind": r.kind,
        "metadata": {"name": o.metadata.name, "namespace": o.metadata.namespace, "labels": o.metadata.labels},
    })
}

fn reference(p: &Picker, claimed: bool) -> proto::PolicyRef {
    proto::PolicyRef {
        kind: p.kind.resource().kind,
        namespace: p.namespace.clone().unwrap_or_default(),
        name: p.name.clone(),
        claimed,
    }
}

fn priority(p: &Picker) -> i64 {
    p.policy["spec"]["priority"].as_i64().unwrap_or(0)
}

fn is(p: &Picker, claim: &Claim) -> bool {
    match claim {
        Claim::Namespaced(ns, name) => {
            p.kind == Kind::PropagationPolicy
                && p.namespace.as_deref() == Some(ns)
                && &p.name == name
        }
        Claim::Cluster(name) => p.kind == Kind::ClusterPropagationPolicy && &p.name == name,
    }
}

/// Every propagation policy that could claim the template, the claimer first, each other
/// with why it does not.
fn traced_policies(
    all: &[Picker],
    beside: &Beside,
    ns: &str,
    template: &Value,
    claim: Option<&Claim>,
    unavailable: &mut Vec<String>,
) -> Vec<proto::TracedPolicy> {
    let candidates: Vec<&Picker> = all
        .iter()
        .filter(|p| match p.kind {
            Kind::PropagationPolicy => p.namespace.as_deref() == Some(ns) && !ns.is_empty(),
            Kind::ClusterPropagationPolicy => true,
            _ => false,
        })
        .filter(|p| beside.allows(p.kind, ns))
        .collect();
    // Without a recorded claim, the one Karmada's rules pick (namespace's first).
    let picked: Option<&Picker> = match claim {
        Some(c) => candidates.iter().copied().find(|p| is(p, c)),
        None => [Kind::PropagationPolicy, Kind::ClusterPropagationPolicy]
            .into_iter()
            .find_map(|k| {
                let of: Vec<&Picker> = candidates.iter().copied().filter(|p| p.kind == k).collect();
                let chosen = policy_claim::pick(of.iter().map(|p| &p.policy), template)?;
                of.into_iter().find(|p| std::ptr::eq(&p.policy, chosen))
            }),
    };
    if claim.is_some() && picked.is_none() {
        unavailable.push("the claiming policy: one you may not see, or deleted since".into());
    }
    let mut out: Vec<proto::TracedPolicy> = Vec::new();
    if let Some(p) = picked {
        out.push(proto::TracedPolicy {
            policy: Some(reference(p, claim.is_some())),
            priority: priority(p) as i32,
            reason: String::new(),
        });
    }
    for p in candidates {
        if picked.is_some_and(|c| std::ptr::eq(c, p)) {
            continue;
        }
        out.push(proto::TracedPolicy {
            policy: Some(reference(p, false)),
            priority: priority(p) as i32,
            reason: why_not(p, picked, template),
        });
    }
    out
}

/// Why `p` does not claim the template that `claimer` claims (or that nobody does).
fn why_not(p: &Picker, claimer: Option<&Picker>, template: &Value) -> String {
    if !p.policy["metadata"]["deletionTimestamp"].is_null() {
        return "it is being deleted".into();
    }
    if policy_claim::policy_match(&p.policy, template).is_none() {
        return format!(
            "its resourceSelectors do not select it: {}",
            mismatch(&p.policy, template)
        );
    }
    let Some(c) = claimer else {
        return "it selects the template, but no claim is recorded yet".into();
    };
    let by = format!("{} {}", c.kind.resource().kind, c.name);
    if p.kind == Kind::ClusterPropagationPolicy && c.kind == Kind::PropagationPolicy {
        return format!("it selects the template, but {by} of its namespace comes before any ClusterPropagationPolicy");
    }
    match priority(p).cmp(&priority(c)) {
        std::cmp::Ordering::Less => format!(
            "it selects the template with priority {}, below {by}'s {}",
            priority(p),
            priority(c)
        ),
        _ => format!("it selects the template, but {by} claimed it (a claim stays until preempted or its policy is deleted)"),
    }
}

/// What of each selector does not fit the template, in one line.
fn mismatch(policy: &Value, template: &Value) -> String {
    let meta = &template["metadata"];
    let selectors = policy["spec"]["resourceSelectors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let why: Vec<String> = selectors
        .iter()
        .map(|s| {
            let (av, k) = (
                s["apiVersion"].as_str().unwrap_or_default(),
                s["kind"].as_str().unwrap_or_default(),
            );
            if av != template["apiVersion"].as_str().unwrap_or_default()
                || k != template["kind"].as_str().unwrap_or_default()
            {
                return format!("selects {k} ({av})");
            }
            if let Some(ns) = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty() && Some(*n) != meta["namespace"].as_str())
            {
                return format!("selects namespace {ns}");
            }
            if let Some(n) = s["name"]
                .as_str()
                .filter(|n| !n.is_empty() && Some(*n) != meta["name"].as_str())
            {
                return format!("selects the name {n}");
            }
            "its labelSelector does not match the template's labels".to_string()
        })
        .collect();
    match why.is_empty() {
        true => "it has no resourceSelectors".into(),
        false => why.join("; "),
    }
}

/// The override policies whose selectors match the template.
fn overrides(all: &[Picker], beside: &Beside, ns: &str, template: &Value) -> Vec<proto::PolicyRef> {
    all.iter()
        .filter(|p| match p.kind {
            Kind::OverridePolicy => p.namespace.as_deref() == Some(ns) && !ns.is_empty(),
            Kind::ClusterOverridePolicy => true,
            _ => false,
        })
        .filter(|p| beside.allows(p.kind, ns))
        .filter(|p| policy_claim::policy_match(&p.policy, template).is_some())
        .map(|p| reference(p, false))
        .collect()
}

/// A cluster-scoped template's ClusterResourceBinding, read live as the caller.
async fn cluster_binding(
    on: &OnInstance,
    name: &str,
    unavailable: &mut Vec<String>,
) -> Option<proto::Placement> {
    let crb = resource(
        "work.karmada.io",
        "v1alpha2",
        "ClusterResourceBinding",
        "clusterresourcebindings",
    );
    let what = format!(
        "instance {:?}: ClusterResourceBinding {name}",
        on.instance()
    );
    let got = on
        .live(&what, |client| {
            let api: kube::Api<DynamicObject> = kube::Api::all_with(client, &crb);
            let name = name.to_string();
            async move { api.get_opt(&name).await }
        })
        .await;
    match got {
        Ok(Some(o)) => Some(placement_of(name.to_string(), &o.data)),
        Ok(None) => None,
        Err(e) => {
            unavailable.push(format!("the binding {name}: {e}"));
            None
        }
    }
}

/// The Work on each cluster the binding names, read as the caller (Works carry the
/// manifests they propagate, Secrets' data included: only admins read them).
async fn works(
    on: &OnInstance,
    binding: &proto::Placement,
    ns: &str,
    unavailable: &mut Vec<String>,
) -> Vec<proto::TracedWork> {
    let mut clusters: Vec<String> = binding.clusters.iter().map(|c| c.name.clone()).collect();
    for a in &binding.aggregated_status {
        if !clusters.contains(&a.cluster_name) {
            clusters.push(a.cluster_name.clone());
        }
    }
    let reads = clusters.iter().map(|cluster| async move {
        let listed = super::beside::works_of(on, cluster).await;
        (cluster.clone(), format!("karmada-es-{cluster}"), listed)
    });
    let mut out = Vec::new();
    for (cluster, namespace, listed) in futures::future::join_all(reads).await {
        let listed = match listed {
            Ok(l) => l,
            Err(ApiError::Forbidden(_) | ApiError::PermissionDenied(_)) => {
                unavailable.push(format!("the Works in {namespace}: only those who may read Works there (they carry every manifest, Secrets' data included)"));
                continue;
            }
            Err(e) => {
                unavailable.push(format!("the Works in {namespace}: {e}"));
                continue;
            }
        };
        let ours = |w: &DynamicObject| {
            let a = w.metadata.annotations.clone().unwrap_or_default();
            let l = w.metadata.labels.clone().unwrap_or_default();
            let named = |k: &str| a.get(k).or_else(|| l.get(k)).map(String::as_str);
            match ns {
                "" => {
                    named("clusterresourcebinding.karmada.io/name") == Some(&binding.binding_name)
                }
                ns => {
                    named("resourcebinding.karmada.io/name") == Some(&binding.binding_name)
                        && named("resourcebinding.karmada.io/namespace") == Some(ns)
                }
            }
        };
        for w in listed.items.iter().filter(|w| ours(w)) {
            let manifest = w.data.pointer("/status/manifestStatuses/0");
            out.push(proto::TracedWork {
                cluster: cluster.clone(),
                namespace: namespace.clone(),
                name: w.metadata.name.clone().unwrap_or_default(),
                conditions: convert::conditions(&w.data["status"]["conditions"]),
                health: manifest
                    .and_then(|m| m["health"].as_str())
                    .unwrap_or_default()
                    .to_string(),
                status_json: manifest
                    .and_then(|m| m.get("status"))
                    .filter(|s| !s.is_null())
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            });
        }
    }
    out
}

/// The events of the template and its binding (in its namespace, or `default` for a
/// cluster-scoped one, where Karmada records them), and of its Works.
async fn events(
    on: &OnInstance,
    ns: &str,
    name: &str,
    binding: &str,
    works: &[proto::TracedWork],
    unavailable: &mut Vec<String>,
) -> Vec<proto::WorkloadEvent> {
    let home = if ns.is_empty() { "default" } else { ns };
    let mut places: Vec<String> = vec![home.to_string()];
    for w in works {
        if !places.contains(&w.namespace) {
            places.push(w.namespace.clone());
        }
    }
    let reads = places.iter().map(|namespace| {
        let path = format!("/api/v1/namespaces/{namespace}/events?limit={EVENTS_READ}");
        let what = format!("instance {:?}: the events of {namespace}", on.instance());
        async move {
            let got = on
                .live(&what, |client| async move {
                    let req = http::Request::get(path)
                        .body(Vec::new())
                        .map_err(kube::Error::HttpError)?;
                    client.request::<Value>(req).await
                })
                .await;
            (namespace.clone(), got)
        }
    });
    let mut out = Vec::new();
    for (namespace, got) in futures::future::join_all(reads).await {
        match got {
            Ok(list) => out.extend(
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| match namespace == home {
                        true => about(e, name, binding),
                        false => works.iter().any(|w| {
                            w.namespace == namespace
                                && e["involvedObject"]["name"] == w.name.as_str()
                        }),
                    })
                    .map(|e| {
                        let cluster = namespace.strip_prefix("karmada-es-").unwrap_or_default();
                        event(cluster, e)
                    }),
            ),
            Err(e) => unavailable.push(format!("the events of {namespace}: {e}")),
        }
    }
    out.sort_by(|a, b| b.time.cmp(&a.time));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker(kind: Kind, name: &str, priority: i64, selectors: Value) -> Picker {
        Picker {
            kind,
            namespace: (kind == Kind::PropagationPolicy).then(|| "default".to_string()),
            name: name.into(),
            policy: json!({"metadata": {"name": name},
                "spec": {"priority": priority, "resourceSelectors": selectors}}),
        }
    }

    fn nginx() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}}})
    }

    #[test]
    fn each_policy_that_does_not_claim_says_why() {
        let t = nginx();
        let claimer = picker(
            Kind::PropagationPolicy,
            "nginx-propagation",
            0,
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}]),
        );
        let other_name = picker(
            Kind::PropagationPolicy,
            "other",
            0,
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]),
        );
        let services = picker(
            Kind::PropagationPolicy,
            "svc",
            0,
            json!([{"apiVersion": "v1", "kind": "Service"}]),
        );
        let labels = picker(
            Kind::PropagationPolicy,
            "labels",
            0,
            json!([{"apiVersion": "apps/v1", "kind": "Deployment", "labelSelector": {"matchLabels": {"app": "web"}}}]),
        );
        let cluster = picker(
            Kind::ClusterPropagationPolicy,
            "all",
            100,
            json!([{"apiVersion": "apps/v1", "kind": "Deployment"}]),
        );
        let lower = picker(
            Kind::PropagationPolicy,
            "lower",
            -1,
            json!([{"apiVersion": "apps/v1", "kind": "Deployment"}]),
        );
        let why = |p: &Picker| why_not(p, Some(&claimer), &t);
        assert_eq!(
            why(&other_name),
            "its resourceSelectors do not select it: selects the name web"
        );
        assert_eq!(
            why(&services),
            "its resourceSelectors do not select it: selects Service (v1)"
        );
        assert!(
            why(&labels).contains("labelSelector does not match"),
            "{}",
            why(&labels)
        );
        assert!(
            why(&cluster).contains("of its namespace comes before any ClusterPropagationPolicy")
        );
        assert_eq!(why(&lower), "it selects the template with priority -1, below PropagationPolicy nginx-propagation's 0");
    }

    #[test]
    fn kinds_by_name_plural_or_short_name() {
        let find = |asked: &str| {
            KNOWN
                .iter()
                .find(|(_, _, k, p, s, _)| names(asked, k, p, s))
                .map(|(g, _, k, _, _, _)| format!("{g}/{k}"))
        };
        assert_eq!(find("deploy").as_deref(), Some("apps/Deployment"));
        assert_eq!(find("Secret").as_deref(), Some("/Secret"));
        assert_eq!(
            find("ingresses").as_deref(),
            Some("networking.k8s.io/Ingress")
        );
        assert_eq!(find("cj").as_deref(), Some("batch/CronJob"));
        assert_eq!(find("widgets"), None);
    }
}
