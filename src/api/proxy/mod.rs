//! `/apis/kairship.io/v1alpha1/instances/{name}/proxy/{path}`: the instance's own
//! Kubernetes API, so kubectl and any client work with a kubeconfig whose server is that
//! prefix. Get, list (JSON or kubectl's Tables) and watch of cached kinds are answered from
//! the instance's caches (by `cache_read` and `cache_watch`, when the cache can be exact);
//! everything else (writes, other kinds) is passed through as the caller, upgraded
//! connections (exec, attach, port-forward) by `proxy_upgrade`.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{header, Method};

mod cache_read;
mod cache_watch;
mod list_body;
mod upgrade;

use crate::api::answer::status_response;
pub use crate::api::answer::SOURCE_HEADER;
use crate::api::chain::fairness::hold_until_done;
use crate::api::chain::Authorized;
use crate::api::context::ApiContext;
use crate::api::request::query::cached_kind;
use crate::api::request::OnInstance;
use crate::api::request_info::RequestInfo;
use crate::error::ApiError;

/// kube-apiserver's own limit on a request body.
const MAX_BODY: usize = crate::api::chain::resolve::MAX_REST_BODY;

fn tagged(mut r: Response, source: &'static str) -> Response {
    r.headers_mut()
        .insert(SOURCE_HEADER, http::HeaderValue::from_static(source));
    r
}

pub async fn handle_root(
    State(ctx): State<ApiContext>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    serve(ctx, name, String::new(), req).await
}

pub async fn handle(
    State(ctx): State<ApiContext>,
    Path((name, rest)): Path<(String, String)>,
    req: Request,
) -> Response {
    serve(ctx, name, rest, req).await
}

async fn serve(ctx: ApiContext, name: String, rest: String, req: Request) -> Response {
    use tracing::Instrument;
    let span = tracing::debug_span!("proxy", instance = %name);
    serve_in_span(ctx, name, rest, req).instrument(span).await
}

/// Ends a watch's stream cleanly during the server's graceful shutdown: the client sees
/// the end of a watch, as at a timeout, and resumes from its last version. A watch begun
/// before the shutdown ends as soon as it starts: its HTTP/1.1 connection was kept alive,
/// and a client that re-watches on it now is answered (with `Connection: close`, see
/// `api::drain`), where one re-watching just as the listener closed would find the
/// connection gone under its request. Watches begun since end when the server closes;
/// their clients then know to reconnect, and reach another replica.
fn until_closing(resp: Response, ctx: &ApiContext) -> Response {
    use crate::api::drain::Phase;
    use futures::StreamExt;
    let drain = ctx.drain.clone();
    let end = match drain.serving() {
        true => Phase::Draining,
        false => Phase::Closing,
    };
    let (parts, body) = resp.into_parts();
    let stream = body
        .into_data_stream()
        .take_until(async move { drain.reached(end).await });
    Response::from_parts(parts, Body::from_stream(stream))
}

async fn serve_in_span(ctx: ApiContext, name: String, rest: String, req: Request) -> Response {
    // The path and flags as the edge decoded them, which the chain decided on.
    let info = RequestInfo::of(&req);
    let path = match &info.proxied {
        Some((_, on)) => on.clone(),
        None => format!("/{rest}"),
    };
    // The chain authenticated, audits and authorized the request (`chain::rules::proxy`).
    let authorized = match Authorized::of_http(req.extensions()) {
        Ok(a) => a,
        Err(e) => return status_response(&e),
    };
    let on = match ctx.on_instance(&authorized, &name).await {
        Ok(on) => on,
        Err(e) => return status_response(&e),
    };
    let resp = answer_on(&ctx, &on, &info, &path, req).await;
    on.count_answer(resp.status());
    resp
}

/// The answer for an instance the request was routed to.
async fn answer_on(
    ctx: &ApiContext,
    on: &OnInstance,
    info: &RequestInfo,
    path: &str,
    req: Request,
) -> Response {
    let query: HashMap<String, String> = match req.uri().query() {
        Some(q) => match serde_urlencoded::from_str(q) {
            Ok(q) => q,
            Err(e) => {
                return status_response(&ApiError::invalid(
                    "query",
                    format!("not a valid query string: {e}"),
                ))
            }
        },
        None => HashMap::new(),
    };
    if upgrade::requested(&req) {
        let within = ctx.tree.settings().request_timeout;
        return tagged(upgrade::pass(ctx, on, req, path, within).await, "instance");
    }
    let watching = info.watching;
    // Only the head: the body cannot be held across an await by a `Send` handler.
    let (head, body) = req.into_parts();
    match cache_read::answer(on, &head, path, &query).await {
        Some(Ok(resp)) if watching => return tagged(until_closing(resp, ctx), "cache"),
        Some(Ok(resp)) => return tagged(resp, "cache"),
        Some(Err(refused)) => return refused,
        None => {}
    }
    // A watch passed through holds a stream of the instance's one connection for as long
    // as it runs: a bounded number of them, so reads always find a stream.
    let streaming = watching || info.following;
    let stream = match streaming {
        true => match on.open_stream() {
            Ok(slot) => Some(slot),
            Err(e) => return status_response(&e),
        },
        false => None,
    };
    let req = Request::from_parts(head, body);
    // Requests other than watches must be answered within the actors' request bound.
    let within = (!watching).then(|| ctx.tree.settings().request_timeout);
    let answer = pass_through(on, req, path, within).await;
    let answer = match (answer, stream) {
        (Ok(r), Some(slot)) => Ok(hold_until_done(r, slot)),
        (other, _) => other,
    };
    match answer {
        Ok(r) if watching => tagged(until_closing(r, ctx), "instance"),
        Ok(r) => tagged(r, "instance"),
        Err(e) => status_response(&e),
    }
}

/// Forwards the request as the caller and streams the answer back; `within` bounds the
/// wait for the answer's head (none for a watch).
async fn pass_through(
    on: &OnInstance,
    req: Request,
    path: &str,
    within: Option<Duration>,
) -> Result<Response, ApiError> {
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let method = req.method().clone();
    let mut builder = http::Request::builder()
        .method(req.method().clone())
        .uri(&uri);
    // A client's own Impersonate-* headers are never passed on: only these are.
    for h in [header::ACCEPT, header::CONTENT_TYPE, header::USER_AGENT] {
        if let Some(v) = req.headers().get(&h) {
            builder = builder.header(h, v.clone());
        }
    }
    let body =
        crate::api::body::read_limited(req.into_body(), MAX_BODY, "the request body").await?;
    let outgoing = builder
        .body(kube::client::Body::from(body.to_vec()))
        .map_err(|e| ApiError::invalid("path", e.to_string()))?;
    let resp = on.send(outgoing, within).await?;
    let (parts, body) = resp.into_parts();
    // A successful write of a cached kind: remember the version it produced, so the next
    // cached read waits for the cache to have it.
    let written = cached_kind(path)
        .map(|(kind, _)| kind)
        .filter(|_| method != Method::GET && parts.status.is_success());
    let body = match written {
        Some(kind) => {
            let bytes = crate::api::body::read_limited(
                Body::new(body),
                16 * MAX_BODY,
                "the instance's answer",
            )
            .await?;
            let rv = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| {
                    v["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|r| r.parse::<u64>().ok())
                });
            if let Some(rv) = rv {
                on.mark_written(kind, rv);
            }
            Body::from(bytes)
        }
        None => Body::new(body),
    };
    let mut out = Response::new(body);
    *out.status_mut() = parts.status;
    for h in [header::CONTENT_TYPE, header::CACHE_CONTROL] {
        if let Some(v) = parts.headers.get(&h) {
            out.headers_mut().insert(h, v.clone());
        }
    }
    Ok(out)
}
