//! Putting Kairship onto a host cluster: its CRDs, the namespace it works in, and
//! External instances attached from kubeconfigs. Idempotent; used by the demo, the leader
//! chaos experiments (which start their own host), the tests and the benchmarks.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};

use crate::crd::{ExternalSpec, Instance, InstanceMode, InstanceSpec, Phase, SecretKeyRef};

/// Creates unless it exists already.
async fn create_idempotent<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn install_crds(host: &kube::Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(host.clone());
    for crd in crate::crd::all() {
        create_idempotent(&api, &crd).await?;
    }
    Ok(())
}

pub async fn ensure_namespace(host: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    create_idempotent(&Api::<Namespace>::all(host.clone()), &ns).await
}

/// Stores `kubeconfig` in the Secret `<name>-kubeconfig` of `namespace` and creates an
/// External `Instance` named `name` pointing at it.
pub async fn attach_external(
    host: &kube::Client,
    namespace: &str,
    name: &str,
    kubeconfig: Vec<u8>,
) -> Result<(), kube::Error> {
    let secret_name = format!("{name}-kubeconfig");
    let mut secret = Secret::default();
    secret.metadata.name = Some(secret_name.clone());
    secret.data = Some([("kubeconfig".to_string(), ByteString(kubeconfig))].into());
    create_idempotent(&Api::<Secret>::namespaced(host.clone(), namespace), &secret).await?;
    let spec = InstanceSpec {
        mode: InstanceMode::External,
        external: Some(ExternalSpec {
            kubeconfig_secret_ref: SecretKeyRef {
                namespace: namespace.into(),
                name: secret_name,
                key: None,
            },
        }),
        managed: None,
        class_name: None,
        paused: false,
        cache_budget: None,
        backup_schedule: None,
        maintenance_window: None,
        guardrails: Vec::new(),
        hibernation: None,
    };
    create_idempotent(
        &Api::<Instance>::all(host.clone()),
        &Instance::new(name, spec),
    )
    .await
}

/// How many Instances are Running, of how many: what the demo, the chaos runner and the
/// benchmarks wait on.
pub async fn running_instances(host: &kube::Client) -> Result<(usize, usize), kube::Error> {
    let list = Api::<Instance>::all(host.clone())
        .list(&Default::default())
        .await?;
    let running = list
        .items
        .iter()
        .filter(|i| i.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
        .count();
    Ok((running, list.items.len()))
}

/// `deploy/instance-rbac.yaml`: what each instance needs for identity to pass through
/// Kairship's proxy (the role groups' bindings, Karmada's kinds aggregated into the
/// default roles, and the ClusterRole for Kairship's own instance credentials).
pub const INSTANCE_RBAC: &str = include_str!("../deploy/instance-rbac.yaml");

#[derive(Debug, thiserror::Error)]
pub enum InstanceRbacError {
    #[error("deploy/instance-rbac.yaml: {0}")]
    Parse(String),
    #[error("applying {kind} {name:?}: {source}")]
    Apply {
        kind: String,
        name: String,
        source: kube::Error,
    },
}

/// Applies [`INSTANCE_RBAC`] to an instance (server-side apply, so it is idempotent and
/// updates objects an earlier version applied), as an operator installing Kairship would.
pub async fn apply_instance_rbac(instance: &kube::Client) -> Result<(), InstanceRbacError> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(INSTANCE_RBAC)
        .map_err(|e| InstanceRbacError::Parse(e.to_string()))?;
    let params = PatchParams::apply("kairship").force();
    for doc in docs.into_iter().filter(|d| d.is_object()) {
        let obj: DynamicObject =
            serde_json::from_value(doc).map_err(|e| InstanceRbacError::Parse(e.to_string()))?;
        let types = obj.types.clone().unwrap_or_default();
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", types.api_version.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        let kind = types.kind.to_ascii_lowercase();
        let plural = match kind.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None => format!("{kind}s"),
        };
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let name = obj.metadata.name.clone().unwrap_or_default();
        let api = match obj.metadata.namespace.as_deref() {
            Some(ns) => Api::<DynamicObject>::namespaced_with(instance.clone(), ns, &ar),
            None => Api::<DynamicObject>::all_with(instance.clone(), &ar),
        };
        api.patch(&name, &params, &Patch::Apply(&obj))
            .await
            .map_err(|source| InstanceRbacError::Apply {
                kind: types.kind.clone(),
                name: name.clone(),
                source,
            })?;
    }
    Ok(())
}
