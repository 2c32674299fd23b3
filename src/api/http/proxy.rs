//! `/apis/kairship.io/v1alpha1/instances/{name}/proxy/{path}`: the instance's own
//! Kubernetes API, so kubectl and any client work with a kubeconfig whose server is that
//! prefix. JSON get, list and watch of cached kinds are answered from the instance's
//! caches (watches by `cache_watch`, when the cache can be exact); everything else
//! (Tables, writes, other kinds) is passed through.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use base64::Engine;
use bytes::Bytes;
use http::{header, Method, StatusCode};
use kairship_sim::selectors::FieldSelector;
use kairship_sim::server::routes::{self, Route};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::actors::instance::caches::Kind;
use crate::actors::instance::feed::{rv_of, Feed};
use crate::api::error::ApiError;
use crate::api::paging;
use crate::api::router::{Routed, Router};
use crate::auth::Role;

/// Requests other than watches must be answered within this.
const PASS_THROUGH_TIMEOUT: Duration = Duration::from_secs(30);
/// kube-apiserver's own limit on a request body.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A `meta/v1 Status` for an API error, as kubectl expects.
pub fn status_response(e: &ApiError) -> Response {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": e.to_string(), "reason": e.k8s_reason(), "code": e.http_status(),
    });
    json_response(
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        status.to_string().into(),
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

fn tagged(mut r: Response, source: &'static str) -> Response {
    r.headers_mut()
        .insert(SOURCE_HEADER, http::HeaderValue::from_static(source));
    r
}

pub async fn handle_root(
    State(router): State<Router>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    serve(router, name, String::new(), req).await
}

pub async fn handle(
    State(router): State<Router>,
    Path((name, rest)): Path<(String, String)>,
    req: Request,
) -> Response {
    serve(router, name, rest, req).await
}

/// The role a proxied request needs, and what it does (for the 403 message). Reads need
/// `view`; writes of namespaced objects and of Karmada's cluster-wide policies need `edit`;
/// any other cluster-scoped write (clusters, namespaces, CRDs, RBAC) needs `admin`.
pub fn required_role(method: &Method, path: &str) -> (Role, String) {
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

async fn serve(router: Router, name: String, rest: String, req: Request) -> Response {
    let span = tracing::debug_span!("proxy", instance = %name);
    let _g = span.enter();
    let path = format!("/{rest}");
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let caller = match router.auth.authenticate(authorization) {
        Ok(c) => c,
        Err(e) => return status_response(&e),
    };
    let (need, action) = required_role(req.method(), &path);
    if let Err(e) = router.authorize(&caller, need, &name, &action) {
        return status_response(&e);
    }
    let routed = match router.route("instance", &name).await {
        Ok(r) => r,
        Err(e) => return status_response(&e),
    };
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| serde_urlencoded::from_str(q).unwrap_or_default())
        .unwrap_or_default();
    if let Some(resp) = from_cache(&routed, &req, &path, &query) {
        return tagged(resp, "cache");
    }
    match pass_through(&routed, req, &path).await {
        Ok(r) => tagged(r, "instance"),
        Err(e) => status_response(&e),
    }
}

fn wants_table(req: &Request) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

/// Answers JSON get/list of a cached kind from the cache; `None` passes the request on.
fn from_cache(
    routed: &Routed,
    req: &Request,
    path: &str,
    q: &HashMap<String, String>,
) -> Option<Response> {
    let forced = req
        .headers()
        .get(SOURCE_HEADER)
        .is_some_and(|v| v == "instance");
    if forced || req.method() != Method::GET || wants_table(req) {
        return None;
    }
    let Route::Resource(rp) = routes::parse(path) else {
        return None;
    };
    if rp.subresource.is_some() || rp.watch_prefix {
        return None;
    }
    let kind = Kind::ALL.into_iter().find(|k| {
        let r = k.resource();
        r.group == rp.group && r.version == rp.version && r.plural == rp.plural
    })?;
    let store = routed.stores.get(&kind)?;
    let ar = kind.resource();
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
        return super::cache_watch::serve(routed, kind, &rp, q);
    }
    if let Some(name) = &rp.name {
        let mut key = ObjectRef::new_with(name, ar.clone());
        if let Some(ns) = &rp.namespace {
            key = key.within(ns);
        }
        return Some(match store.get(&key) {
            // One object: no eviction pass (the next LIST does that).
            Some(o) => json_response(
                StatusCode::OK,
                routed.json.render(&[&*o], usize::MAX / 4).swap_remove(0),
            ),
            None => not_found(&ar.plural, &ar.group, name),
        });
    }
    let selection = match Selection::parse(rp.namespace.clone(), q) {
        Ok(sel) => sel,
        Err(e) => return Some(status_response(&e)),
    };
    let objects = store.state();
    // The feed's version also counts deletions, which leave no object behind.
    let newest = objects
        .iter()
        .map(|o| rv_of(o))
        .chain(routed.feeds.get(&kind).map(Feed::last_rv))
        .max()
        .unwrap_or(0);
    // A client asking for a version the cache has not seen yet is served by the instance.
    if let Some(rv) = q.get("resourceVersion").and_then(|r| r.parse::<u64>().ok()) {
        if rv > newest {
            return None;
        }
    }
    let key = |o: &DynamicObject| {
        (
            o.metadata.namespace.clone().unwrap_or_default(),
            o.metadata.name.clone().unwrap_or_default(),
        )
    };
    let mut items: Vec<((String, String), &DynamicObject)> = objects
        .iter()
        .filter(|o| selection.matches(o))
        .map(|o| (key(o), &**o))
        .collect();
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    if let Some(after) = q.get("continue").filter(|c| !c.is_empty()) {
        let Some((ns, name)) = engine
            .decode(after)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| {
                s.split_once('/')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
            })
        else {
            return Some(status_response(&ApiError::invalid(
                "continue",
                "not a continue token this server issued",
            )));
        };
        let after = (ns, name);
        items.retain(|(k, _)| *k > after);
    }
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let mut meta = json!({"resourceVersion": newest.to_string()});
    if let Some(l) = limit {
        if items.len() > l {
            meta["remainingItemCount"] = json!(items.len() - l);
            items.truncate(l);
            meta["continue"] = json!(items
                .last()
                .map(|((ns, name), _)| engine.encode(format!("{ns}/{name}"))));
        }
    }
    let refs: Vec<&DynamicObject> = items.iter().map(|(_, o)| *o).collect();
    let rendered = routed.json.render(&refs, objects.len());
    let head =
        json!({"kind": format!("{}List", ar.kind), "apiVersion": ar.api_version, "metadata": meta})
            .to_string();
    let mut body = bytes::BytesMut::with_capacity(
        head.len() + rendered.iter().map(|b| b.len() + 1).sum::<usize>() + 16,
    );
    // The head without its closing brace, then the items copied as they are.
    body.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
    body.extend_from_slice(b",\"items\":[");
    for (i, b) in rendered.iter().enumerate() {
        if i > 0 {
            body.extend_from_slice(b",");
        }
        body.extend_from_slice(b);
    }
    body.extend_from_slice(b"]}");
    Some(json_response(StatusCode::OK, body.freeze()))
}

/// What a list or watch selects: namespace, label selector, field selector.
pub struct Selection {
    namespace: Option<String>,
    labels: kairship_sim::selectors::LabelSelector,
    fields: FieldSelector,
}

impl Selection {
    pub fn parse(namespace: Option<String>, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let labels = paging::selector(Some(&crate::proto::ListOptions {
            label_selector: q.get("labelSelector").cloned().unwrap_or_default(),
            ..Default::default()
        }))?;
        let fields = FieldSelector::parse(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
            .map_err(|e| ApiError::invalid("fieldSelector", e.message))?;
        Ok(Self {
            namespace,
            labels,
            fields,
        })
    }

    pub fn matches(&self, o: &DynamicObject) -> bool {
        let m = &o.metadata;
        self.namespace
            .as_ref()
            .is_none_or(|ns| m.namespace.as_ref() == Some(ns))
            && paging::labels_match(&self.labels, m.labels.as_ref())
            && (self.fields.is_empty()
                || self
                    .fields
                    .matches(&json!({"metadata": {"name": m.name, "namespace": m.namespace}})))
    }
}

fn not_found(plural: &str, group: &str, name: &str) -> Response {
    let what = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{what} \"{name}\" not found"), "reason": "NotFound",
        "details": {"name": name, "group": group, "kind": plural}, "code": 404});
    json_response(StatusCode::NOT_FOUND, status.to_string().into())
}

/// Forwards the request with the instance's own credentials and streams the answer back.
async fn pass_through(routed: &Routed, req: Request, path: &str) -> Result<Response, ApiError> {
    let client = routed.client.clone().ok_or_else(|| {
        ApiError::Unavailable(format!("instance {:?} is not connected", routed.name))
    })?;
    let watching = req
        .uri()
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"))
        || path.contains("/watch/");
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut builder = http::Request::builder()
        .method(req.method().clone())
        .uri(&uri);
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
    let send = client.send(outgoing);
    let resp = if watching {
        send.await
    } else {
        tokio::time::timeout(PASS_THROUGH_TIMEOUT, send)
            .await
            .map_err(|_| {
                ApiError::DeadlineExceeded(format!(
                    "instance {:?} did not answer within {PASS_THROUGH_TIMEOUT:?}",
                    routed.name
                ))
            })?
    };
    let resp =
        resp.map_err(|e| ApiError::Unavailable(format!("instance {:?}: {e}", routed.name)))?;
    let (parts, body) = resp.into_parts();
    let mut out = Response::new(Body::new(body));
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
    }
}
