//! The resource endpoints of a simulated API server: GET, LIST, WATCH, POST, PUT, PATCH
//! and DELETE on one resource path, with dry runs, preconditions and selectors.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{BufMut, BytesMut};
use http::{header, Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::patch::PatchKind;
use crate::rbac::{self, Identity};
use crate::resources::ResourceDef;
use crate::store::fields::validation::Validation;
use crate::store::fields::{self, ClientWrite};
use crate::store::{DeleteWith, Filter, Preconditions, WatchFrom};
use kairship_wire::routes::ResourcePath;
use kairship_wire::selectors::{FieldSelector, LabelSelector};
use kairship_wire::status::{ApiError, ApiResult};

use super::{
    bytes_response, json_response, query_bool, scale, stream_response, table, watch, ApiServer,
};

impl ApiServer {
    pub(super) async fn resource(
        &self,
        req: Request<Body>,
        rp: ResourcePath,
        user: &str,
        who: &Identity,
    ) -> ApiResult<Response<Body>> {
        let def = self
            .store
            .lookup(&rp.group, &rp.version, &rp.plural)
            .ok_or_else(|| ApiError::path_not_found(req.uri().path()))?;
        if rp.namespace.is_some() && !def.namespaced {
            return Err(ApiError::path_not_found(req.uri().path()));
        }
        let status_sub = match rp.subresource.as_deref() {
            None => false,
            Some("status") if def.status_subresource => true,
            Some("scale") if scale::served(&def) => return self.scale(req, &def, &rp, user).await,
            Some("token") if def.plural == "serviceaccounts" && def.group.is_empty() => {
                return self.token_request(req, &def, &rp, user).await
            }
            Some("log") if def.plural == "pods" && def.group.is_empty() => {
                if req.method() != Method::GET {
                    return Err(ApiError::method_not_allowed(req.method().as_str()));
                }
                self.record(user, req.method(), &rp, false);
                let name = rp.name.as_deref().unwrap_or_default();
                let pod = self.store.get(&def, rp.namespace.as_deref(), name)?;
                return super::cluster_proxy::pod_log(&pod.value, "on the host", &req);
            }
            Some(_) => return Err(ApiError::path_not_found(req.uri().path())),
        };
        let q = Query::parse(req.uri().query().unwrap_or(""))?;
        self.record(user, req.method(), &rp, q.flag("watch") || rp.watch_prefix);
        let api_version = def.api_version(&rp.version);
        let ns = rp.namespace.as_deref();
        let accept = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let as_table = table::wanted(&accept);
        let method = req.method().clone();
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let render = |o: &crate::store::StoredObject, code: StatusCode| -> Response<Body> {
            if as_table && method == Method::GET {
                let t = table::table(
                    &def,
                    &[o],
                    true,
                    json!({"resourceVersion": o.rv.to_string()}),
                );
                return json_response(code, &t);
            }
            bytes_response(code, o.render(&api_version))
        };
        match (req.method().clone(), rp.name.as_deref()) {
            (Method::POST, None) if def.plural == "selfsubjectreviews" => {
                // Read (protobuf or JSON) for its errors; it asks nothing more than its POST.
                self.read_json(req).await?;
                let mut user = json!({"username": who.user, "groups": who.groups});
                if !who.uid.is_empty() {
                    user["uid"] = who.uid.clone().into();
                }
                let answer = json!({"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"creationTimestamp": null}, "status": {"userInfo": user}});
                Ok(json_response(StatusCode::CREATED, &answer))
            }
            (Method::POST, None) if crate::resources::is_review(&def) => {
                let body = self.read_json(req).await?;
                let self_review = def.plural == "selfsubjectaccessreviews";
                let answer = rbac::review(&self.store, who, body, self_review)?;
                Ok(json_response(StatusCode::CREATED, &answer))
            }
            (Method::GET, Some(name)) => {
                Ok(render(&*self.store.get(&def, ns, name)?, StatusCode::OK))
            }
            (Method::GET, None) => {
                let filter = q.filter(ns)?;
                if q.flag("watch") || rp.watch_prefix {
                    return self.watch(def, filter, &q, api_version, as_table);
                }
                self.list(&def, &filter, &q, &api_version, as_table)
            }
            (Method::POST, None) => {
                let w = self.client_write(
                    (&def, who),
                    &rp.version,
                    &q,
                    req.headers(),
                    "CreateOptions",
                    false,
                )?;
                let (body, found) = self.read_json_checked(req).await?;
                let written = self.store.create_by(&def, ns, body, found, &w)?;
                Ok(warned(
                    bytes_response(StatusCode::CREATED, written.obj.render(&api_version)),
                    &written.warnings,
                ))
            }
            (Method::PUT, Some(name)) => {
                let w = self.client_write(
                    (&def, who),
                    &rp.version,
                    &q,
                    req.headers(),
                    "UpdateOptions",
                    false,
                )?;
                let (body, found) = self.read_json_checked(req).await?;
                let written = self
                    .store
                    .update_by(&def, ns, name, body, found, status_sub, &w)?;
                Ok(warned(
                    render(&written.obj, StatusCode::OK),
                    &written.warnings,
                ))
            }
            (Method::PATCH, Some(name)) => {
                let kind = PatchKind::from_content_type(&content_type)?;
                let w = self.client_write(
                    (&def, who),
                    &rp.version,
                    &q,
                    req.headers(),
                    "PatchOptions",
                    kind == PatchKind::Apply,
                )?;
                let body = self.read_body(req).await?;
                let written = self
                    .store
                    .patch_by(&def, ns, name, kind, &body, status_sub, &w)?;
                let code = if written.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                Ok(warned(render(&written.obj, code), &written.warnings))
            }
            (Method::DELETE, Some(name)) => {
                let with = self.delete_options(req, &q).await?;
                Ok(render(
                    &*self.store.delete(&def, ns, name, with)?,
                    StatusCode::OK,
                ))
            }
            (Method::DELETE, None) => {
                let with = self.delete_options(req, &q).await?;
                let filter = q.filter(ns)?;
                let gone = self.store.delete_collection(&def, &filter, with.dry_run)?;
                let rv = self.store.current_rv();
                Ok(list_response(
                    &def,
                    &api_version,
                    gone.iter().map(|o| &**o),
                    rv,
                    None,
                    None,
                ))
            }
            (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
        }
    }

    pub(super) fn list(
        &self,
        def: &Arc<ResourceDef>,
        filter: &Filter,
        q: &Query,
        api_version: &str,
        as_table: bool,
    ) -> ApiResult<Response<Body>> {
        if let Some(rv) = q
            .get("resourceVersion")
            .filter(|r| !r.is_empty() && *r != "0")
        {
            let want: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
            let current = self.store.current_rv();
            if want > current {
                return Err(ApiError::timeout(format!(
                    "Too large resource version: {want}, current: {current}"
                )));
            }
            if q.get("resourceVersionMatch") == Some("Exact") && want != current {
                return Err(ApiError::gone(format!(
                    "resource version {want} is not retained for exact reads"
                )));
            }
        }
        let limit = q
            .get("limit")
            .map(|l| {
                l.parse::<usize>()
                    .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))
            })
            .transpose()?;
        let page = self.store.list(def, filter, limit, q.get("continue"))?;
        if as_table {
            let objs: Vec<&crate::store::StoredObject> = page.items.iter().map(|o| &**o).collect();
            let mut meta = json!({"resourceVersion": page.rv.to_string()});
            if let Some(c) = &page.continue_token {
                meta["continue"] = c.clone().into();
            }
            return Ok(json_response(
                StatusCode::OK,
                &table::table(def, &objs, true, meta),
            ));
        }
        Ok(list_response(
            def,
            api_version,
            page.items.iter().map(|o| &**o),
            page.rv,
            page.continue_token,
            page.remaining,
        ))
    }

    pub(super) fn watch(
        &self,
        def: Arc<ResourceDef>,
        filter: Filter,
        q: &Query,
        api_version: String,
        as_table: bool,
    ) -> ApiResult<Response<Body>> {
        let send_initial = q.flag("sendInitialEvents");
        let from =
            match q
                .get("resourceVersion")
                .filter(|r| !r.is_empty() && *r != "0")
            {
                _ if send_initial => WatchFrom::Current,
                Some(rv) => WatchFrom::Version(rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
                None => WatchFrom::Current,
            };
        let timeout = match q.get("timeoutSeconds") {
            Some(t) => Duration::from_secs(
                t.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            ),
            None => self.config.default_watch_timeout,
        };
        let start = match self.store.watch(&def, &filter, from) {
            Ok(s) => s,
            // kube-apiserver answers a too-old version inside the stream, so clients relist.
            Err(e) if e.code == 410 => {
                return Ok(stream_response(Body::from(watch::error_line(&e))))
            }
            Err(e) => return Err(e),
        };
        let opts = watch::WatchOptions {
            api_version,
            bookmarks: q.flag("allowWatchBookmarks"),
            bookmark_interval: self.config.bookmark_interval,
            timeout,
            as_table,
            initial_events_end: send_initial,
        };
        Ok(stream_response(Body::from_stream(watch::stream(
            def,
            filter,
            start,
            opts,
            &self.faults,
        ))))
    }
}

/// Adds one `Warning: 299` header per warning, as kube-apiserver reports dropped fields.
fn warned(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

impl ApiServer {
    /// How a client's write is checked and whose fields it sets, from its query and
    /// headers; `options` is its options kind, for errors about them.
    fn client_write(
        &self,
        (def, who): (&ResourceDef, &Identity),
        version: &str,
        q: &Query,
        headers: &http::HeaderMap,
        options: &'static str,
        apply: bool,
    ) -> ApiResult<ClientWrite> {
        let validation = Validation::parse(q.get("fieldValidation"), options)?;
        let force = q.flag("force");
        if force && !apply {
            return Err(fields::options_error(
                options,
                "force",
                "FieldValueForbidden",
                "Forbidden: may not be specified for non-apply patch",
            ));
        }
        let given = q.get("fieldManager").filter(|m| !m.is_empty());
        if apply && given.is_none() {
            return Err(fields::options_error(
                options,
                "fieldManager",
                "FieldValueRequired",
                "Required value: is required for apply patch",
            ));
        }
        let manager = match given {
            Some(m) => m.to_string(),
            None => fields::manager_from_user_agent(
                headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok()),
            ),
        };
        Ok(ClientWrite {
            manager,
            api_version: def.api_version(version),
            validation,
            force,
            schema: crate::openapi::schema_of(&self.store, def, version),
            dry_run: q.dry_run(),
            requester: Some(crate::store::admission::Requester {
                username: who.user.clone(),
                uid: who.uid.clone(),
                groups: who.groups.clone(),
            }),
        })
    }
}

impl ApiServer {
    /// A delete's options, from its body (JSON, or protobuf as typed Go clients such as
    /// Helm send it) and its query: preconditions, and a dry run asked either way.
    async fn delete_options(&self, req: Request<Body>, q: &Query) -> ApiResult<DeleteWith> {
        let protobuf = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/vnd.kubernetes.protobuf"));
        let body = self.read_body(req).await?;
        let options = match body.iter().all(u8::is_ascii_whitespace) {
            true => Value::Null,
            false if protobuf => crate::protobuf::decode(&body)?,
            false => serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?,
        };
        let p = &options["preconditions"];
        let dry_in_body = options["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|x| x == "All"));
        Ok(DeleteWith {
            preconditions: Preconditions {
                uid: p["uid"].as_str().map(String::from),
                resource_version: p["resourceVersion"].as_str().map(String::from),
            },
            dry_run: q.dry_run() || dry_in_body,
        })
    }
}

/// Query parameters of a request.
pub(super) struct Query(HashMap<String, String>);

impl Query {
    pub(super) fn parse(q: &str) -> ApiResult<Self> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        Ok(Self(pairs.into_iter().collect()))
    }

    pub(super) fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    /// A boolean parameter as kube-apiserver converts query strings (see [`query_bool`]).
    pub(super) fn flag(&self, k: &str) -> bool {
        query_bool(self.get(k))
    }

    pub(super) fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }

    pub(super) fn filter(&self, ns: Option<&str>) -> ApiResult<Filter> {
        Ok(Filter {
            namespace: ns.map(String::from),
            labels: LabelSelector::parse(self.get("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(self.get("fieldSelector").unwrap_or(""))?,
        })
    }
}

pub(super) fn list_response<'a>(
    def: &ResourceDef,
    api_version: &str,
    items: impl Iterator<Item = &'a crate::store::StoredObject>,
    rv: u64,
    cont: Option<String>,
    remaining: Option<u64>,
) -> Response<Body> {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = c.into();
    }
    if let Some(r) = remaining {
        meta["remainingItemCount"] = r.into();
    }
    let head =
        json!({"kind": format!("{}List", def.kind), "apiVersion": api_version, "metadata": meta})
            .to_string();
    let mut buf = BytesMut::with_capacity(4096);
    // `{...head fields..., "items": [...]}`: the head without its closing brace, then the items.
    buf.put_slice(&head.as_bytes()[..head.len() - 1]);
    buf.put_slice(b",\"items\":[");
    for (i, o) in items.enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        buf.put_slice(&o.render(api_version));
    }
    buf.put_slice(b"]}");
    bytes_response(StatusCode::OK, buf.freeze())
}
