//! Watch streams: newline-delimited JSON events with resourceVersion semantics, selector
//! transitions, bookmarks, timeouts and the faults that cut streams.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::table;
use crate::faults::{FaultMode, FaultState};
use crate::resources::ResourceDef;
use crate::store::{Event, EventType, Filter, StoredObject, WatchStart, CRD_KEY};
use kairship_wire::status::ApiError;
use kairship_wire::watch::line;

pub struct WatchOptions {
    pub api_version: String,
    pub bookmarks: bool,
    pub bookmark_interval: Duration,
    pub timeout: Duration,
    pub as_table: bool,
    /// `sendInitialEvents=true`: end the initial replay with a marked bookmark.
    pub initial_events_end: bool,
}

/// How long a watch survives while `drop-watches` stands.
const DROP_WATCHES_GRACE: Duration = Duration::from_secs(1);

/// A single ERROR event, the way kube-apiserver reports a too-old resourceVersion.
pub fn error_line(err: &ApiError) -> Bytes {
    line("ERROR", err.to_status().to_string().as_bytes())
}

struct Encoder {
    def: Arc<ResourceDef>,
    opts: WatchOptions,
    sent_columns: bool,
}

impl Encoder {
    fn event(&mut self, kind: EventType, obj: &StoredObject) -> Bytes {
        if self.opts.as_table {
            let t = table::table(
                &self.def,
                &[obj],
                !self.sent_columns,
                json!({"resourceVersion": obj.rv.to_string()}),
            );
            self.sent_columns = true;
            return line(kind.as_str(), t.to_string().as_bytes());
        }
        line(kind.as_str(), &obj.render(&self.opts.api_version))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj =
            json!({"kind": self.def.kind, "apiVersion": self.opts.api_version, "metadata": meta});
        line("BOOKMARK", obj.to_string().as_bytes())
    }
}

/// What a live event means to a watcher with `filter`, given the state before it.
fn transition(ev: &Event, filter: &Filter) -> Option<EventType> {
    let now = filter.matches(&ev.object);
    let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
    match ev.kind {
        EventType::Added => now.then_some(EventType::Added),
        EventType::Deleted => (now || before).then_some(EventType::Deleted),
        EventType::Modified => match (before, now) {
            (true, true) => Some(EventType::Modified),
            (false, true) => Some(EventType::Added),
            (true, false) => Some(EventType::Deleted),
            (false, false) => None,
        },
    }
}

/// Streams a watch until the client leaves, the timeout ends it, or a fault cuts it.
pub fn stream(
    def: Arc<ResourceDef>,
    filter: Filter,
    start: WatchStart,
    opts: WatchOptions,
    faults: &FaultState,
) -> ReceiverStream<Result<Bytes, Infallible>> {
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let mut fault_rx = faults.subscribe();
    let key: Arc<str> = Arc::from(def.key());
    tokio::spawn(async move {
        let WatchStart {
            initial,
            start_rv,
            mut live,
        } = start;
        let timeout = tokio::time::sleep(opts.timeout);
        tokio::pin!(timeout);
        let mut bookmark_tick = tokio::time::interval_at(
            tokio::time::Instant::now() + opts.bookmark_interval,
            opts.bookmark_interval,
        );
        let (bookmarks, initial_end) = (opts.bookmarks, opts.initial_events_end);
        let mut enc = Encoder {
            def,
            opts,
            sent_columns: false,
        };
        let mut last_rv = start_rv;
        for ev in &initial {
            if tx.send(Ok(enc.event(ev.kind, &ev.object))).await.is_err() {
                return;
            }
            last_rv = last_rv.max(ev.rv);
        }
        if initial_end && tx.send(Ok(enc.bookmark(last_rv, true))).await.is_err() {
            return;
        }
        let cut_at = |f: &Option<crate::faults::Fault>| matches!(f, Some(f) if f.mode == FaultMode::DropWatches);
        let mut drop_deadline = cut_at(&fault_rx.borrow_and_update())
            .then(|| tokio::time::Instant::now() + DROP_WATCHES_GRACE);
        loop {
            let drop_sleep = async {
                match drop_deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut timeout => return,
                _ = tx.closed() => return,
                _ = drop_sleep => return,
                changed = fault_rx.changed() => {
                    if changed.is_err() { return; }
                    let fault = fault_rx.borrow_and_update().clone();
                    match fault.map(|f| f.mode) {
                        Some(FaultMode::Down | FaultMode::DropWatches) => return,
                        Some(FaultMode::Compact) => {
                            let _ = tx.send(Ok(error_line(&ApiError::gone("too old resource version: history compacted")))).await;
                            return;
                        }
                        _ => drop_deadline = None,
                    }
                }
                _ = bookmark_tick.tick(), if bookmarks => {
                    if tx.send(Ok(enc.bookmark(last_rv, false))).await.is_err() { return; }
                }
                got = live.recv() => match got {
                    Ok(ev) => {
                        if ev.rv <= last_rv { continue; }
                        last_rv = ev.rv;
                        // As kube-apiserver tears down a deleted CRD's storage: its
                        // watches end, and the relist finds the resource gone.
                        if ev.kind == EventType::Deleted && &*ev.resource == CRD_KEY && enc.def.crd.as_deref() == Some(ev.object.name()) {
                            return;
                        }
                        if ev.resource != key { continue; }
                        if let Some(kind) = transition(&ev, &filter) {
                            if tx.send(Ok(enc.event(kind, &ev.object))).await.is_err() { return; }
                        }
                    }
                    // Too slow to keep up: end the stream; the client resumes from its last version.
                    Err(crate::store::LiveError::Lagged(missed)) => {
                        tracing::info!(resource = %key, missed, "watch too slow to keep up: ended");
                        return;
                    }
                    Err(crate::store::LiveError::Closed) => return,
                },
            }
        }
    });
    ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairship_wire::selectors::LabelSelector;

    fn obj(rv: u64, app: &str) -> Arc<StoredObject> {
        let v = json!({"metadata": {"name": "a", "namespace": "d", "labels": {"app": app}}});
        Arc::new(StoredObject {
            json: Bytes::from(v.to_string()),
            value: v,
            rv,
        })
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let filter = Filter {
            labels: LabelSelector::parse("app=web").expect("ok"),
            ..Default::default()
        };
        let ev = |prev: &str, now: &str| Event {
            rv: 2,
            resource: Arc::from("/configmaps"),
            kind: EventType::Modified,
            object: obj(2, now),
            prev: Some(obj(1, prev)),
        };
        assert_eq!(
            transition(&ev("db", "web"), &filter),
            Some(EventType::Added)
        );
        assert_eq!(
            transition(&ev("web", "db"), &filter),
            Some(EventType::Deleted)
        );
        assert_eq!(
            transition(&ev("web", "web"), &filter),
            Some(EventType::Modified)
        );
        assert_eq!(transition(&ev("db", "db"), &filter), None);
    }
}
