//! karmada-operator as a pod on the kubelet-backed node, installed from the manifests of
//! its own module (`operator/config/deploy`, its CRD from `operator/config/crds`; its Helm
//! chart needs a dependency no air-gapped machine fetches), with every image it deploys
//! imported under one registry name. What `scripts/real-fleet/build.sh` leaves next to the
//! bin directory: `karmada-operator/`, `crd-tarballs/<version>/crds.tar.gz` and
//! `images/karmada/*.tar`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::karmada::{apply, ar, install_crds, namespace};
use crate::Error;

/// The registry name every component image is imported under.
pub const REGISTRY: &str = "kairship.local/karmada";
/// The namespace of the operator's manifests (its leader-election Lease lives there).
pub const NAMESPACE: &str = "karmada-system";
/// The pinned Karmada release and the previous minor, both built by the script.
pub const KARMADA_VERSION: &str = "v1.18.2";
pub const PREVIOUS_VERSION: &str = "v1.17.1";
/// Tags of the images not tagged with the Karmada version.
pub const IMAGE_TAGS: &[(&str, &str)] = &[
    ("etcd", "3.6.7"),
    ("karmadaAPIServer", "v1.35.3"),
    ("kubeControllerManager", "v1.35.3"),
];

fn root(bin: &Path) -> PathBuf {
    bin.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The OCI archives of the operator and of every component it deploys, both releases.
pub fn images(bin: &Path) -> Result<Vec<PathBuf>, Error> {
    let dir = root(bin).join("images/karmada");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(Error::io(format!(
            "reading {} (run scripts/real-fleet/build.sh)",
            dir.display()
        )))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tar"))
        .collect();
    out.sort();
    if !out
        .iter()
        .any(|p| p.ends_with(format!("karmada-operator-{KARMADA_VERSION}.tar")))
    {
        return Err(Error::MissingBinary(
            dir.join(format!("karmada-operator-{KARMADA_VERSION}.tar"))
                .display()
                .to_string(),
        ));
    }
    Ok(out)
}

/// Karmada's CRD tarball of `version`, as the release publishes it.
pub fn crd_tarball(bin: &Path, version: &str) -> Result<Vec<u8>, Error> {
    let path = root(bin).join(format!("crd-tarballs/{version}/crds.tar.gz"));
    std::fs::read(&path).map_err(Error::io(format!(
        "reading {} (run scripts/real-fleet/build.sh)",
        path.display()
    )))
}

/// Installs the operator: its namespace, CRD, RBAC and Deployment (image replaced by the
/// imported one). Idempotent.
pub async fn install(client: &kube::Client, bin: &Path) -> Result<(), Error> {
    let dir = root(bin).join("karmada-operator");
    namespace(client, NAMESPACE).await?;
    install_crds(client, &dir.join("crds")).await?;
    let deploy = dir.join("deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&deploy)
        .map_err(Error::io(format!("reading {}", deploy.display())))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    // ServiceAccount and RBAC before the Deployment that uses them.
    files.sort_by_key(|p| p.to_string_lossy().contains("deployment"));
    let image = format!("{REGISTRY}/karmada-operator:{KARMADA_VERSION}");
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(Error::io(format!("reading {}", path.display())))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        for mut doc in docs.into_iter().filter(|d| d.is_object()) {
            if let Some(containers) = doc
                .pointer_mut("/spec/template/spec/containers")
                .and_then(Value::as_array_mut)
            {
                for c in containers {
                    c["image"] = Value::String(image.clone());
                    c["imagePullPolicy"] = Value::String("Never".into());
                }
            }
            let (api_version, kind) = (
                doc["apiVersion"].as_str().unwrap_or_default().to_string(),
                doc["kind"].as_str().unwrap_or_default().to_string(),
            );
            let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
            let plural = format!("{}s", kind.to_lowercase());
            apply(client, &ar(group, version, &kind, &plural), doc).await?;
        }
    }
    Ok(())
}
