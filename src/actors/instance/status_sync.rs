//! Writing the instance's status to its `Instance` object on the host: only by the leader,
//! fenced and conditional on the resourceVersion last seen, one write at a time, when the
//! status changed or `Settings::status_refresh` has passed.

use std::time::Instant;

use kube::api::{Api, Patch, PatchParams};
use ractor::ActorRef;
use serde_json::json;

use super::messages::{InstanceMsg, StatusWrite};
use super::{now, InstanceState};
use crate::context::{Context, Counters};
use crate::crd::{Instance, InstanceStatus};
use crate::host::error::fenced;
use crate::status;

/// Writes status when it changed, or to refresh lastSyncTime; one write at a time.
pub(super) fn sync_status(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    if state.write_in_flight {
        return;
    }
    let stale = state
        .last_write_at
        .is_none_or(|t| t.elapsed() >= state.ctx.settings.status_refresh);
    // Nothing observed since the status last compared equal: no need to build it again.
    if !stale && state.unchanged_since.as_ref() == Some(&state.observed) {
        return;
    }
    let next = status::build(state.last_written.as_ref(), &state.observed, &now());
    if let Some(until) = state.keep_verdict_until {
        if next.phase == crate::crd::Phase::Pending && Instant::now() < until {
            return;
        }
        state.keep_verdict_until = None;
    }
    if !status::changed(state.last_written.as_ref(), &next) && !stale {
        state.unchanged_since = Some(state.observed.clone());
        return;
    }
    state.unchanged_since = None;
    state.write_in_flight = true;
    let (ctx, name, me) = (state.ctx.clone(), state.name.clone(), myself.clone());
    let rv = state.resource_version.clone();
    super::spawn_here(async move {
        let written = write_status(&ctx, &name, next, rv).await;
        let _ = me.send_message(InstanceMsg::StatusWritten(written));
    });
}

/// Takes in how a write ended.
pub(super) fn written(state: &mut InstanceState, w: StatusWrite) {
    state.write_in_flight = false;
    if w.resource_version.is_some() {
        state.resource_version = w.resource_version;
    }
    match w.result {
        Ok(written) => {
            state.last_written = Some(*written);
            state.last_write_at = Some(Instant::now());
        }
        // A conflict is retried with the fresh resourceVersion on the next tick.
        Err(e) if e.is_conflict() => state.last_error = Some(e.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "writing Instance status failed");
            state.last_error = Some(e.to_string());
        }
    }
}

/// One fenced, conditional status write. On a conflict the fresh resourceVersion is read
/// for the next attempt (someone else wrote: a user, the manager, or another replica).
async fn write_status(
    ctx: &Context,
    name: &str,
    next: InstanceStatus,
    rv: Option<String>,
) -> StatusWrite {
    let api: Api<Instance> = Api::all(ctx.host.clone());
    let mut status = json!(next);
    // A merge patch keeps what it does not name: a field that went away is named null.
    if next.last_backup.is_none() {
        status["lastBackup"] = serde_json::Value::Null;
    }
    let patch = Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": status}));
    let params = PatchParams::default();
    let call = api.patch_status(name, &params, &patch);
    let answer = ctx
        .leadership
        .fenced(ctx.settings.request_timeout, call)
        .await;
    match fenced("patching the Instance status", answer) {
        Ok(written) => {
            Counters::bump(&ctx.counters.status_writes);
            StatusWrite {
                result: Ok(Box::new(next)),
                resource_version: written.metadata.resource_version,
            }
        }
        Err(e) if e.is_conflict() => {
            let fresh = tokio::time::timeout(ctx.settings.request_timeout, api.get_opt(name))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
            StatusWrite {
                result: Err(e),
                resource_version: fresh.and_then(|i| i.metadata.resource_version),
            }
        }
        Err(e) => StatusWrite {
            result: Err(e),
            resource_version: None,
        },
    }
}
