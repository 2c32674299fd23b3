//! The HTTPS surface: probes, the kubectl-compatible proxy to each instance, and REST
//! (everything else under the API prefix, transcoded to the gRPC methods). kubectl sends
//! bearer tokens only over TLS, so this is served with rustls.

mod cache_read;
mod cache_watch;
mod chaos_report;
mod console;
mod karmada_crds;
pub(crate) mod kube_status;
pub mod proxy;
pub mod tls;
mod webhook;

use std::sync::Arc;

use axum::routing::{any, get, post};
use axum::Router as HttpRouter;

use super::context::ApiContext;
use super::rest::Rest;
pub use tls::serve_tls;

pub use karmada_crds::{KEY as KARMADA_CRDS_KEY, LABEL as KARMADA_CRDS_LABEL};

pub const API_PREFIX: &str = "/apis/kairship.io/v1alpha1";

/// `/metrics`, `/healthz`, `/readyz` and Karmada's CRD tarballs (for karmada-operator in
/// an air-gapped cluster): part of the HTTPS app, and served alone on the optional
/// plain-HTTP port for probes, scrapers and the operator.
pub fn probes(ctx: ApiContext) -> HttpRouter {
    let metrics = ctx.metrics.clone();
    let scrape = {
        let (metrics, ctx) = (metrics.clone(), ctx.clone());
        move || {
            let (metrics, ctx) = (metrics.clone(), ctx.clone());
            async move {
                let body = metrics.render(&ctx.tree, &ctx.instances()).await;
                (
                    [(
                        http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    body,
                )
            }
        }
    };
    let crds = HttpRouter::new()
        .route(karmada_crds::PATH, get(karmada_crds::get))
        .with_state(ctx.clone());
    HttpRouter::new()
        .merge(crds)
        .route("/metrics", get(scrape))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let answer = match (ctx.drain.serving(), ctx.is_ready()) {
                    (false, _) => (
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: shutting down",
                    ),
                    (true, true) => (http::StatusCode::OK, "ok"),
                    (true, false) => (
                        http::StatusCode::SERVICE_UNAVAILABLE,
                        "not ready: the instance and binding caches are still listing",
                    ),
                };
                async move { answer }
            }),
        )
}

/// The HTTPS app; `chaos_reports` is where `kairship chaos run` writes its report, if any.
pub fn app(
    ctx: ApiContext,
    rest: Arc<Rest>,
    chaos_reports: Option<std::path::PathBuf>,
) -> HttpRouter {
    let metrics = ctx.metrics.clone();
    let reports = chaos_report::Reports {
        ctx: ctx.clone(),
        dir: chaos_reports,
    };
    HttpRouter::new()
        .route(
            &format!("{API_PREFIX}{}", chaos_report::PATH),
            get(chaos_report::file).with_state(reports),
        )
        .route(
            &format!("{}/config.json", console::PREFIX),
            get(console::config),
        )
        .route(console::PREFIX, get(console::redirect))
        .route(&format!("{}/", console::PREFIX), get(console::index))
        .route(
            &format!("{}/{{*path}}", console::PREFIX),
            get(console::file),
        )
        .route(crate::api::openapi::PATH, get(console::openapi))
        .route(
            &format!("{API_PREFIX}/webhooks/global-management"),
            post(webhook::handle),
        )
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy"),
            any(proxy::handle_root),
        )
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy/{{*rest}}"),
            any(proxy::handle),
        )
        .with_state(ctx.clone())
        .merge(probes(ctx.clone()))
        .fallback_service(any(super::rest::handle).with_state(rest))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            crate::metrics::track,
        ))
        .layer(axum::middleware::from_fn_with_state(
            ctx.drain,
            crate::api::drain::close_keepalives,
        ))
}

/// Serves `app` over plain HTTP (the probes port) until `shutdown` resolves.
pub async fn serve_plain(
    listener: tokio::net::TcpListener,
    app: HttpRouter,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the probes and metrics port stopped");
    }
}
