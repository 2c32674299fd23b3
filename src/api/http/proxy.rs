//! `/apis/kairship.io/v1alpha1/instances/{name}/proxy/{path}`: the instance's own
//! Kubernetes API, so kubectl and any client work with a kubeconfig whose server is that
//! prefix. Get, list (JSON or kubectl's Tables) and watch of cached kinds are answered from
//! the instance's caches (by `cache_read` and `cache_watch`, when the cache can be exact);
//! everything else (writes, other kinds) is passed through as the caller.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::{header, Method};
use kairship_wire::routes::{self, Route};

use super::cache_read;
use super::kube_status::status_response;
pub use super::kube_status::SOURCE_HEADER;
use crate::api::context::ApiContext;
use crate::api::request::query::{cached_kind, parse_bool};
use crate::api::request::{audit, OnInstance, Surface};
use crate::auth::Role;
use crate::error::ApiError;

/// kube-apiserver's own limit on a request body.
const MAX_BODY: usize = 3 * 1024 * 1024;

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

/// The role a proxied request needs, and what it does (for the 403 message). Reads need
/// `view`; writes of namespaced objects and of Karmada's cluster-wide policies need `edit`;
/// any other cluster-scoped write (clusters, namespaces, CRDs, RBAC) needs `admin`.
pub fn required_role(method: &Method, path: &str) -> (Role, String) {
    // Karmada's cluster proxy: what it reaches on the member decides (the member's own
    // bindings of Kairship's groups then decide again, there).
    if let Some(on_member) = member_path(path) {
        let (role, action) = required_role(method, on_member);
        return (role, format!("{action} on a member cluster"));
    }
    let (plural, namespaced) = match routes::parse(path) {
        Route::Resource(rp) => (rp.plural, rp.namespace.is_some()),
        _ => ("the API".to_string(), false),
    };
    let verb = match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => {
            return (Role::View, format!("read {plural}"));
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "change",
    };
    let cluster_policy = matches!(
        plural.as_str(),
        "clusterpropagationpolicies" | "clusteroverridepolicies"
    );
    let need = match namespaced || cluster_policy {
        true => Role::Edit,
        false => Role::Admin,
    };
    (need, format!("{verb} {plural}"))
}

/// The member path of a request through Karmada's cluster proxy
/// (`/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy/{path}`).
fn member_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/apis/cluster.karmada.io/v1alpha1/clusters/")?;
    let (_, after) = rest.split_once('/')?;
    let member = after.strip_prefix("proxy")?;
    match member {
        "" => Some("/"),
        m if m.starts_with('/') => Some(m),
        _ => None,
    }
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
    let path = format!("/{rest}");
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let caller = match ctx.auth.authenticate(authorization) {
        Ok(c) => c,
        Err(e) => return status_response(&e),
    };
    let (need, action) = required_role(req.method(), &path);
    let on = match ctx
        .on_instance(caller, Surface::Proxy, need, &name, &action)
        .await
    {
        Ok(on) => on,
        Err(e) => return status_response(&e),
    };
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
    let watching = query
        .get("watch")
        .is_some_and(|v| parse_bool(v) == Some(true))
        || path.contains("/watch/");
    // Only the head: the body cannot be held across an await by a `Send` handler.
    let (head, body) = req.into_parts();
    match cache_read::answer(&on, &head, &path, &query).await {
        Some(Ok(resp)) if watching => return tagged(until_closing(resp, &ctx), "cache"),
        Some(Ok(resp)) => return tagged(resp, "cache"),
        Some(Err(refused)) => return refused,
        None => {}
    }
    let req = Request::from_parts(head, body);
    let method = req.method().clone();
    // Requests other than watches must be answered within the actors' request bound.
    let within = (!watching).then(|| ctx.tree.settings().request_timeout);
    let answer = pass_through(&on, req, &path, within).await;
    if method != Method::GET {
        let code = match &answer {
            Ok(r) => r.status().as_u16(),
            Err(e) => e.http_status(),
        };
        let (resource, namespace, object) = match routes::parse(&path) {
            Route::Resource(rp) => (rp.plural, rp.namespace, rp.name.unwrap_or_default()),
            _ => (path.clone(), None, String::new()),
        };
        audit::write(
            &on.caller,
            on.surface,
            &name,
            kube_verb(&method),
            &resource,
            namespace.as_deref(),
            &object,
            code,
        );
    }
    match answer {
        Ok(r) if watching => tagged(until_closing(r, &ctx), "instance"),
        Ok(r) => tagged(r, "instance"),
        Err(e) => status_response(&e),
    }
}

/// The verb Kubernetes names an HTTP method by, for the audit line.
fn kube_verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_verb_and_the_scope() {
        let role = |m: Method, p: &str| required_role(&m, p).0;
        assert_eq!(role(Method::GET, "/apis/apps/v1/deployments"), Role::View);
        assert_eq!(
            role(Method::GET, "/api/v1/namespaces/x/secrets/s"),
            Role::View
        );
        assert_eq!(
            role(Method::POST, "/apis/apps/v1/namespaces/x/deployments"),
            Role::Edit
        );
        assert_eq!(
            role(Method::DELETE, "/api/v1/namespaces/x/configmaps/c"),
            Role::Edit
        );
        assert_eq!(
            role(
                Method::PATCH,
                "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/p"
            ),
            Role::Edit
        );
        assert_eq!(role(Method::POST, "/api/v1/namespaces"), Role::Admin);
        assert_eq!(
            role(
                Method::DELETE,
                "/apis/cluster.karmada.io/v1alpha1/clusters/m1"
            ),
            Role::Admin
        );
        let (_, action) = required_role(&Method::PUT, "/apis/apps/v1/namespaces/x/deployments/d");
        assert_eq!(action, "update deployments");
        // Through the cluster proxy, the path on the member decides.
        let member = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy";
        assert_eq!(
            role(Method::GET, &format!("{member}/api/v1/nodes")),
            Role::View
        );
        assert_eq!(
            role(
                Method::POST,
                &format!("{member}/api/v1/namespaces/default/configmaps")
            ),
            Role::Edit
        );
        assert_eq!(
            role(Method::DELETE, &format!("{member}/api/v1/nodes/n1")),
            Role::Admin
        );
        assert_eq!(
            role(
                Method::PATCH,
                "/apis/cluster.karmada.io/v1alpha1/clusters/member1"
            ),
            Role::Admin
        );
    }
}
