//! Karmada's CRD tarballs for karmada-operator inside an air-gapped cluster: the operator
//! downloads `spec.crdTarball.httpSource.url` (by default a GitHub release no such cluster
//! reaches), so Kairship serves each release's tarball from a ConfigMap in its managed
//! namespace, labelled `kairship.io/karmada-crds=<version>`, key `crds.tar.gz` in
//! `binaryData` (a release's tarball is about 85 KB). Plain HTTP on the probes port, as
//! the operator's download verifies TLS against public roots only; Karmada's CRDs are
//! public, so no credentials are asked.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use crate::api::context::ApiContext;
pub use crate::crd::karmada_crds::{KEY, LABEL};

pub const PATH: &str = "/karmada-crds/{version}/crds.tar.gz";

fn refuse(code: http::StatusCode, message: String) -> Response {
    (code, message + "\n").into_response()
}

/// What was found for a version, and when: answers are kept a while, so strangers'
/// requests (this route takes no token) cost the host at most one list per version per
/// `KEPT`, two at a time.
struct Found {
    at: std::time::Instant,
    tarball: Option<bytes::Bytes>,
}

const KEPT: std::time::Duration = std::time::Duration::from_secs(30);
/// Versions remembered at once (the oldest is forgotten first).
const VERSIONS: usize = 32;

fn found() -> &'static parking_lot::Mutex<std::collections::HashMap<String, Found>> {
    static FOUND: std::sync::OnceLock<
        parking_lot::Mutex<std::collections::HashMap<String, Found>>,
    > = std::sync::OnceLock::new();
    FOUND.get_or_init(Default::default)
}

fn listing() -> &'static tokio::sync::Semaphore {
    static LISTING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
    &LISTING
}

fn kept(version: &str) -> Option<Option<bytes::Bytes>> {
    found()
        .lock()
        .get(version)
        // A missing tarball is looked for again sooner: an operator may be adding it.
        .filter(|f| f.at.elapsed() < if f.tarball.is_some() { KEPT } else { KEPT / 6 })
        .map(|f| f.tarball.clone())
}

pub async fn get(State(ctx): State<ApiContext>, Path(version): Path<String>) -> Response {
    if let Err(e) = crate::crd::karmada_spec::check_version("version", &version) {
        return refuse(http::StatusCode::BAD_REQUEST, e.to_string());
    }
    let tarball = match kept(&version) {
        Some(t) => t,
        None => {
            let Ok(_permit) = listing().acquire().await else {
                return refuse(http::StatusCode::SERVICE_UNAVAILABLE, "try again".into());
            };
            match kept(&version) {
                Some(t) => t,
                None => match read(&ctx, &version).await {
                    Ok(t) => {
                        let mut f = found().lock();
                        if f.len() >= VERSIONS {
                            let oldest = f.iter().min_by_key(|(_, v)| v.at).map(|(k, _)| k.clone());
                            if let Some(k) = oldest {
                                f.remove(&k);
                            }
                        }
                        let at = std::time::Instant::now();
                        f.insert(
                            version.clone(),
                            Found {
                                at,
                                tarball: t.clone(),
                            },
                        );
                        t
                    }
                    // What went wrong is the operator's to read in the log, not a stranger's.
                    Err(()) => {
                        return refuse(
                            http::StatusCode::SERVICE_UNAVAILABLE,
                            "the CRD tarballs cannot be read now; try again later".into(),
                        )
                    }
                },
            }
        }
    };
    match tarball {
        Some(bytes) => ([(http::header::CONTENT_TYPE, "application/gzip")], bytes).into_response(),
        None => refuse(
            http::StatusCode::NOT_FOUND,
            format!("no Karmada {version} CRD tarball: an operator creates a ConfigMap labelled {LABEL}={version} with binaryData {KEY} in Kairship's managed namespace"),
        ),
    }
}

/// The tarball of `version` from the ConfigMaps in the managed namespace.
async fn read(ctx: &ApiContext, version: &str) -> Result<Option<bytes::Bytes>, ()> {
    let ns = ctx.tree.settings().managed_namespace.clone();
    let host = ctx.tree.host().clone();
    let data = match ctx
        .host_call(
            &format!("ConfigMaps in {ns}"),
            crate::crd::karmada_crds::find(&host, &ns, version),
        )
        .await
    {
        Ok(d) => d.map(|f| f.tarball),
        Err(e) => {
            tracing::warn!(%version, error = %e, "listing CRD tarball ConfigMaps");
            return Err(());
        }
    };
    if data.is_none() {
        tracing::info!(%version, "no Karmada CRD tarball: create a ConfigMap in {ns} labelled {LABEL}={version} with binaryData {KEY}");
    }
    Ok(data)
}
