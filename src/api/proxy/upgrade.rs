//! Upgraded connections through the proxy: `kubectl exec`, `attach`, `port-forward` and
//! `cp` (WebSocket, or SPDY from older clients), as kube-apiserver's own proxy passes them:
//! the request goes to the instance as the caller on an HTTP/1.1 connection of its own,
//! and once the instance switches protocols (`101`) the two connections are joined byte
//! for byte until either side ends. Karmada's cluster proxy takes them on to the member,
//! whose RBAC decides again for the caller; the chain has already asked `create` on the
//! subresource (`edit`), as kube-apiserver authorizes them.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{header, HeaderName, StatusCode};
use hyper_util::rt::TokioIo;

use crate::api::answer::status_response;
use crate::api::chain::fairness::SessionGuards;
use crate::api::context::ApiContext;
use crate::api::drain::Phase;
use crate::api::request::OnInstance;
use crate::error::ApiError;

/// What an upgrade request carries that the instance needs (WebSocket's handshake, SPDY's
/// stream protocol versions); credentials and a client's `Impersonate-*` never pass.
const REQUEST_HEADERS: [HeaderName; 8] = [
    header::UPGRADE,
    header::CONNECTION,
    header::SEC_WEBSOCKET_KEY,
    header::SEC_WEBSOCKET_VERSION,
    header::SEC_WEBSOCKET_PROTOCOL,
    HeaderName::from_static("x-stream-protocol-version"),
    header::CONTENT_TYPE,
    header::USER_AGENT,
];

/// What the instance's `101` answers with that the client checks.
const ANSWER_HEADERS: [HeaderName; 5] = [
    header::UPGRADE,
    header::CONNECTION,
    header::SEC_WEBSOCKET_ACCEPT,
    header::SEC_WEBSOCKET_PROTOCOL,
    HeaderName::from_static("x-stream-protocol-version"),
];

/// Whether `req` asks to switch protocols (`Connection: Upgrade` with an `Upgrade`).
pub fn requested<B>(req: &http::Request<B>) -> bool {
    let connection_upgrade = req
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade && req.headers().contains_key(header::UPGRADE)
}

/// Passes the upgrade request `req` for `path` on `on`; `within` bounds the wait for the
/// instance's answer. The session holds one of the instance's pass-through stream slots
/// (and the caller's long-running slot, through [`SessionGuards`]) while it runs, and ends
/// when the server closes.
pub async fn pass(
    ctx: &ApiContext,
    on: &OnInstance,
    mut req: Request,
    path: &str,
    within: Duration,
) -> Response {
    let slot = match on.open_stream() {
        Ok(slot) => slot,
        Err(e) => return status_response(&e),
    };
    let client_side = hyper::upgrade::on(&mut req);
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut builder = http::Request::builder()
        .method(req.method().clone())
        .uri(&uri);
    for h in &REQUEST_HEADERS {
        for v in req.headers().get_all(h) {
            builder = builder.header(h, v.clone());
        }
    }
    let outgoing = match builder.body(kube::client::Body::empty()) {
        Ok(r) => r,
        Err(e) => return status_response(&ApiError::invalid("path", e.to_string())),
    };
    let mut answer = match on.send_upgrade(outgoing, within).await {
        Ok(r) => r,
        Err(e) => return status_response(&e),
    };
    if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
        // A refusal (403 from the member's RBAC, 404, 400): the instance's Status as is.
        let (parts, body) = answer.into_parts();
        let mut out = Response::new(Body::new(body));
        *out.status_mut() = parts.status;
        if let Some(v) = parts.headers.get(header::CONTENT_TYPE) {
            out.headers_mut().insert(header::CONTENT_TYPE, v.clone());
        }
        return out;
    }
    let instance_side = hyper::upgrade::on(&mut answer);
    let mut out = Response::new(Body::empty());
    *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for h in &ANSWER_HEADERS {
        for v in answer.headers().get_all(h) {
            out.headers_mut().append(h, v.clone());
        }
    }
    let guards = SessionGuards::default();
    out.extensions_mut().insert(guards.clone());
    let drain = ctx.drain.clone();
    let instance = on.instance().to_string();
    let span = tracing::debug_span!("session", instance = %instance, path = %path);
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let _held = (slot, guards);
            let (client, server) = match tokio::try_join!(client_side, instance_side) {
                Ok(both) => both,
                Err(e) => {
                    tracing::debug!(error = %e, "upgraded connection not established");
                    return;
                }
            };
            let (mut client, mut server) = (TokioIo::new(client), TokioIo::new(server));
            tokio::select! {
                copied = tokio::io::copy_bidirectional(&mut client, &mut server) => match copied {
                    Ok((up, down)) => tracing::debug!(up, down, "session ended"),
                    Err(e) => tracing::debug!(error = %e, "session ended"),
                },
                _ = drain.reached(Phase::Closing) => tracing::debug!("session ended: the server is closing"),
            }
        },
        span,
    ));
    out
}
