//! The host calls hibernation makes, each bounded and fenced to the leader: the `Karmada`
//! object's `spec.suspend`, its components' replicas (what each ran before is kept in an
//! annotation on it, so a wake after a Kairship restart still knows), and the Instance's
//! status.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use crate::context::Context;
use crate::crd::{Instance, InstanceMode};
use crate::host::error::{bounded, fenced, HostError};
use crate::host::karmada::karmada_resource;

/// On each component scaled down: the replicas it ran before.
pub const REPLICAS_ANNOTATION: &str = "kairship.io/replicasBeforeHibernation";

/// Started last when it sleeps and first when it wakes: nothing answers without it.
const APISERVER: &str = "karmada-apiserver";

/// A managed instance's `Karmada` object: its namespace and name.
pub fn karmada_of(ctx: &Context, instance: &Instance) -> Option<(String, String)> {
    if instance.spec.mode != InstanceMode::Managed {
        return None;
    }
    Some((
        ctx.settings.managed_namespace_of(instance),
        instance.name_any(),
    ))
}

/// One component as hibernation sees it.
#[derive(Debug, Clone)]
pub struct Component {
    pub name: String,
    /// `app.kubernetes.io/name`: karmada-apiserver, etcd, ...
    pub role: String,
    pub stateful: bool,
    pub replicas: i32,
    pub ready: i32,
    /// What it ran before hibernation, while it is recorded.
    pub before: Option<i32>,
}

impl Component {
    pub fn is_apiserver(&self) -> bool {
        self.role == APISERVER
    }

    pub fn is_etcd(&self) -> bool {
        self.role == "etcd"
    }

    /// Up again: as it was before hibernation while that is recorded, else every replica
    /// it asks for ready (karmada-operator's update on resume replaces the record).
    pub fn restored(&self) -> bool {
        match self.before {
            Some(n) => self.replicas >= n && self.ready >= n,
            None => self.ready >= self.replicas,
        }
    }
}

pub struct Host<'a> {
    ctx: &'a Context,
    ns: String,
    name: String,
}

impl<'a> Host<'a> {
    pub fn new(ctx: &'a Context, ns: String, name: String) -> Self {
        Self { ctx, ns, name }
    }

    async fn write<T>(
        &self,
        what: String,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, HostError> {
        let limit = self.ctx.settings.request_timeout;
        fenced(what, self.ctx.leadership.fenced(limit, call).await)
    }

    /// Sets `spec.suspend` on the instance's `Karmada` object and answers its spec.
    pub async fn suspend(&self, suspend: bool) -> Result<Value, HostError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.ctx.host.clone(), &self.ns, &karmada_resource());
        let patch = json!({"spec": {"suspend": suspend}});
        let done = self
            .write(
                format!(
                    "setting suspend={suspend} on Karmada {}/{}",
                    self.ns, self.name
                ),
                api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await?;
        Ok(done.data.get("spec").cloned().unwrap_or(Value::Null))
    }

    /// The instance's components: karmada-operator's Deployments and StatefulSets for it.
    pub async fn components(&self) -> Result<Vec<Component>, HostError> {
        let params = ListParams::default().labels(&format!(
            "app.kubernetes.io/managed-by=karmada-operator,app.kubernetes.io/instance={}",
            self.name
        ));
        let timeout = self.ctx.settings.request_timeout;
        let deployments: Api<Deployment> = Api::namespaced(self.ctx.host.clone(), &self.ns);
        let sets: Api<StatefulSet> = Api::namespaced(self.ctx.host.clone(), &self.ns);
        let what = format!("listing the components of {}/{}", self.ns, self.name);
        let d = bounded(what.clone(), timeout, deployments.list(&params)).await?;
        let s = bounded(what, timeout, sets.list(&params)).await?;
        let of = |meta: &kube::api::ObjectMeta, stateful: bool, replicas, ready| Component {
            name: meta.name.clone().unwrap_or_default(),
            role: meta
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/name").cloned())
                .unwrap_or_default(),
            stateful,
            replicas,
            ready,
            before: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(REPLICAS_ANNOTATION))
                .and_then(|v| v.parse().ok()),
        };
        let mut out: Vec<Component> = d
            .items
            .iter()
            .map(|x| {
                let replicas = x.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let ready = x
                    .status
                    .as_ref()
                    .and_then(|s| s.ready_replicas)
                    .unwrap_or(0);
                of(&x.metadata, false, replicas, ready)
            })
            .collect();
        out.extend(s.items.iter().map(|x| {
            let replicas = x.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let ready = x
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            of(&x.metadata, true, replicas, ready)
        }));
        Ok(out)
    }

    /// Scales one component, recording what it ran before (`before`: keep the record,
    /// `Some(None)`: drop it).
    pub async fn scale(
        &self,
        c: &Component,
        replicas: i32,
        before: Option<Option<i32>>,
    ) -> Result<(), HostError> {
        let mut annotations = BTreeMap::new();
        if let Some(b) = before {
            annotations.insert(REPLICAS_ANNOTATION, b.map(|n| n.to_string()));
        }
        let patch = json!({
            "metadata": {"annotations": annotations},
            "spec": {"replicas": replicas},
        });
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let what = format!("scaling {}/{} to {replicas}", self.ns, c.name);
        match c.stateful {
            true => {
                let api: Api<StatefulSet> = Api::namespaced(self.ctx.host.clone(), &self.ns);
                self.write(what, api.patch(&c.name, &params, &patch))
                    .await?;
            }
            false => {
                let api: Api<Deployment> = Api::namespaced(self.ctx.host.clone(), &self.ns);
                self.write(what, api.patch(&c.name, &params, &patch))
                    .await?;
            }
        }
        Ok(())
    }
}

/// Merge-patches the Instance's status.
pub async fn write_status(ctx: &Context, name: &str, status: Value) -> Result<(), HostError> {
    let api: Api<Instance> = Api::all(ctx.host.clone());
    let patch = json!({ "status": status });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let call = api.patch_status(name, &params, &patch);
    let limit = ctx.settings.request_timeout;
    fenced(
        format!("writing the hibernation status of instance {name}"),
        ctx.leadership.fenced(limit, call).await,
    )
    .map(drop)
}

/// Whether the Karmada spec keeps etcd's data on a volume claim (karmada-operator's
/// `components.etcd.local.volumeData.volumeClaim`); otherwise it is an emptyDir, and
/// etcd at zero replicas would lose every object of the instance.
pub fn etcd_persistent(karmada_spec: &Value) -> bool {
    karmada_spec
        .pointer("/components/etcd/local/volumeData/volumeClaim")
        .is_some_and(|v| !v.is_null())
}
