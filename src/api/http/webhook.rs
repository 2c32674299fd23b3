//! `POST /apis/kairship.io/v1alpha1/webhooks/global-management`: role events from the
//! global management module (the IAM), checked and applied by `auth::webhook`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{header, StatusCode};
use serde_json::json;

use crate::api::context::ApiContext;
use crate::auth::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::error::ApiError;

/// Role events are small; anything bigger is not one.
const MAX_EVENT: usize = 64 * 1024;

fn answer(code: StatusCode, body: serde_json::Value) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn failure(e: &ApiError) -> Response {
    answer(
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        json!({"code": e.code() as i32, "message": e.to_string()}),
    )
}

pub async fn handle(State(ctx): State<ApiContext>, req: Request) -> Response {
    let Some(webhook) = ctx.auth.webhook.as_ref() else {
        return failure(&ApiError::NotFound(
            "the global-management webhook is not enabled (no --webhook-secret-file)".into(),
        ));
    };
    let (parts, body) = req.into_parts();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let body = match crate::api::body::read_limited(body, MAX_EVENT, "a role event").await {
        Ok(b) => b,
        Err(e) => return failure(&e),
    };
    let now = jiff::Timestamp::now().as_second();
    match webhook
        .receive(
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            &body,
            now,
        )
        .await
    {
        Ok(outcome) => answer(StatusCode::OK, json!(outcome)),
        Err(e) => {
            tracing::warn!(error = %e, "role event refused");
            failure(&e)
        }
    }
}
