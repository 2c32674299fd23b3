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
use kairship_sim::server::routes::{self, ResourcePath, Route};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::proxy_access::{audit, identity_on, review_read};
use crate::actors::instance::access::Identity;
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
    k8s_status(e.http_status(), e.k8s_reason(), &e.to_string(), None)
}

/// A failure `Status` with kube-apiserver's field order (kind, apiVersion, metadata,
/// status, message, reason, details, code).
pub(super) fn k8s_status(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> Response {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status<'a> {
        kind: &'static str,
        api_version: &'static str,
        metadata: serde_json::Value,
        status: &'static str,
        message: &'a str,
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
        code: u16,
    }
    let body = serde_json::to_vec(&Status {
        kind: "Status",
        api_version: "v1",
        metadata: json!({}),
        status: "Failure",
        message,
        reason,
        details,
        code,
    })
    .unwrap_or_default();
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
    let identity = identity_on(&router, &caller, &name);
    if let Some((kind, rp)) = cacheable(&routed, &req, &path) {
        if let Some(who) = &identity {
            if let Err(resp) = review_read(&routed, who, &rp, &query).await {
                return resp;
            }
        }
        if caught_up(&routed, kind).await {
            if let Some(resp) = from_cache(&routed, kind, &rp, &query) {
                return tagged(resp, "cache");
            }
        }
    }
    let (method, writes) = (req.method().clone(), req.method() != Method::GET);
    let answer = pass_through(&routed, req, &path, identity.as_ref()).await;
    if writes {
        audit(&caller, &name, &method, &path, &answer);
    }
    match answer {
        Ok(r) => tagged(r, "instance"),
        Err(e) => status_response(&e),
    }
}

/// Whether the cache has seen the newest write of `kind` made through Kairship, waiting
/// up to a second for it; when it has not, the read goes to the instance.
async fn caught_up(routed: &Routed, kind: Kind) -> bool {
    let want = routed.writes.get(kind);
    let Some(feed) = routed.feeds.get(&kind) else {
        return want == 0;
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while feed.last_rv() < want {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// The cached kind a path names, if any.
fn cached_kind(path: &str) -> Option<Kind> {
    let Route::Resource(rp) = routes::parse(path) else {
        return None;
    };
    Kind::ALL.into_iter().find(|k| {
        let r = k.resource();
        r.group == rp.group && r.version == rp.version && r.plural == rp.plural
    })
}

/// A boolean query parameter as kube-apiserver converts it: `0` or `false` in any case is
/// false, anything else (`True`, `TRUE`, `1`, `t`, even empty) true.
pub fn parse_bool(v: &str) -> Option<bool> {
    Some(!(v == "0" || v.eq_ignore_ascii_case("false")))
}

fn wants_table(req: &Request) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

/// The cached kind a request reads, when the cache may answer it: a JSON GET (not a
/// Table) of a kind this instance caches, not forced to the instance.
fn cacheable(routed: &Routed, req: &Request, path: &str) -> Option<(Kind, ResourcePath)> {
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
    routed.stores.contains_key(&kind).then_some((kind, rp))
}

/// Answers JSON get/list/watch of a cached kind from the cache; `None` passes the request on.
fn from_cache(
    routed: &Routed,
    kind: Kind,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
) -> Option<Response> {
    let store = routed.stores.get(&kind)?;
    let ar = kind.resource();
    if let Some(w) = q.get("watch") {
        if parse_bool(w) == Some(true) {
            return super::cache_watch::serve(routed, kind, rp, q);
        }
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
    if let Some(rv) = q.get("resourceVersion").filter(|r| !r.is_empty()) {
        match rv.parse::<u64>() {
            Ok(rv) if rv > newest => return None,
            Ok(_) => {}
            Err(_) => {
                return Some(status_response(&ApiError::invalid(
                    "resourceVersion",
                    format!("invalid resourceVersion {rv:?}"),
                )))
            }
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
    let limit = match q.get("limit").map(|l| (l, l.parse::<usize>())) {
        None => None,
        Some((_, Ok(l))) => Some(l).filter(|l| *l > 0),
        Some((l, Err(_))) => {
            return Some(status_response(&ApiError::invalid(
                "limit",
                format!("invalid limit {l:?}"),
            )))
        }
    };
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
    let mut details = json!({"name": name, "kind": plural});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    k8s_status(
        404,
        "NotFound",
        &format!("{what} \"{name}\" not found"),
        Some(details),
    )
}

/// Forwards the request with the instance's own credentials and streams the answer back.
async fn pass_through(
    routed: &Routed,
    req: Request,
    path: &str,
    identity: Option<&Identity>,
) -> Result<Response, ApiError> {
    let client = routed.client.clone().ok_or_else(|| {
        ApiError::Unavailable(format!("instance {:?} is not connected", routed.name))
    })?;
    let watching = req
        .uri()
        .query()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .is_some_and(|q| {
            q.iter()
                .any(|(k, v)| k == "watch" && parse_bool(v) == Some(true))
        })
        || path.contains("/watch/");
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let method = req.method().clone();
    let mut builder = http::Request::builder()
        .method(req.method().clone())
        .uri(&uri);
    for h in [header::ACCEPT, header::CONTENT_TYPE, header::USER_AGENT] {
        if let Some(v) = req.headers().get(&h) {
            builder = builder.header(h, v.clone());
        }
    }
    // The instance decides as it would for this caller; a client's own Impersonate-*
    // headers are never passed on (they are not forwarded above).
    if let Some(who) = identity {
        let value = |v: &str| {
            http::HeaderValue::from_str(v)
                .map_err(|_| ApiError::invalid("user", format!("{v:?} cannot be sent as a header")))
        };
        builder = builder.header("Impersonate-User", value(&who.user)?);
        if !who.uid.is_empty() {
            builder = builder.header("Impersonate-Uid", value(&who.uid)?);
        }
        for g in &who.groups {
            builder = builder.header("Impersonate-Group", value(g)?);
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
    // A successful write of a cached kind: remember the version it produced, so the next
    // cached read waits for the cache to have it.
    let written = cached_kind(path).filter(|_| method != Method::GET && parts.status.is_success());
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
                routed.writes.record(kind, rv);
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
    }
}
