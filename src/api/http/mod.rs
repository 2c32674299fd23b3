//! The HTTP routes of each port: the probes port, and on HTTPS the routes outside the
//! handler chain (probes, the console, the webhooks, Karmada's CRD tarballs) and those
//! behind it (the kubectl proxy, REST). kubectl sends bearer tokens only over TLS, so the
//! API port is served with rustls. The surfaces themselves have their own folders:
//! `proxy`, `console`, `webhooks`, `rest`, `grpc`.

mod chaos_report;
mod karmada_crds;

use std::sync::Arc;

use axum::extract::State;
use axum::routing::{any, get, post};
use axum::Router as HttpRouter;

use super::console;
use super::context::ApiContext;
use super::proxy;
use super::rest::Rest;
use super::webhooks::global_management as webhook;

pub use karmada_crds::{KEY as KARMADA_CRDS_KEY, LABEL as KARMADA_CRDS_LABEL};

pub use crate::api::API_PREFIX;

/// `/metrics`, `/healthz`, `/readyz` and Karmada's CRD tarballs (for karmada-operator in
/// an air-gapped cluster), served alone on the plain-HTTP port for probes, scrapers and
/// the operator.
pub fn probes(ctx: ApiContext) -> HttpRouter {
    let crds = HttpRouter::new()
        .route(karmada_crds::PATH, get(karmada_crds::get))
        .with_state(ctx.clone());
    HttpRouter::new()
        .route("/metrics", get(scrape_probes))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(ctx)
        .merge(crds)
}

/// `/metrics` on the plain probes port: no token is asked there, so series naming an
/// instance are left out unless the operator says the port is Prometheus's alone
/// (`--probes-instance-series`); HTTPS `/metrics` serves them to a caller with a role on
/// every instance.
async fn scrape_probes(State(ctx): State<ApiContext>) -> axum::response::Response {
    match ctx.tree.settings().probes_instance_series {
        true => scrape(State(ctx)).await,
        false => {
            let body = ctx.metrics.render(&ctx.tree, &ctx.instances()).await;
            text(without_instances(&body))
        }
    }
}

/// `/metrics` in the Prometheus text format.
async fn scrape(State(ctx): State<ApiContext>) -> axum::response::Response {
    text(ctx.metrics.render(&ctx.tree, &ctx.instances()).await)
}

fn text(body: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `text` without the samples labelled with an instance.
fn without_instances(text: &str) -> String {
    text.lines()
        .filter(|l| l.starts_with('#') || !l.contains("karmada_instance=\""))
        .flat_map(|l| [l, "\n"])
        .collect()
}

async fn readyz(State(ctx): State<ApiContext>) -> (http::StatusCode, String) {
    let unverifiable = ctx.forwarder.as_ref().and_then(|f| f.unverifiable());
    let not_ready = |why: &str| {
        (
            http::StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}"),
        )
    };
    match (ctx.drain.serving(), ctx.is_ready(), unverifiable) {
        (false, _, _) => not_ready("shutting down"),
        (true, false, _) => not_ready("the instance and binding caches are still listing"),
        (true, true, Some(why)) => not_ready(&why),
        (true, true, None) => (http::StatusCode::OK, "ok".into()),
    }
}

/// The HTTPS routes that need no token, mounted beside the handler chain: the probes, the
/// console's files and configuration, the OpenAPI document, Karmada's CRD tarballs (for
/// karmada-operator), and the HMAC-signed global-management webhook, which audits itself
/// (`sink`).
pub fn public(ctx: ApiContext, sink: Arc<crate::api::chain::audit::Sink>) -> HttpRouter {
    let crds = HttpRouter::new()
        .route(karmada_crds::PATH, get(karmada_crds::get))
        .with_state(ctx.clone());
    let hook = HttpRouter::new()
        .route(
            &format!("{API_PREFIX}/webhooks/global-management"),
            post(webhook::handle),
        )
        .with_state(webhook::Hook {
            ctx: ctx.clone(),
            sink,
        });
    HttpRouter::new()
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
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(ctx)
        .merge(crds)
        .merge(hook)
}

/// The HTTPS routes behind the handler chain: the proxy, the chaos report, `/metrics`
/// (it names every instance) and REST (everything else under the API prefix).
pub fn protected(
    ctx: ApiContext,
    rest: Arc<Rest>,
    chaos_reports: Option<std::path::PathBuf>,
) -> HttpRouter {
    let reports = chaos_report::Reports { dir: chaos_reports };
    HttpRouter::new()
        .route(
            &format!("{API_PREFIX}{}", chaos_report::PATH),
            get(chaos_report::file).with_state(reports),
        )
        .route("/metrics", get(scrape))
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy"),
            any(proxy::handle_root),
        )
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy/{{*rest}}"),
            any(proxy::handle),
        )
        .with_state(ctx)
        .fallback_service(any(super::rest::handle).with_state(rest))
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_probes_port_names_no_instance() {
        let text = "# HELP kairship_instance_phase 1 for the phase each instance is in\n\
# TYPE kairship_instance_phase gauge\n\
kairship_instance_phase{karmada_instance=\"payments-prod\",phase=\"Running\"} 1\n\
kairship_api_requests_total{surface=\"proxy\",method=\"unknown\",code=\"200\"} 3\n";
        let out = super::without_instances(text);
        assert!(!out.contains("payments-prod"), "{out}");
        assert!(out.contains("kairship_api_requests_total") && out.contains("# HELP"));
    }
}
