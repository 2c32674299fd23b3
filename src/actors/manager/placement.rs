//! Where an instance's actor runs when the fleet is sharded (`host::shards`): only on
//! the replica that owns the instance. The manager asks [`decide`] before it starts an
//! actor or does an owner's work (finalizers, cleanup), feeds each instance's placement
//! machine (`host::shards::machine`), and carries out the record writes it asks for
//! here, one in flight per instance.

use std::time::Duration;

use kube::api::Api;
use ractor::ActorRef;
use tracing::{info, warn};

use super::{ManagerMsg, ManagerState};
use crate::context::Context;
use crate::crd::Instance;
use crate::host::shards::handoff::{self, Step};
use crate::host::shards::machine::{self, Effect, Event, Record};

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

/// Writes the record `record` the placement machine asked for: the actor (if any) stopped
/// and waited for first, so the next owner never starts while this one may still write.
/// The answer comes back as `ManagerMsg::Recorded`, for [`recorded`].
pub fn write(state: &mut ManagerState, myself: &ActorRef<ManagerMsg>, name: &str, record: Record) {
    let Some(shards) = state.ctx.shards.clone() else {
        return;
    };
    let Some(child) = state.children.get_mut(name) else {
        return;
    };
    let to = match record {
        Record::Me => Some(shards.me().to_string()),
        Record::Nobody => None,
    };
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

/// A record write returned: the placement machine says what next, on the Instance as the
/// cache has it now (`retry`: the first wait after a failure).
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
    let store = state.ctx.instances.store().clone();
    let key = kube::runtime::reflector::ObjectRef::new(name);
    let latest = store.get(&key);
    let version = latest
        .as_ref()
        .and_then(|l| l.metadata.resource_version.clone());
    let event = Event::Written {
        ok: result.is_ok(),
        latest: version.as_deref(),
    };
    let (next, effects) = machine::decide(&child.placement, &event, retry);
    child.placement = next;
    match &result {
        Ok(()) => info!(instance = %name, "ownership record written"),
        Err(e) => {
            warn!(instance = %name, error = %e, "ownership record not written; deciding again")
        }
    }
    for effect in effects {
        match effect {
            Effect::DecideAgain => {
                if let Some(latest) = &latest {
                    let _ = myself.send_message(ManagerMsg::Apply(Box::new((**latest).clone())));
                }
            }
            // Decided again on the Instance as it is then, not as it was: a stale copy
            // would only conflict again.
            Effect::DecideAgainAfter(wait) => {
                let fallback = child.instance.clone();
                let (store, key) = (store.clone(), key.clone());
                myself.send_after(wait, move || {
                    let latest = store.get(&key).map_or(fallback, |i| (*i).clone());
                    ManagerMsg::Apply(Box::new(latest))
                });
            }
            Effect::Proceed | Effect::Stop | Effect::Write(_) => {}
        }
    }
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
