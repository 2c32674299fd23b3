//! Waking a hibernated instance for the request that needs it (proxy, gRPC or REST): the
//! first request asks the leader (the Instance's wake annotation, written once however
//! many requests wait), and each request is held, bounded by `--wake-timeout-secs`, until
//! the instance runs again; its caller sees a slow answer, not an error.

use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use tracing::info;

use crate::api::context::ApiContext;
use crate::crd::{HibernationState, Instance, Phase};
use crate::error::ApiError;
use crate::hibernation::runner::WAKE_REQUEST_ANNOTATION;

/// How often a held request looks whether the instance runs again.
const LOOK_EVERY: Duration = Duration::from_millis(200);

fn state(i: &Instance) -> (HibernationState, Phase) {
    let s = i.status.as_ref();
    (
        s.and_then(|s| s.hibernation.as_ref())
            .map(|h| h.state)
            .unwrap_or_default(),
        s.map(|s| s.phase).unwrap_or_default(),
    )
}

/// Whether a request to `i` must wait for it: asleep, or woken within `limit` and not yet
/// running (its actor is starting).
pub fn sleeping(i: &Instance, limit: Duration) -> bool {
    let Some(h) = i.status.as_ref().and_then(|s| s.hibernation.as_ref()) else {
        return false;
    };
    let woken_at = h
        .since
        .as_deref()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok());
    let starting = matches!(
        state(i).1,
        Phase::Pending | Phase::Provisioning | Phase::Hibernated
    ) && woken_at
        .is_some_and(|t| jiff::Timestamp::now().duration_since(t).unsigned_abs() < limit);
    h.state.asleep() || starting
}

impl ApiContext {
    /// Returns once `name`, found asleep, runs again (its actor reported Running), having
    /// asked for the wake; UNAVAILABLE after the wake timeout.
    pub(super) async fn wake(&self, name: &str) -> Result<(), ApiError> {
        let limit = self.tree.settings().wake_timeout;
        let started = Instant::now();
        loop {
            let instance = self.instance(name)?;
            match state(&instance) {
                // Running as the host says, and its reader here answers (the chain routed
                // the request to the replica that runs it).
                (HibernationState::Awake, Phase::Running | Phase::Degraded)
                    if self.tree.reader(name).is_some_and(|r| r.health().is_ok()) =>
                {
                    info!(instance = %name, waited_ms = started.elapsed().as_millis() as u64, "held request goes on: the instance woke");
                    return Ok(());
                }
                (HibernationState::Hibernated | HibernationState::Hibernating, _)
                    if self.wakes.first(name) =>
                {
                    if let Err(e) = self.ask_wake(name).await {
                        // The next request asks again rather than waiting out the mark.
                        self.wakes.forget(name);
                        return Err(e);
                    }
                }
                _ => {}
            }
            if started.elapsed() >= limit {
                return Err(ApiError::Unavailable(format!(
                    "instance {name:?} is waking from hibernation and did not run within {limit:?}; retry"
                )));
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    async fn ask_wake(&self, name: &str) -> Result<(), ApiError> {
        info!(instance = %name, "a request found the instance hibernated; asking for it to wake");
        let at = jiff::Timestamp::now().to_string();
        let patch = serde_json::json!({"metadata": {"annotations": {WAKE_REQUEST_ANNOTATION: at}}});
        let api: Api<Instance> = Api::all(self.tree.host().clone());
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        self.host_call(
            &format!("instance {name:?}"),
            api.patch(name, &params, &patch),
        )
        .await
        .map(drop)
    }
}
