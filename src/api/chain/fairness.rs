//! Fairness: no caller can take what the others need. After kube-apiserver's API Priority
//! and Fairness in its simplest form: each caller (by user name) has its own bound on
//! requests in flight, long-running ones (watches, streams) counted apart from the rest,
//! and the server has a bound on all of them; a request that finds no slot waits a short
//! while in line, then is refused with 429 and `Retry-After`, as kube-apiserver refuses.
//! A slot is held until the answer's body is done, so a watch holds its own for as long
//! as it streams. Per-instance bounds (requests in flight, pass-through watches) sit on
//! each instance's reader, so one instance's load never spends another's.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests in flight per caller, long-running ones not counted.
    pub per_caller: usize,
    /// Long-running requests (watches, streams) open per caller.
    pub per_caller_long: usize,
    /// Requests in flight on this server, long-running ones not counted.
    pub total: usize,
    /// Long-running requests open on this server.
    pub total_long: usize,
    /// How long a request waits in line for a slot before it is refused.
    pub queue_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_caller: 64,
            // Below an instance's pass-through streams (100): no one caller holds them all.
            per_caller_long: 64,
            total: 1024,
            total_long: 4096,
            queue_wait: Duration::from_secs(1),
        }
    }
}

struct Slots {
    short: Arc<Semaphore>,
    long: Arc<Semaphore>,
}

pub struct Fairness {
    limits: Limits,
    callers: Mutex<HashMap<String, Arc<Slots>>>,
    short: Arc<Semaphore>,
    long: Arc<Semaphore>,
}

/// The slots a request holds; dropped when its answer is done.
pub struct Held {
    _caller: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

/// Callers kept in the map before idle ones are dropped.
const PRUNE_AT: usize = 1024;

impl Fairness {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            callers: Mutex::default(),
            short: Arc::new(Semaphore::new(limits.total)),
            long: Arc::new(Semaphore::new(limits.total_long)),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn slots(&self, user: &str) -> Arc<Slots> {
        let mut callers = self.callers.lock();
        if let Some(s) = callers.get(user) {
            return s.clone();
        }
        if callers.len() >= PRUNE_AT {
            // A caller's slots are referenced only by the map while none is held.
            callers.retain(|_, s| Arc::strong_count(s) > 1);
        }
        let s = Arc::new(Slots {
            short: Arc::new(Semaphore::new(self.limits.per_caller)),
            long: Arc::new(Semaphore::new(self.limits.per_caller_long)),
        });
        callers.insert(user.to_string(), s.clone());
        s
    }

    /// A slot for `user`'s request, waiting at most the queue wait; RESOURCE_EXHAUSTED
    /// (429) naming the bound when none comes free.
    pub async fn admit(&self, user: &str, long_running: bool) -> Result<Held, ApiError> {
        let slots = self.slots(user);
        let (mine, server, limit, what) = match long_running {
            true => (
                slots.long.clone(),
                self.long.clone(),
                self.limits.per_caller_long,
                "long-running requests (watches)",
            ),
            false => (
                slots.short.clone(),
                self.short.clone(),
                self.limits.per_caller,
                "requests",
            ),
        };
        let wait = self.limits.queue_wait;
        let caller = match tokio::time::timeout(wait, mine.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                return Err(ApiError::ResourceExhausted(format!(
                    "user {user:?} has {limit} {what} in flight, the most one caller may; retry when some have finished"
                )))
            }
        };
        let server = match tokio::time::timeout(wait, server.acquire_owned()).await {
            Ok(Ok(p)) => p,
            _ => {
                return Err(ApiError::ResourceExhausted(format!(
                    "this Kairship replica has as many {what} in flight as it serves at once; retry shortly"
                )))
            }
        };
        Ok(Held {
            _caller: caller,
            _server: server,
        })
    }
}

/// What an upgraded connection (exec, attach, port-forward) keeps for as long as it runs:
/// its answer (`101 Switching Protocols`) has no body to hold them, so the slots the chain
/// and the server hold are handed to the session through this extension of the answer.
#[derive(Clone, Default)]
pub struct SessionGuards(Arc<Mutex<Vec<Box<dyn Send>>>>);

impl SessionGuards {
    fn keep(&self, guard: Box<dyn Send>) {
        self.0.lock().push(guard);
    }
}

/// `resp` with `guard` kept until its body has been sent (or dropped): a watch keeps its
/// slots while it streams, an upgraded connection while the session runs.
pub fn hold_until_done<G: Send + Unpin + 'static>(resp: Response, guard: G) -> Response {
    if let Some(session) = resp.extensions().get::<SessionGuards>() {
        session.keep(Box::new(guard));
        return resp;
    }
    let (parts, body) = resp.into_parts();
    Response::from_parts(
        parts,
        Body::new(Guarded {
            inner: body,
            _guard: guard,
        }),
    )
}

struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_caller_at_its_bound_is_refused_and_the_others_are_not() {
        let f = Fairness::new(Limits {
            per_caller: 2,
            per_caller_long: 1,
            total: 10,
            total_long: 10,
            queue_wait: Duration::from_millis(100),
        });
        let a1 = f.admit("mallory", false).await.expect("first");
        let _a2 = f.admit("mallory", false).await.expect("second");
        let e = f
            .admit("mallory", false)
            .await
            .err()
            .expect("third refused");
        assert!(matches!(e, ApiError::ResourceExhausted(_)), "{e}");
        assert!(e.to_string().contains("mallory"), "{e}");
        // Another caller is not touched, nor the same caller's watches.
        f.admit("alice", false).await.expect("alice");
        let _w = f.admit("mallory", true).await.expect("a watch");
        assert!(f.admit("mallory", true).await.is_err(), "a second watch");
        drop(a1);
        f.admit("mallory", false).await.expect("a slot came free");
    }

    #[tokio::test(start_paused = true)]
    async fn the_server_bound_holds_across_callers() {
        let f = Fairness::new(Limits {
            per_caller: 5,
            per_caller_long: 5,
            total: 2,
            total_long: 2,
            queue_wait: Duration::from_millis(100),
        });
        let _a = f.admit("a", false).await.expect("a");
        let _b = f.admit("b", false).await.expect("b");
        let e = f.admit("c", false).await.err().expect("c refused");
        assert!(e.to_string().contains("replica"), "{e}");
    }
}
