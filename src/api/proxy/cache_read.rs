//! Reads of cached kinds answered from the instance's caches: JSON get and list, and
//! kubectl's Tables printed with the instance's columns. `None` from here passes the
//! request on to the instance.

use std::collections::HashMap;

use axum::body::Body;
use axum::response::Response;
use http::{header, Method, StatusCode};
use kairship_wire::routes::ResourcePath;
use kairship_wire::table::Column;
use serde_json::{json, Value};

use crate::api::answer::{json_response, status_response, SOURCE_HEADER};
use crate::api::request::query::{cached_kind, parse_bool, Selection};
use crate::api::request::review::ReadAttributes;
use crate::api::request::{OnInstance, Reads, Verb};
use crate::cache::caches::Kind;
use crate::cache::object::CachedObject;
use crate::error::{ApiError, Refusal};

use super::list_body::ListBody;

/// The answer from the cache, when it may give one: `Some(Ok)` served, `Some(Err)` refused
/// (the caller may not read it, as the instance says), `None` to pass the request on to
/// the instance.
pub async fn answer(
    on: &OnInstance,
    req: &http::request::Parts,
    path: &str,
    query: &HashMap<String, String>,
) -> Option<Result<Response, Response>> {
    let (kind, rp) = cacheable(on, req, path, query)?;
    let watching = query
        .get("watch")
        .is_some_and(|w| parse_bool(w) == Some(true));
    let verb = match (&rp.name, watching) {
        (_, true) => Verb::Watch,
        (Some(_), false) => Verb::Get,
        (None, false) => Verb::List,
    };
    let attrs = ReadAttributes::of(verb, kind, rp.namespace.as_deref(), rp.name.as_deref());
    let reads = match on.read_path(&attrs).await {
        Ok(r) => r,
        Err(e) => return Some(Err(status_response(&e))),
    };
    // A Table needs the columns the instance prints; unknown ones go to the instance.
    let columns = match wants_table(req) {
        true => Some(reads.columns(kind).await?),
        false => None,
    };
    if !reads.caught_up(kind).await {
        return None;
    }
    from_cache(
        &reads,
        kind,
        &rp,
        query,
        columns.as_deref().map(Vec::as_slice),
    )
    .map(Ok)
}

fn wants_table(req: &http::request::Parts) -> bool {
    req.headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"))
}

/// The cached kind a request reads, when the cache may answer it: a GET (JSON, or a
/// Table with object metadata as kubectl asks) of a kind this instance caches, not forced
/// to the instance, whose watch is not failing (the cache may be behind, or the kind gone
/// from the instance: the instance answers for itself).
fn cacheable(
    on: &OnInstance,
    req: &http::request::Parts,
    path: &str,
    q: &HashMap<String, String>,
) -> Option<(Kind, ResourcePath)> {
    let forced = req
        .headers
        .get(SOURCE_HEADER)
        .is_some_and(|v| v == "instance");
    if forced || req.method != Method::GET {
        return None;
    }
    let table_as_served = q.get("includeObject").is_none_or(|v| v == "Metadata");
    if wants_table(req) && !table_as_served {
        return None;
    }
    let (kind, rp) = cached_kind(path)?;
    if rp.subresource.is_some() || rp.watch_prefix {
        return None;
    }
    on.caches().serves(kind).then_some((kind, rp))
}

/// Answers get/list/watch of a cached kind from the cache, as JSON or (with `columns`) as
/// a Table; `None` passes the request on.
fn from_cache(
    reads: &Reads<'_>,
    kind: Kind,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
    columns: Option<&[Column]>,
) -> Option<Response> {
    let store = reads.store(kind).ok()?;
    let ar = kind.resource();
    if let Some(w) = q.get("watch") {
        if parse_bool(w) == Some(true) {
            return super::cache_watch::serve(reads, kind, rp, q, columns);
        }
    }
    if let Some(name) = &rp.name {
        return Some(match (store.get(rp.namespace.as_deref(), name), columns) {
            (Some(o), Some(columns)) => {
                let meta = json!({"resourceVersion": o.resource_version().to_string()});
                table_response(columns, &[&*o], meta)
            }
            (Some(o), None) => json_response(StatusCode::OK, o.json().clone()),
            (None, _) => not_found(&ar.plural, &ar.group, name),
        });
    }
    let selection = match Selection::parse(rp.namespace.clone(), q) {
        Ok(sel) => sel,
        Err(e) => return Some(status_response(&e)),
    };
    // A client asking for a version the cache has not seen yet is served by the instance
    // (the feed's version also counts deletions, which leave no object behind).
    if let Some(rv) = q.get("resourceVersion").filter(|r| !r.is_empty()) {
        match rv.parse::<u64>() {
            Ok(rv) if rv > store.feed().last_rv() => return None,
            Ok(_) => {}
            Err(_) => {
                return Some(status_response(&ApiError::invalid(
                    "resourceVersion",
                    format!("invalid resourceVersion {rv:?}"),
                )))
            }
        }
    }
    // The store keeps LIST order (namespace, then name): a page starts after the token.
    let after = match q.get("continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(token) => {
            let Some(after) = crate::api::paging::after(token).and_then(|s| {
                s.split_once('/')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
            }) else {
                return Some(status_response(&ApiError::invalid(
                    "continue",
                    "not a continue token this server issued",
                )));
            };
            Some(after)
        }
    };
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
    let selected = store.select(
        after
            .as_ref()
            .map(|(ns, name)| (ns.as_str(), name.as_str())),
        limit,
        selection.required_label(),
        |o| selection.matches(o),
    );
    let mut meta = json!({"resourceVersion": selected.version.to_string()});
    if selected.remaining > 0 {
        meta["remainingItemCount"] = json!(selected.remaining);
        meta["continue"] = json!(selected.objects.last().map(|o| {
            let ns = o.namespace().unwrap_or_default();
            crate::api::paging::token(&format!("{ns}/{}", o.name()))
        }));
    }
    if let Some(columns) = columns {
        let items: Vec<&CachedObject> = selected.objects.iter().map(|o| &**o).collect();
        return Some(table_response(columns, &items, meta));
    }
    let head =
        json!({"kind": format!("{}List", ar.kind), "apiVersion": ar.api_version, "metadata": meta})
            .to_string();
    let body = Body::new(ListBody::new(head, selected.objects));
    Some(json_response(StatusCode::OK, body))
}

/// A `meta.k8s.io/v1` Table of cached objects, printed with the instance's columns from
/// the rows each object keeps.
fn table_response(columns: &[Column], objects: &[&CachedObject], meta: Value) -> Response {
    let rows: Vec<(&kairship_wire::table::Row, &[u8])> = objects
        .iter()
        .map(|o| o.row_and_metadata(columns))
        .collect();
    json_response(
        StatusCode::OK,
        kairship_wire::table::write(columns, &rows, true, meta),
    )
}

fn not_found(plural: &str, group: &str, name: &str) -> Response {
    let what = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    // kube-apiserver names the resource (plural) as the kind of a NotFound.
    status_response(&ApiError::Missing(Box::new(Refusal {
        message: format!("{what} \"{name}\" not found"),
        name: name.into(),
        group: group.into(),
        kind: plural.into(),
    })))
}
