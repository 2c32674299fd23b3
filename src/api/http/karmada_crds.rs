//! Karmada's CRD tarballs for karmada-operator inside an air-gapped cluster: the operator
//! downloads `spec.crdTarball.httpSource.url` (by default a GitHub release no such cluster
//! reaches), so Kairship serves each release's tarball from a ConfigMap in its managed
//! namespace, labelled `kairship.io/karmada-crds=<version>`, key `crds.tar.gz` in
//! `binaryData` (a release's tarball is about 85 KB). Plain HTTP on the probes port, as
//! the operator's download verifies TLS against public roots only; Karmada's CRDs are
//! public, so no credentials are asked.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

use crate::api::context::ApiContext;

pub const PATH: &str = "/karmada-crds/{version}/crds.tar.gz";
pub const LABEL: &str = "kairship.io/karmada-crds";
pub const KEY: &str = "crds.tar.gz";

fn refuse(code: http::StatusCode, message: String) -> Response {
    (code, message + "\n").into_response()
}

pub async fn get(State(ctx): State<ApiContext>, Path(version): Path<String>) -> Response {
    if let Err(e) = crate::crd::karmada_spec::check_version("version", &version) {
        return refuse(http::StatusCode::BAD_REQUEST, e.to_string());
    }
    let settings = ctx.tree.settings();
    let ns = settings.managed_namespace.clone();
    let api: Api<ConfigMap> = Api::namespaced(ctx.tree.host().clone(), &ns);
    let params = ListParams::default().labels(&format!("{LABEL}={version}"));
    let list = api.list(&params);
    let items = match ctx.host_call(&format!("ConfigMaps in {ns}"), list).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!(%version, error = %e, "listing CRD tarball ConfigMaps");
            return refuse(http::StatusCode::BAD_GATEWAY, e.to_string());
        }
    };
    let data = items
        .iter()
        .find_map(|cm| cm.binary_data.as_ref()?.get(KEY).map(|b| b.0.clone()));
    match data {
        Some(bytes) => ([(http::header::CONTENT_TYPE, "application/gzip")], bytes).into_response(),
        None => refuse(
            http::StatusCode::NOT_FOUND,
            format!(
                "no Karmada {version} CRD tarball: create a ConfigMap in {ns} labelled {LABEL}={version} with binaryData {KEY}"
            ),
        ),
    }
}
