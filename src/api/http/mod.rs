//! The HTTPS surface: health probes and the kubectl-compatible proxy to each instance
//! (REST transcoding joins it here). kubectl sends bearer tokens only over TLS, so this
//! is served with rustls.

pub mod proxy;
mod tls;

use axum::routing::{any, get};
use axum::Router as HttpRouter;

use super::router::Router;
pub use tls::serve_tls;

pub const API_PREFIX: &str = "/apis/kairship.io/v1alpha1";

pub fn app(router: Router) -> HttpRouter {
    HttpRouter::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy"),
            any(proxy::handle_root),
        )
        .route(
            &format!("{API_PREFIX}/instances/{{name}}/proxy/{{*rest}}"),
            any(proxy::handle),
        )
        .with_state(router)
}
