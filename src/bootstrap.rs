//! Putting Kairship onto a host cluster: its CRDs, the namespace it works in, and
//! External instances attached from kubeconfigs. Idempotent; used by the demo, the tests
//! and the benchmarks.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};

use crate::crd::{ExternalSpec, Instance, InstanceMode, InstanceSpec, SecretKeyRef};

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
        paused: false,
    };
    create_idempotent(
        &Api::<Instance>::all(host.clone()),
        &Instance::new(name, spec),
    )
    .await
}
