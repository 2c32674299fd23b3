//! Request metrics for every surface (`kairship_api_requests_total`,
//! `kairship_api_request_duration_seconds`), recorded outside the chain so refusals count
//! too. Label values come from fixed sets only (the API's own gRPC methods, the HTTP
//! verbs), so a stranger's invented methods or paths cannot grow the series.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::{rules, Surface};
use crate::metrics::Metrics;

pub async fn track(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let surface = Surface::of(&req);
    let method = match surface {
        Surface::Grpc => grpc_method(req.uri().path()).to_string(),
        _ => http_method(req.method()).to_string(),
    };
    let start = Instant::now();
    let resp = next.run(req).await;
    let code = match surface {
        Surface::Grpc => {
            // Errors travel as headers (trailers-only); success's status is in the
            // trailers, after the body.
            let code = tonic::Status::from_header_map(resp.headers())
                .map_or(tonic::Code::Ok, |s| s.code());
            format!("{code:?}")
        }
        _ => resp.status().as_str().to_string(),
    };
    metrics.observe(surface.as_str(), &method, &code, start.elapsed());
    resp
}

fn grpc_method(path: &str) -> &str {
    match rules::grpc(path).is_some() || path.starts_with("/grpc.health.v1.Health/") {
        true => path,
        false => "unknown",
    }
}

fn http_method(m: &http::Method) -> &'static str {
    match *m {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invented_methods_share_one_label() {
        assert_eq!(grpc_method("/kairship.v1alpha1.Made/Up"), "unknown");
        assert_eq!(
            grpc_method("/kairship.v1alpha1.InstanceService/ListInstances"),
            "/kairship.v1alpha1.InstanceService/ListInstances"
        );
        let odd = http::Method::from_bytes(b"BREW").expect("method");
        assert_eq!(http_method(&odd), "other");
    }
}
