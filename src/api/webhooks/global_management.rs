//! `POST /apis/kairship.io/v1alpha1/webhooks/global-management`: role events from the
//! global management module (the IAM), checked and applied by `auth::webhook`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{header, StatusCode};
use serde_json::json;

use std::sync::Arc;

use crate::api::chain::audit::{Record, Sink, User};
use crate::api::chain::Surface;
use crate::api::context::ApiContext;
use crate::auth::webhook::{Outcome, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::error::ApiError;

/// Role events are small; anything bigger is not one.
const MAX_EVENT: usize = 64 * 1024;

fn answer_json(code: StatusCode, body: serde_json::Value) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn failure_json(e: &ApiError) -> Response {
    answer_json(
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        json!({"code": e.code() as i32, "message": e.to_string()}),
    )
}

/// The webhook's state: the API's context, and where its audit events go.
#[derive(Clone)]
pub struct Hook {
    pub ctx: ApiContext,
    pub sink: Arc<Sink>,
}

pub async fn handle(State(hook): State<Hook>, req: Request) -> Response {
    let record = Record::of_request(&req, Surface::Rest);
    let answer = receive(&hook.ctx, req).await;
    // The most privileged writes there are: audited, refused or not.
    let user = User {
        username: "global-management".into(),
        uid: String::new(),
        groups: Vec::new(),
    };
    let (code, failure, verb) = match &answer {
        Ok(o) => {
            record.object("instancerolebindings", "kairship.io", None, &o.binding);
            (200, None, o.verb)
        }
        Err(e) => (
            e.http_status(),
            Some((e.k8s_reason().to_string(), e.to_string())),
            "bind",
        ),
    };
    record.update(|f| {
        f.verb = verb.to_string();
        f.writes = true;
        f.decision = Some(match &answer {
            Ok(_) => ("allow", "a signed role event".to_string()),
            Err(e) => ("forbid", e.to_string()),
        });
    });
    if let Some(event) = record.event(user, code, failure) {
        hook.sink.emit(&event);
    }
    match answer {
        Ok(outcome) => answer_json(StatusCode::OK, json!(outcome)),
        Err(e) => {
            tracing::warn!(error = %e, "role event refused");
            failure_json(&e)
        }
    }
}

async fn receive(ctx: &ApiContext, req: Request) -> Result<Outcome, ApiError> {
    let Some(webhook) = ctx.auth.webhook.as_ref() else {
        return Err(ApiError::NotFound(
            "the global-management webhook is not enabled (no --webhook-secret-file)".into(),
        ));
    };
    let (parts, body) = req.into_parts();
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let body = crate::api::body::read_limited(body, MAX_EVENT, "a role event").await?;
    let now = jiff::Timestamp::now().as_second();
    webhook
        .receive(
            header(TIMESTAMP_HEADER),
            header(SIGNATURE_HEADER),
            &body,
            now,
        )
        .await
}
