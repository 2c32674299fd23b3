//! How each surface answers, failures above all: the proxy in Kubernetes' own shapes
//! (failure `Status` objects serialized by the wire crate, as kube-apiserver does, and JSON
//! bodies), REST as `google.rpc.Status` JSON, gRPC as a trailers-only status. The handler
//! chain refuses in these words on every surface, before any handler runs.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, StatusCode};

use serde_json::json;
use tonic::Status;

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
        Bytes::from(body),
    )
}

pub fn json_response(code: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = Response::new(body.into());
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

/// A failed REST call: the `google.rpc.Status` to report and the HTTP status it is answered
/// with, which comes from the error itself when the failure is Kairship's (a body too
/// large is RESOURCE_EXHAUSTED to gRPC but 413 to HTTP).
pub struct Failure {
    status: Status,
    http: u16,
}

impl From<Status> for Failure {
    fn from(status: Status) -> Self {
        let http = crate::error::http_status_of(status.code());
        Self { status, http }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let http = e.http_status();
        Self {
            status: e.into(),
            http,
        }
    }
}

/// `google.rpc.Status` as JSON, with BadRequest field violations when there are any.
pub fn rest_failure(f: &Failure) -> Response {
    use tonic_types::StatusExt;
    let s = &f.status;
    let mut details = Vec::new();
    if let Some(br) = s.get_details_bad_request() {
        let violations: Vec<_> = br
            .field_violations
            .iter()
            .map(|v| json!({"field": v.field, "description": v.description}))
            .collect();
        details.push(json!({"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}));
    }
    let body = json!({"code": s.code() as i32, "message": s.message(), "details": details});
    let status = StatusCode::from_u16(f.http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, Bytes::from(body.to_string()))
}

/// A gRPC failure: HTTP 200 with the status in the headers (trailers-only), as tonic
/// answers.
pub fn grpc_failure(e: &ApiError) -> Response {
    let status: Status = e.clone().into();
    status.into_http::<Body>()
}
