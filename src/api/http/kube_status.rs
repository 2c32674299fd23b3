//! The proxy's answers in Kubernetes' own shapes: failure `Status` objects (serialized by
//! the wire crate, as kube-apiserver does) and JSON bodies, shared by the pass-through and
//! the cached reads and watches.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, StatusCode};

use crate::error::ApiError;

/// A `meta/v1 Status` for an API error, as kubectl expects.
pub fn status_response(e: &ApiError) -> Response {
    k8s_status(
        e.http_status(),
        e.k8s_reason(),
        &e.to_string(),
        e.k8s_details(),
    )
}

/// A failure `Status` with kube-apiserver's field order (kind, apiVersion, metadata,
/// status, message, reason, details, code).
pub fn k8s_status(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> Response {
    let body = kairship_wire::status::failure_bytes(code, reason, message, details.as_ref());
    json_response(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body.into(),
    )
}

pub fn json_response(code: StatusCode, body: Bytes) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

/// Says where an answer came from: `cache` or `instance`. A request carrying
/// `x-kairship-source: instance` is passed through, to compare the cache with the instance.
pub const SOURCE_HEADER: &str = "x-kairship-source";
