//! Watches of cached kinds through the proxy, served from the instance's change feed
//! instead of holding a watch open on the instance per client. Served only when the
//! cache can be exact: from "now" (no resourceVersion, or 0: the current objects as ADDED,
//! then changes) or from exactly the version a LIST from the cache returned. Any other
//! start is passed through, since the instance keeps the history and the cache does not.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, StatusCode};
use kairship_wire::routes::ResourcePath;
use kairship_wire::table::Column;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use crate::api::answer::status_response;
use crate::api::request::query::{parse_bool, Selection};
use crate::api::request::Reads;
use crate::cache::caches::Kind;
use crate::cache::feed::{line, table_line, Change, EventType, FeedEvent};

const BOOKMARK_EVERY: Duration = Duration::from_secs(15);
/// kube-apiserver ends watches after a while too; clients re-watch from their last version.
const LONGEST: Duration = Duration::from_secs(30 * 60);

/// What a change means to one watcher, from whether the object passes its selection now
/// and passed it before (kube-apiserver's cacher decides the same way).
fn transition(change: &Change, selection: &Selection) -> Option<EventType> {
    let now = selection.matches(&change.object);
    let before = change.prev.as_ref().is_some_and(|p| selection.matches(p));
    match (change.deleted, before, now) {
        (true, true, _) => Some(EventType::Deleted),
        (true, false, _) => None,
        (false, true, true) => Some(EventType::Modified),
        (false, false, true) => Some(EventType::Added),
        // Moved out of the selection: gone, for this watcher.
        (false, true, false) => Some(EventType::Deleted),
        (false, false, false) => None,
    }
}

/// How a watcher's events are written: JSON objects, or one-row Tables (kubectl's form;
/// the first event carries the column definitions).
struct Form {
    columns: Option<Arc<Vec<Column>>>,
    sent_columns: bool,
}

impl Form {
    fn change(&mut self, change: &Change, kind: EventType) -> Bytes {
        match &self.columns {
            None => change.json_line(kind),
            Some(columns) => {
                let first = !std::mem::replace(&mut self.sent_columns, true);
                change.table_line(kind, columns, first)
            }
        }
    }

    fn added(&mut self, object: &crate::cache::object::CachedObject) -> Bytes {
        match &self.columns {
            None => line("ADDED", object.json()),
            Some(columns) => {
                let first = !std::mem::replace(&mut self.sent_columns, true);
                table_line(EventType::Added, object, columns, first)
            }
        }
    }
}

/// `None` passes the watch through to the instance.
pub fn serve(
    reads: &Reads<'_>,
    kind: Kind,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
    columns: Option<&[Column]>,
) -> Option<Response> {
    // A single object's watch and streaming lists are rare: the instance serves them.
    if rp.name.is_some() || q.contains_key("sendInitialEvents") {
        return None;
    }
    let store = reads.store(kind).ok()?;
    let selection = match Selection::parse(rp.namespace.clone(), q) {
        Ok(s) => s,
        Err(e) => return Some(status_response(&e)),
    };
    let start = store.subscribe();
    let current = start.version;
    let from_now = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => true,
        Some(v) if v.parse::<u64>().ok() == Some(current) => false,
        Some(_) => return None,
    };
    let bookmarks = q
        .get("allowWatchBookmarks")
        .is_some_and(|b| parse_bool(b) == Some(true));
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(LONGEST, |t| Duration::from_secs(t).min(LONGEST));
    let version = store.feed().version();
    let ar = kind.resource();
    let mut form = Form {
        columns: columns.map(|c| Arc::new(c.to_vec())),
        sent_columns: false,
    };
    let mut rx = start.changes;
    let objects = start.objects;
    let (tx, body) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let name = reads.instance().to_string();
    // The objects now are sent as ADDED after the headers, as kube-apiserver answers a
    // watch before its first event; a watch from a LIST's version already holds them.
    tokio::spawn(async move {
        if from_now {
            for o in objects.iter().filter(|o| selection.matches(o)) {
                if tx.send(Ok(form.added(o))).await.is_err() {
                    return;
                }
            }
        }
        drop(objects);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            let out = tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(FeedEvent::Change(c)) => transition(&c, &selection).map(|t| form.change(&c, t)),
                    // A relist, a watcher too far behind, or the cache gone: end the
                    // stream; the client re-watches from its last version.
                    Ok(FeedEvent::Reset) | Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => {
                        tracing::debug!(instance = %name, "cache watch ended by the feed");
                        break;
                    }
                },
                _ = tick.tick(), if bookmarks => {
                    let b = json!({"kind": ar.kind, "apiVersion": ar.api_version,
                        "metadata": {"resourceVersion": version.get().to_string()}});
                    Some(line("BOOKMARK", b.to_string().as_bytes()))
                }
                _ = &mut deadline => break,
            };
            if let Some(l) = out {
                if tx.send(Ok(l)).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(body),
    ));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Some(resp)
}
