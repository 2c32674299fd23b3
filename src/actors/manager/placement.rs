//! Where an instance's actor runs when the fleet is sharded (`actors::shards`): only on
//! the replica that owns the instance. The manager asks [`decide`] before it starts an
//! actor or does an owner's work (finalizers, cleanup), and carries out the handoff's
//! record writes here, one in flight per instance.

use std::time::Duration;

use kube::api::Api;
use ractor::ActorRef;
use tracing::{info, warn};

use super::{ManagerMsg, ManagerState};
use crate::actors::context::Context;
use crate::actors::shards::handoff::{self, Step};
use crate::crd::Instance;

/// What the manager may do for `instance` here: `None` when the fleet is not sharded
/// (every replica runs every instance), else this replica's step.
pub fn decide(ctx: &Context, instance: &Instance) -> Option<Step> {
    ctx.shards.as_ref().map(|s| s.step(instance))
}

/// The context an instance's actor and its owner's work act with: when sharded, their
/// writes are fenced by this replica's own Lease instead of the leader's.
pub fn acting(ctx: &Context) -> Context {
    let mut ctx = ctx.clone();
    if let Some(s) = &ctx.shards {
        ctx.leadership = s.lease().clone();
    }
    ctx
}

/// Writes the handoff record `step` calls for (us for `Acquire`, nobody for `Release`,
/// after the actor has stopped), unless one is in flight for this instance. The answer
/// comes back as `ManagerMsg::Recorded`; a refused write (another replica moved first) is
/// decided again at the next event.
pub fn record(state: &mut ManagerState, myself: &ActorRef<ManagerMsg>, name: &str, step: Step) {
    let Some(shards) = state.ctx.shards.clone() else {
        return;
    };
    let Some(child) = state.children.get_mut(name) else {
        return;
    };
    if child.recording {
        return;
    }
    let to = match step {
        Step::Acquire => Some(shards.me().to_string()),
        Step::Release => None,
        _ => return,
    };
    child.recording = true;
    child.recording_from = child.instance.metadata.resource_version.clone();
    // The actor stops before the record is cleared, so the next owner never starts while
    // this one may still write.
    let stopping = child.actor.take();
    if let Some(a) = &stopping {
        state.by_actor.remove(&a.get_id());
        child.state = crate::actors::supervision::ActorState::Stopped;
    }
    let instance = child.instance.clone();
    let api: Api<Instance> = Api::all(state.ctx.host.clone());
    let timeout = state.ctx.settings.host_call_timeout;
    let (me, n) = (myself.clone(), name.to_string());
    tokio::spawn(async move {
        if let Some(a) = stopping {
            info!(instance = %n, "instance moves to another replica; stopping its actor");
            let _ = a
                .stop_and_wait(Some("moved to another replica".into()), Some(timeout))
                .await;
        }
        let result =
            match tokio::time::timeout(timeout, handoff::record(&api, &instance, to.as_deref()))
                .await
            {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer from the host in {timeout:?}")),
            };
        let _ = me.send_message(ManagerMsg::Recorded(n, result));
    });
}

/// A record write finished: on failure, look again after `retry` (a conflict needs no
/// retry, since the change that caused it arrives as an event, but a lost host does).
pub fn recorded(
    state: &mut ManagerState,
    myself: &ActorRef<ManagerMsg>,
    name: &str,
    result: Result<(), String>,
    retry: Duration,
) {
    let Some(child) = state.children.get_mut(name) else {
        return;
    };
    child.recording = false;
    let decided_on = child.recording_from.take();
    let store = state.ctx.instances.store().clone();
    let key = kube::runtime::reflector::ObjectRef::new(name);
    // Changes that arrived during the write (the write's own, a peer's record, a ring
    // that moved again) were not acted on: decide on the Instance as it is now.
    let changed_meanwhile = store
        .get(&key)
        .filter(|latest| latest.metadata.resource_version != decided_on);
    match result {
        Ok(()) => {
            child.record_failures = 0;
            info!(instance = %name, "ownership record written");
            if let Some(latest) = changed_meanwhile {
                let _ = myself.send_message(ManagerMsg::Apply(Box::new((*latest).clone())));
            }
        }
        Err(e) => {
            child.record_failures = child.record_failures.saturating_add(1);
            if let Some(latest) = changed_meanwhile {
                // Refused because the Instance changed: what changed decides, at once.
                warn!(instance = %name, error = %e, "ownership record not written; the Instance changed meanwhile, deciding again");
                let _ = myself.send_message(ManagerMsg::Apply(Box::new((*latest).clone())));
                return;
            }
            // A host that is gone is not asked again for every instance at every tick.
            let retry = record_retry(retry, child.record_failures);
            warn!(instance = %name, error = %e, retry_secs = retry.as_secs_f64(), "ownership record not written; deciding again");
            // Decided again on the Instance as it is then, not as it was: a stale copy
            // would only conflict again.
            let fallback = child.instance.clone();
            myself.send_after(retry, move || {
                let latest = store.get(&key).map_or(fallback, |i| (*i).clone());
                ManagerMsg::Apply(Box::new(latest))
            });
        }
    }
}

/// The wait before deciding again after `failures` record writes failed in a row:
/// doubling from `base`, at most 30 s.
fn record_retry(base: Duration, failures: u32) -> Duration {
    let doubled = base.saturating_mul(1 << failures.saturating_sub(1).min(8));
    doubled
        .min(Duration::from_secs(30))
        .max(base.min(Duration::from_secs(30)))
}

/// Feeds the manager the live replicas' changes.
pub fn watch_members(
    ctx: &Context,
    manager: ActorRef<ManagerMsg>,
) -> Option<tokio::task::JoinHandle<()>> {
    let shards = ctx.shards.as_ref()?;
    let mut changes = shards.subscribe();
    // This replica's own Lease too: released on a graceful stop, its instances are
    // handed over at once rather than at the next listing of the Leases.
    let mut mine = shards.lease().subscribe();
    Some(tokio::spawn(async move {
        let mut elector_gone = false;
        loop {
            tokio::select! {
                c = changes.changed() => if c.is_err() { return },
                c = mine.changed(), if !elector_gone => elector_gone = c.is_err(),
            }
            if manager.send_message(ManagerMsg::MembersChanged).is_err() {
                return;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_record_writes_back_off_to_a_bound() {
        let base = Duration::from_secs(1);
        let waits: Vec<u64> = (1..=8).map(|n| record_retry(base, n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(record_retry(base, u32::MAX), Duration::from_secs(30));
    }
}
