//! Watches of cached kinds through the proxy, served from the instance's change feed
//! instead of holding a watch open on the instance per client. Served only when the
//! cache can be exact: from "now" (no resourceVersion, or 0: the current objects as ADDED,
//! then changes) or from exactly the version a LIST from the cache returned. Any other
//! start is passed through, since the instance keeps the history and the cache does not.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{header, StatusCode};
use kairship_wire::routes::ResourcePath;
use kube::api::DynamicObject;
use serde_json::json;
use tokio::sync::{broadcast, mpsc};

use super::cache_read::Selection;
use super::kube_status::status_response;
use crate::actors::instance::caches::Kind;
use crate::actors::instance::feed::{rv_of, FeedEvent};
use crate::api::request::Reads;

const BOOKMARK_EVERY: Duration = Duration::from_secs(15);
/// kube-apiserver ends watches after a while too; clients re-watch from their last version.
const LONGEST: Duration = Duration::from_secs(30 * 60);

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

fn key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// `None` passes the watch through to the instance.
pub fn serve(
    reads: &Reads<'_>,
    kind: Kind,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
) -> Option<Response> {
    // A single object's watch and streaming lists are rare: the instance serves them.
    if rp.name.is_some() || q.contains_key("sendInitialEvents") {
        return None;
    }
    let feed = reads.feed(kind)?;
    let store = reads.store(kind).ok()?;
    let selection = match Selection::parse(rp.namespace.clone(), q) {
        Ok(s) => s,
        Err(e) => return Some(status_response(&e)),
    };
    // Subscribe before reading the version, so no change falls between the two.
    let mut rx = feed.subscribe();
    let current = feed.last_rv();
    let from_now = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => true,
        Some(v) if v.parse::<u64>().ok() == Some(current) => false,
        Some(_) => return None,
    };
    let bookmarks = q
        .get("allowWatchBookmarks")
        .is_some_and(|b| super::cache_read::parse_bool(b) == Some(true));
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(LONGEST, |t| Duration::from_secs(t).min(LONGEST));
    let version = feed.version();
    let json = reads.json().clone();
    let ar = kind.resource();

    // The objects now, read before answering; what the client holds of them (sent as
    // ADDED when starting from now, already listed otherwise) is worked out after the
    // headers are sent, as kube-apiserver answers a watch before its first event.
    let objects = store.state();
    let (tx, body) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let name = reads.instance().to_string();
    tokio::spawn(async move {
        let held: Vec<&DynamicObject> = objects
            .iter()
            .map(|o| &**o)
            .filter(|o| selection.matches(o) && (from_now || rv_of(o) <= current))
            .collect();
        let mut visible: HashSet<(String, String)> = held.iter().map(|o| key(o)).collect();
        if from_now {
            for object in json.render(kind, &held, objects.len()) {
                if tx.send(Ok(line("ADDED", &object))).await.is_err() {
                    return;
                }
            }
        }
        drop(held);
        drop(objects);
        let render = |o: &DynamicObject| json.render(kind, &[o], usize::MAX / 4).swap_remove(0);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_EVERY);
        tick.tick().await;
        loop {
            let out = tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(FeedEvent::Applied(o)) if rv_of(&o) > current => {
                        let k = key(&o);
                        match (selection.matches(&o), visible.contains(&k)) {
                            (true, false) => {
                                visible.insert(k);
                                Some(line("ADDED", &render(&o)))
                            }
                            (true, true) => Some(line("MODIFIED", &render(&o))),
                            // Moved out of the selection: gone, for this watcher.
                            (false, true) => {
                                visible.remove(&k);
                                Some(line("DELETED", &render(&o)))
                            }
                            (false, false) => None,
                        }
                    }
                    Ok(FeedEvent::Deleted(o)) if rv_of(&o) > current => {
                        visible.remove(&key(&o)).then(|| line("DELETED", &render(&o)))
                    }
                    Ok(FeedEvent::Applied(_) | FeedEvent::Deleted(_)) => None,
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
