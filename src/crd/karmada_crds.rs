//! Karmada's CRD tarballs on the host: one ConfigMap per release in Kairship's managed
//! namespace, labelled `kairship.io/karmada-crds=<version>`, the release's `crds.tar.gz`
//! under `binaryData` key `crds.tar.gz`. Kairship serves them to karmada-operator
//! (`api::http::karmada_crds`) and compares two releases' CRDs when it plans a rollout
//! (`rollout::crd_diff`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

pub const LABEL: &str = "kairship.io/karmada-crds";
pub const KEY: &str = "crds.tar.gz";

/// A release's tarball as found on the host.
pub struct Found {
    /// The ConfigMap's uid and resourceVersion: names these bytes, host and edit included.
    pub key: String,
    pub tarball: bytes::Bytes,
}

/// The tarball of release `version` in namespace `ns`, if a ConfigMap holds it.
pub async fn find(
    host: &kube::Client,
    ns: &str,
    version: &str,
) -> Result<Option<Found>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(host.clone(), ns);
    let params = ListParams::default().labels(&format!("{LABEL}={version}"));
    let items = api.list(&params).await?.items;
    Ok(items.iter().find_map(|cm| {
        let tarball = cm.binary_data.as_ref()?.get(KEY)?;
        let m = &cm.metadata;
        Some(Found {
            key: format!(
                "{}/{}",
                m.uid.as_deref().unwrap_or_default(),
                m.resource_version.as_deref().unwrap_or_default()
            ),
            tarball: bytes::Bytes::from(tarball.0.clone()),
        })
    }))
}
