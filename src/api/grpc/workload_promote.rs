//! Adopting a workload that already runs in a member cluster, as `karmadactl promote`
//! does: its object, read from the member through Karmada's cluster proxy as the caller,
//! pruned of what the member's API server generated (Karmada's own list: identity and
//! version fields, status, a Deployment's revision, a Job's generated selector, a Service's
//! cluster IPs) and marked `work.karmada.io/conflict-resolution: overwrite`, becomes the
//! instance's resource template; a PropagationPolicy (conflict resolution Overwrite,
//! resources preserved on deletion) places it on that cluster. Karmada then takes over the
//! running object in place, so its pods keep running. Everything is read before anything
//! is written, and a failed write takes back what this request created.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{json, Value};

use crate::api::objects;
use crate::api::request::OnInstance;
use crate::cache::caches::Kind;
use crate::error::{check_name, ApiError};
use crate::proto;

/// Karmada's annotation letting a template take over an object the member already has.
const CONFLICT_ANNOTATION: &str = "work.karmada.io/conflict-resolution";

/// What may be adopted beside a workload: (kind, plural).
const DEPENDENCIES: [(&str, &str); 3] = [
    ("ConfigMap", "configmaps"),
    ("Secret", "secrets"),
    ("Service", "services"),
];

/// One object to adopt: its API resource and name.
struct Adopted {
    resource: ApiResource,
    name: String,
}

impl Adopted {
    fn label(&self, namespace: &str) -> String {
        format!("{}/{namespace}/{}", self.resource.kind, self.name)
    }
}

fn core(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// "ConfigMap/settings" (kind case-insensitive).
fn dependency(spec: &str) -> Result<Adopted, ApiError> {
    let field = "dependencies";
    let (kind, name) = spec.split_once('/').ok_or_else(|| {
        ApiError::invalid(
            field,
            format!("{spec:?} is not Kind/name (e.g. ConfigMap/settings)"),
        )
    })?;
    let (kind, plural) = DEPENDENCIES
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(kind))
        .ok_or_else(|| {
            ApiError::invalid(
                field,
                format!("{kind:?} cannot be adopted with a workload: ConfigMap, Secret or Service"),
            )
        })?;
    check_name(field, name)?;
    Ok(Adopted {
        resource: core(kind, plural),
        name: name.to_string(),
    })
}

/// The object as a template: what the member generated removed (Karmada's prune list),
/// the overwrite annotation added unless the object chose otherwise.
fn as_template(mut o: Value) -> Value {
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in [
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "resourceVersion",
            "selfLink",
            "uid",
            "ownerReferences",
            "finalizers",
        ] {
            meta.remove(f);
        }
    }
    if let Some(o) = o.as_object_mut() {
        o.remove("status");
    }
    let kind = o["kind"].as_str().unwrap_or_default().to_string();
    match kind.as_str() {
        "Deployment" => {
            if let Some(a) = o["metadata"]["annotations"].as_object_mut() {
                a.remove("deployment.kubernetes.io/revision");
                a.remove("deployment.kubernetes.io/revision-history");
            }
        }
        "Job" if o["spec"]["manualSelector"] != Value::Bool(true) => {
            if let Some(l) = o["spec"]["selector"]["matchLabels"].as_object_mut() {
                l.remove("controller-uid");
                l.remove("batch.kubernetes.io/controller-uid");
            }
            if let Some(l) = o["spec"]["template"]["metadata"]["labels"].as_object_mut() {
                for k in [
                    "controller-uid",
                    "job-name",
                    "batch.kubernetes.io/controller-uid",
                    "batch.kubernetes.io/job-name",
                ] {
                    l.remove(k);
                }
            }
        }
        "Service" if o["spec"]["clusterIP"] != "None" => {
            if let Some(s) = o["spec"].as_object_mut() {
                s.remove("clusterIP");
                s.remove("clusterIPs");
            }
        }
        _ => {}
    }
    if !o["metadata"]["annotations"].is_object() {
        o["metadata"]["annotations"] = json!({});
    }
    if o["metadata"]["annotations"]
        .get(CONFLICT_ANNOTATION)
        .is_none()
    {
        o["metadata"]["annotations"][CONFLICT_ANNOTATION] = json!("overwrite");
    }
    o
}

fn policy(name: &str, namespace: &str, cluster: &str, adopted: &[Adopted]) -> Value {
    let selectors: Vec<Value> = adopted
        .iter()
        .map(|a| json!({"apiVersion": a.resource.api_version, "kind": a.resource.kind, "name": a.name}))
        .collect();
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "resourceSelectors": selectors,
            "placement": {"clusterAffinity": {"clusterNames": [cluster]}},
            "conflictResolution": "Overwrite",
            "preserveResourcesOnDeletion": true,
        }
    })
}

/// The object `a` in `namespace` of `cluster`, read through Karmada's cluster proxy as the
/// caller (the member's RBAC decides).
async fn read_on_member(
    on: &OnInstance,
    cluster: &str,
    namespace: &str,
    a: &Adopted,
) -> Result<Value, ApiError> {
    let base = match a.resource.group.as_str() {
        "" => "/api/v1".to_string(),
        g => format!("/apis/{g}/{}", a.resource.version),
    };
    let rest = format!(
        "{base}/namespaces/{namespace}/{}/{}",
        a.resource.plural, a.name
    );
    let what = format!("{} in cluster {cluster:?}", a.label(namespace));
    super::member_proxy::get(on, cluster, &rest, &what).await
}

pub async fn promote(
    on: &OnInstance,
    req: proto::PromoteWorkloadRequest,
) -> Result<Promoted, ApiError> {
    let kind = objects::kind("kind", &req.kind, &Kind::WORKLOADS)?;
    check_name("namespace", &req.namespace)?;
    check_name("name", &req.name)?;
    super::cluster_join::check_cluster_name(&req.cluster)?;
    let ns = req.namespace.as_str();
    let workload = Adopted {
        resource: kind.resource(),
        name: req.name.clone(),
    };
    let mut adopted = req
        .dependencies
        .iter()
        .map(|d| dependency(d))
        .collect::<Result<Vec<_>, _>>()?;
    adopted.push(workload);
    let policy_name = match req.policy_name.as_str() {
        "" => format!("{}-{}", req.name, kind.resource().kind.to_lowercase()),
        p => p.to_string(),
    };
    check_name("policy_name", &policy_name)?;

    let clusters = super::cluster_join::cached_clusters(on).await?;
    if !clusters
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(req.cluster.as_str()))
    {
        return Err(ApiError::NotFound(format!(
            "instance {:?} has no cluster {:?}",
            on.instance(),
            req.cluster
        )));
    }
    // Read everything first: nothing is written unless all of it can be adopted.
    let mut templates = Vec::new();
    for a in &adopted {
        let template = as_template(read_on_member(on, &req.cluster, ns, a).await?);
        match get_in_instance(on, &a.resource, ns, &a.name).await? {
            Some(_) => {
                return Err(ApiError::AlreadyExists(format!(
                "{} is already a resource template of instance {:?}: edit its policies to place it",
                a.label(ns),
                on.instance()
            )))
            }
            None => templates.push(template),
        }
    }
    let pp = Kind::PropagationPolicy.resource();
    if get_in_instance(on, &pp, ns, &policy_name).await?.is_some() {
        return Err(ApiError::AlreadyExists(format!(
            "PropagationPolicy {ns}/{policy_name} already exists in instance {:?}: name another with policy_name",
            on.instance()
        )));
    }
    if get_in_instance(on, &Kind::Namespace.resource(), "", ns)
        .await?
        .is_none()
    {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        create(on, &Kind::Namespace.resource(), None, namespace).await?;
    }

    let mut created: Vec<(ApiResource, String)> = Vec::new();
    let mut promoted = Vec::new();
    let mut outcome = Ok(());
    for (a, template) in adopted.iter().zip(templates) {
        match create(on, &a.resource, Some(ns), template).await {
            Ok(_) => {
                created.push((a.resource.clone(), a.name.clone()));
                promoted.push(a.label(ns));
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if outcome.is_ok() {
        let p = policy(&policy_name, ns, &req.cluster, &adopted);
        outcome = create(on, &pp, Some(ns), p).await.map(|_| ());
    }
    if let Err(e) = outcome {
        // Take back the templates this request made: without their policy they would
        // sit unplaced, and a retry would find them in the way.
        for (resource, name) in created.iter().rev() {
            let taken_back = on
                .write_resource(resource, Some(ns), name, |api| async move {
                    api.delete(name, &DeleteParams::default())
                        .await
                        .map(|_| None)
                })
                .await;
            if let Err(e) = taken_back {
                tracing::warn!(instance = on.instance(), object = %name, error = %e, "a promotion's template could not be taken back");
            }
        }
        return Err(e);
    }
    tracing::info!(instance = on.instance(), cluster = %req.cluster, policy = %policy_name, promoted = ?promoted, "workload promoted");
    let object = objects::get_live(on, kind, Some(ns), &req.name).await?;
    Ok(Promoted {
        kind,
        object,
        policy_name,
        promoted,
    })
}

/// What a promotion made: the workload's template as the instance now has it, its policy,
/// and every object created ("Kind/namespace/name").
pub struct Promoted {
    pub kind: Kind,
    pub object: DynamicObject,
    pub policy_name: String,
    pub promoted: Vec<String>,
}

async fn get_in_instance(
    on: &OnInstance,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<Option<DynamicObject>, ApiError> {
    let what = format!("{} {name:?}", resource.kind);
    on.live(&what, |client| async move {
        let api: Api<DynamicObject> = match namespace {
            "" => Api::all_with(client, resource),
            ns => Api::namespaced_with(client, ns, resource),
        };
        api.get_opt(name).await
    })
    .await
}

async fn create(
    on: &OnInstance,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) -> Result<DynamicObject, ApiError> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let obj: DynamicObject =
        serde_json::from_value(object).map_err(|e| ApiError::Internal(e.to_string()))?;
    on.write_resource(resource, namespace, &name, |api| async move {
        api.create(&PostParams::default(), &obj).await.map(Some)
    })
    .await?
    .ok_or_else(|| ApiError::Internal(format!("creating {} {name:?}: no object", resource.kind)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_lose_what_the_member_generated() {
        let t = as_template(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "x", "uid": "u", "resourceVersion": "9",
                         "generation": 3, "creationTimestamp": "t", "managedFields": [],
                         "annotations": {"deployment.kubernetes.io/revision": "2", "keep": "me"}},
            "spec": {"replicas": 2},
            "status": {"replicas": 2}
        }));
        assert_eq!(t["metadata"]["name"], "web");
        for gone in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
        ] {
            assert!(t["metadata"].get(gone).is_none(), "{gone}");
        }
        assert!(t.get("status").is_none());
        let a = &t["metadata"]["annotations"];
        assert!(a.get("deployment.kubernetes.io/revision").is_none());
        assert_eq!(a["keep"], "me");
        assert_eq!(a[CONFLICT_ANNOTATION], "overwrite");
        let svc = as_template(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": []}}),
        );
        assert!(svc["spec"].get("clusterIP").is_none());
        let headless = as_template(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"clusterIP": "None"}}),
        );
        assert_eq!(headless["spec"]["clusterIP"], "None");
    }

    #[test]
    fn dependencies_are_named_kind_slash_name() {
        assert_eq!(
            dependency("configmap/settings")
                .map(|a| a.resource.plural)
                .ok(),
            Some("configmaps".into())
        );
        for bad in ["settings", "Pod/p", "Secret/Not_A_Name"] {
            let e = dependency(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("dependencies"), "{bad}: {e}");
        }
    }
}
