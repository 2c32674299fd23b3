//! Registration with Clusterpedia (on with `--clusterpedia`), as the seed design's
//! virtual-cluster sync registers each instance with container management: one
//! `PediaCluster` per instance, named after it, that reads the instance through a Secret
//! holding its kubeconfig (an `authenticationFrom` reference, never inline) and syncs the
//! kinds Kairship caches. The Secret follows the instance's own kubeconfig Secret; both
//! are removed when the Instance is deleted. Written by the leader only.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::Resource;
use serde_json::{json, Value};

use super::caches::Kind;
use super::connect::KubeconfigSource;
use crate::actors::context::Context;
use crate::actors::host_error::{bounded, fenced, HostError};
use crate::crd::Instance;

/// The key of the kubeconfig in the Secret Kairship writes for Clusterpedia.
pub const SECRET_KEY: &str = "kubeconfig";

/// The condition Kairship adds to the Instance's status while registration is on.
pub const CONDITION: &str = "ClusterpediaSynced";

pub fn resource() -> ApiResource {
    ApiResource {
        group: "cluster.clusterpedia.io".into(),
        version: "v1alpha2".into(),
        api_version: "cluster.clusterpedia.io/v1alpha2".into(),
        kind: "PediaCluster".into(),
        plural: "pediaclusters".into(),
    }
}

/// The Secret in Clusterpedia's namespace that carries instance `name`'s kubeconfig.
pub fn secret_name(instance: &str) -> String {
    format!("kairship-{instance}-kubeconfig")
}

/// Where an instance's registration stands, for the actor's cadence: one round at a time.
#[derive(Debug, Clone, Copy)]
pub enum Round {
    NotYet,
    InFlight,
    DoneAt(std::time::Instant),
}

impl Round {
    /// Whether the next round should start, `every` after the last one ended.
    pub fn due(self, every: std::time::Duration) -> bool {
        match self {
            Round::NotYet => true,
            Round::InFlight => false,
            Round::DoneAt(at) => at.elapsed() >= every,
        }
    }
}

/// What Clusterpedia says of the instance: its `Ready` condition, or nothing yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub ready: Option<bool>,
    pub reason: String,
    pub message: String,
}

/// The kinds Kairship caches, grouped as `syncResources` lists them.
fn sync_resources() -> Value {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in Kind::ALL {
        let r = kind.resource();
        groups.entry(r.group).or_default().push(r.plural);
    }
    Value::Array(
        groups
            .into_iter()
            .map(|(group, resources)| json!({"group": group, "resources": resources}))
            .collect(),
    )
}

/// The PediaCluster's spec for instance `name`.
pub fn spec(instance: &str) -> Value {
    json!({
        "authenticationFrom": {"kubeconfig": {"name": secret_name(instance), "key": SECRET_KEY}},
        "syncResources": sync_resources(),
    })
}

/// Makes the Secret and the PediaCluster what they should be, and returns what
/// Clusterpedia reports.
pub async fn ensure(
    ctx: &Context,
    instance: &Instance,
    source: &KubeconfigSource,
    namespace: &str,
) -> Result<Reported, HostError> {
    let name = instance.metadata.name.clone().unwrap_or_default();
    let timeout = ctx.settings.request_timeout;
    let owner = instance.controller_owner_ref(&()).map(|o| vec![o]);

    let kubeconfig =
        super::connect::secret_value(ctx, &source.namespace, &source.name, &source.key)
            .await
            .map(k8s_openapi::ByteString)
            .map_err(|e| HostError::Secret(e.to_string()))?;
    let ours: Api<Secret> = Api::namespaced(ctx.host.clone(), namespace);
    let secret_name = secret_name(&name);
    let read = tokio::time::timeout(timeout, ours.get_opt(&secret_name)).await;
    let data = BTreeMap::from([(SECRET_KEY.to_string(), kubeconfig)]);
    match bounded(
        format!("reading secret {namespace}/{secret_name}"),
        timeout,
        read,
    )? {
        Some(existing) if !ours_by_label(existing.metadata.labels.as_ref()) => {
            return Ok(taken("Secret", &format!("{namespace}/{secret_name}")));
        }
        Some(existing) if existing.data.as_ref() == Some(&data) => {}
        Some(mut existing) => {
            existing.data = Some(data);
            // The resourceVersion read above is the replace's precondition.
            let params = PostParams::default();
            let write = ctx
                .leadership
                .fenced(timeout, ours.replace(&secret_name, &params, &existing))
                .await;
            fenced(format!("updating secret {namespace}/{secret_name}"), write)?;
        }
        None => {
            let mut secret = Secret {
                data: Some(data),
                ..Default::default()
            };
            secret.metadata.name = Some(secret_name.clone());
            secret.metadata.labels = Some(managed_by());
            // Owned by the (cluster-scoped) Instance, so a real host collects it too.
            secret.metadata.owner_references = owner.clone();
            let params = PostParams::default();
            let write = ctx
                .leadership
                .fenced(timeout, ours.create(&params, &secret))
                .await;
            fenced(format!("creating secret {namespace}/{secret_name}"), write)?;
        }
    }

    let pedia: Api<DynamicObject> = Api::all_with(ctx.host.clone(), &resource());
    let read = tokio::time::timeout(timeout, pedia.get_opt(&name)).await;
    let want = spec(&name);
    let current = match bounded(format!("reading PediaCluster {name}"), timeout, read)? {
        Some(existing) if !ours_by_label(existing.metadata.labels.as_ref()) => {
            return Ok(taken("PediaCluster", &name));
        }
        Some(existing) if existing.data.get("spec") == Some(&want) => existing,
        Some(_) => {
            // One merge patch that replaces the spec: what Kairship does not set (inline
            // credentials someone added) is removed by sending it as null.
            let mut patch = json!({
                "kubeconfig": null, "apiserver": null, "tokenData": null, "caData": null,
                "certData": null, "keyData": null, "syncAllCustomResources": null,
                "syncResourcesRefName": null, "shardingName": null,
            });
            if let (Some(p), Some(w)) = (patch.as_object_mut(), want.as_object()) {
                p.extend(w.clone());
            }
            let (params, patch) = (
                PatchParams::default(),
                Patch::Merge(json!({ "spec": patch })),
            );
            let write = ctx
                .leadership
                .fenced(timeout, pedia.patch(&name, &params, &patch))
                .await;
            fenced(format!("updating PediaCluster {name}"), write)?
        }
        None => {
            let mut object = DynamicObject::new(&name, &resource()).data(json!({ "spec": want }));
            object.metadata.labels = Some(managed_by());
            object.metadata.owner_references = owner;
            let params = PostParams::default();
            let write = ctx
                .leadership
                .fenced(timeout, pedia.create(&params, &object))
                .await;
            fenced(format!("creating PediaCluster {name}"), write)?
        }
    };
    Ok(reported(&current))
}

const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

fn managed_by() -> BTreeMap<String, String> {
    BTreeMap::from([(MANAGED_BY.to_string(), "kairship".to_string())])
}

/// Whether an object is one Kairship made (it never takes over, rewrites or deletes
/// someone else's registration of the same name).
fn ours_by_label(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY))
        .is_some_and(|v| v == "kairship")
}

fn taken(kind: &str, name: &str) -> Reported {
    Reported {
        ready: Some(false),
        reason: "NameTaken".into(),
        message: format!(
            "{kind} {name} exists and is not Kairship's ({MANAGED_BY}=kairship missing): \
             Kairship leaves it alone; delete it to let Kairship register the instance"
        ),
    }
}

/// Clusterpedia's `Ready` condition on the PediaCluster.
fn reported(pedia: &DynamicObject) -> Reported {
    let ready = pedia
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) => Reported {
            ready: match c["status"].as_str() {
                Some("True") => Some(true),
                Some("False") => Some(false),
                _ => None,
            },
            reason: c["reason"].as_str().unwrap_or_default().to_string(),
            message: c["message"].as_str().unwrap_or_default().to_string(),
        },
        None => Reported {
            ready: None,
            reason: "Registered".into(),
            message: "PediaCluster created; clustersynchro-manager has not reported yet".into(),
        },
    }
}

/// Removes instance `name`'s PediaCluster and Secret, if they are Kairship's (each may
/// already be gone). The PediaCluster goes first: Clusterpedia stops reading before its
/// credentials go. Deletes are conditional on the uid read, so a same-named object made
/// meanwhile by someone else stays.
pub async fn remove(ctx: &Context, name: &str, namespace: &str) -> Result<(), HostError> {
    let pedia: Api<DynamicObject> = Api::all_with(ctx.host.clone(), &resource());
    let what = format!("PediaCluster {name}");
    delete_if_ours(ctx, &pedia, name, &what).await?;
    let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), namespace);
    let secret = secret_name(name);
    let what = format!("secret {namespace}/{secret}");
    delete_if_ours(ctx, &secrets, &secret, &what).await
}

async fn delete_if_ours<K>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    what: &str,
) -> Result<(), HostError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let timeout = ctx.settings.request_timeout;
    let read = tokio::time::timeout(timeout, api.get_opt(name)).await;
    let found = match bounded(format!("reading {what}"), timeout, read) {
        Ok(found) => found,
        // No such kind in the host (no Clusterpedia CRDs): nothing was registered.
        Err(e) if e.code() == Some(404) => None,
        Err(e) => return Err(e),
    };
    let Some(found) = found else {
        return Ok(());
    };
    if !ours_by_label(found.meta().labels.as_ref()) {
        tracing::info!(object = %what, "not Kairship's: left in place");
        return Ok(());
    }
    let params = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: found.meta().uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let write = ctx
        .leadership
        .fenced(timeout, api.delete(name, &params))
        .await;
    match fenced(format!("deleting {what}"), write).map(drop) {
        // Gone already, or replaced by someone else's (the uid no longer matches).
        Err(e) if e.code() == Some(404) || e.code() == Some(409) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_syncs_every_cached_kind_by_group_through_a_secret() {
        let s = spec("payments");
        assert_eq!(
            s["authenticationFrom"]["kubeconfig"],
            json!({"name": "kairship-payments-kubeconfig", "key": "kubeconfig"})
        );
        let groups = s["syncResources"].as_array().expect("groups");
        let apps = groups.iter().find(|g| g["group"] == "apps").expect("apps");
        assert_eq!(
            apps["resources"],
            json!(["deployments", "statefulsets", "daemonsets"])
        );
        let total: usize = groups
            .iter()
            .map(|g| g["resources"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(total, Kind::ALL.len());
        assert!(s.get("kubeconfig").is_none(), "credentials never inline");
    }

    #[test]
    fn clusterpedia_ready_condition_is_reported_in_its_words() {
        let mut o = DynamicObject::new("a", &resource());
        assert_eq!(reported(&o).ready, None);
        o.data = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "ClusterUnhealthy", "message": "dial tcp: refused"}]}});
        assert_eq!(
            reported(&o),
            Reported {
                ready: Some(false),
                reason: "ClusterUnhealthy".into(),
                message: "dial tcp: refused".into()
            }
        );
    }
}
