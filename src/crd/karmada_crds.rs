//! Karmada's CRD tarballs on the host: one ConfigMap per release in Kairship's managed
//! namespace, labelled `kairship.io/karmada-crds=<version>`, the release's `crds.tar.gz`
//! under `binaryData` key `crds.tar.gz`. Kairship serves them to karmada-operator
//! (`api::http::karmada_crds`) and compares two releases' CRDs when it plans a rollout
//! (`rollout::crd_diff`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

pub const LABEL: &str = "kairship.io/karmada-crds";
pub const KEY: &str = "crds.tar.gz";

/// The tarball of release `version` in namespace `ns`, if a ConfigMap holds it.
pub async fn find(
    host: &kube::Client,
    ns: &str,
    version: &str,
) -> Result<Option<bytes::Bytes>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(host.clone(), ns);
    let params = ListParams::default().labels(&format!("{LABEL}={version}"));
    let items = api.list(&params).await?.items;
    Ok(items.iter().find_map(|cm| {
        cm.binary_data
            .as_ref()?
            .get(KEY)
            .map(|b| bytes::Bytes::from(b.0.clone()))
    }))
}
