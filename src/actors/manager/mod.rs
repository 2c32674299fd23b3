//! The InstanceManager: a dynamic supervisor keeping exactly one InstanceActor per
//! `Instance` object — spawned on add, restarted on spec change, stopped on delete or
//! pause — and restarting failed children with backoff up to a restart-intensity limit,
//! past which only that instance is marked Degraded.

pub mod cleanup;
pub mod decide;
pub mod messages;
pub mod placement;

use std::collections::HashMap;
use tokio::time::Instant;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tracing::{info, warn};

use super::instance::{InstanceActor, InstanceArgs, InstanceMsg};
use super::supervision::{ActorSnapshot, ActorState, Decision, RestartTracker};
use crate::context::Context;
use crate::crd::{Instance, FINALIZER};
use crate::host::instance_informer::InstanceEvent;
use crate::host::shards::handoff::Step;
use crate::host::shards::machine::{self, Event, Placement};
use decide::{decide, Effect, Pending, Seen};
pub use messages::ManagerMsg;

pub struct InstanceManager;

struct Child {
    instance: Instance,
    actor: Option<ActorRef<InstanceMsg>>,
    state: ActorState,
    tracker: RestartTracker,
    last_error: Option<String>,
    since: Instant,
    pending: Pending,
    /// The Instance's restart annotation last acted on: a new value restarts the actor on
    /// every replica, as `kubectl rollout restart` does for pods.
    restarted_at: Option<String>,
    requested_restarts: u32,
    /// Where it is placed when the fleet is sharded (a record write in flight, failures).
    placement: Placement,
}

impl Child {
    /// Marks `done` finished, if it was what was pending.
    fn finished(&mut self, done: Pending) {
        if self.pending == done {
            self.pending = Pending::Nothing;
        }
    }
}

fn restart_stamp(i: &Instance) -> Option<String> {
    i.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::crd::RESTART_ANNOTATION))
        .cloned()
}

/// What the root starts a manager with: the context, and the failures of the managers
/// before it (each restart is a fresh actor, so it is told its history to report it).
pub struct ManagerArgs {
    pub ctx: Context,
    pub restarts: u32,
    pub last_error: Option<String>,
}

pub struct ManagerState {
    ctx: Context,
    restarts: u32,
    last_error: Option<String>,
    children: HashMap<String, Child>,
    by_actor: HashMap<ActorId, String>,
    watch_task: tokio::task::JoinHandle<()>,
    members_task: Option<tokio::task::JoinHandle<()>>,
    started: Instant,
}

/// The part of the spec that needs a fresh actor when it changes.
/// What an instance actor is started from: its spec, and whether Kairship's roles reach its
/// members (an annotation); a change restarts the actor. Not the backup schedule: the
/// actor reads it from the Instance informer at each check, and a new schedule should
/// not drop the instance's caches.
fn spec_key(i: &Instance) -> String {
    let members = crate::controllers::member_access::wanted(i);
    let mut spec = i.spec.clone();
    spec.backup_schedule = None;
    format!(
        "{}|members={members}",
        serde_json::to_string(&spec).unwrap_or_default()
    )
}

fn deleting(i: &Instance) -> bool {
    i.metadata.deletion_timestamp.is_some()
}

impl InstanceManager {
    async fn spawn_child(
        &self,
        myself: &ActorRef<ManagerMsg>,
        state: &mut ManagerState,
        name: &str,
    ) {
        let Some(child) = state.children.get_mut(name) else {
            return;
        };
        child.finished(Pending::Respawn);
        if child.actor.is_some()
            || child.instance.spec.paused
            || child.instance.asleep()
            || deleting(&child.instance)
        {
            return;
        }
        if placement::decide(&state.ctx, &child.instance).is_some_and(|s| s != Step::Run) {
            return;
        }
        if let Err(e) = child.instance.spec.validate() {
            child.state = ActorState::Degraded;
            child.last_error = Some(e.clone());
            warn!(instance = %name, error = %e, "instance spec is invalid; not starting it");
            cleanup::write_invalid(&state.ctx, name, &e);
            return;
        }
        let args = InstanceArgs {
            instance: child.instance.clone(),
            ctx: placement::acting(&state.ctx),
        };
        match Actor::spawn_linked(None, InstanceActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                state.by_actor.insert(actor.get_id(), name.to_string());
                child.actor = Some(actor);
                child.state = ActorState::Running;
                child.since = Instant::now();
                info!(instance = %name, "instance actor started");
            }
            Err(e) => {
                child.last_error = Some(format!("spawn failed: {e}"));
                self.on_failure(myself, state, name, format!("spawn failed: {e}"));
            }
        }
    }

    /// A fresh actor now, with a clean restart history (an SRE's restart also lifts Degraded).
    async fn restart_child(
        &self,
        myself: &ActorRef<ManagerMsg>,
        state: &mut ManagerState,
        name: &str,
    ) {
        if let Some(child) = state.children.get_mut(name) {
            child.tracker.reset();
            child.finished(Pending::Respawn);
            child.requested_restarts = child.requested_restarts.saturating_add(1);
        }
        Self::stop_child(state, name, "restart requested");
        self.spawn_child(myself, state, name).await;
    }

    fn stop_child(state: &mut ManagerState, name: &str, why: &str) {
        if let Some(child) = state.children.get_mut(name) {
            if let Some(actor) = child.actor.take() {
                // Forget the id first, so its termination is not taken for a failure.
                state.by_actor.remove(&actor.get_id());
                actor.stop(Some(why.to_string()));
                info!(instance = %name, reason = why, "instance actor stopped");
            }
            child.state = ActorState::Stopped;
            child.since = Instant::now();
        }
    }

    fn on_failure(
        &self,
        myself: &ActorRef<ManagerMsg>,
        state: &mut ManagerState,
        name: &str,
        error: String,
    ) {
        let policy = state.ctx.settings.restart.clone();
        let Some(child) = state.children.get_mut(name) else {
            return;
        };
        child.actor = None;
        child.last_error = Some(error.clone());
        child.since = Instant::now();
        let decision = child.tracker.on_failure(&policy, Instant::now());
        let delay = match decision {
            Decision::Restart(d) => {
                child.state = ActorState::Backoff;
                warn!(instance = %name, error = %error, restart_in = ?d, restarts = child.tracker.total_restarts, "instance actor failed; restarting");
                d
            }
            Decision::Degraded(d) => {
                child.state = ActorState::Degraded;
                warn!(instance = %name, error = %error, retry_in = ?d, "instance actor keeps failing; marked Degraded");
                cleanup::write_degraded(
                    &state.ctx,
                    name,
                    &format!("instance actor restarted too often: {error}"),
                );
                d
            }
        };
        if child.pending == Pending::Nothing {
            child.pending = Pending::Respawn;
            let n = name.to_string();
            myself.send_after(delay, move || ManagerMsg::Respawn(n));
        }
    }

    /// Decides again for every instance known.
    async fn apply_all(&self, myself: &ActorRef<ManagerMsg>, state: &mut ManagerState) {
        let all: Vec<Instance> = state
            .children
            .values()
            .map(|c| c.instance.clone())
            .collect();
        for i in all {
            self.apply(myself, state, i).await;
        }
    }

    async fn apply(
        &self,
        myself: &ActorRef<ManagerMsg>,
        state: &mut ManagerState,
        instance: Instance,
    ) {
        let Some(name) = instance.metadata.name.clone() else {
            return;
        };
        // Sharded: this replica acts for the instance only as its recorded owner, and takes
        // or gives it up first where the ring says so.
        let step = placement::decide(&state.ctx, &instance);
        if let Some(step) = step {
            let child = state
                .children
                .entry(name.clone())
                .or_insert_with(|| new_child(instance.clone()));
            let seen = Event::Seen {
                step,
                version: instance.metadata.resource_version.as_deref(),
            };
            let (next, effects) = machine::decide(&child.placement, &seen, state.ctx.settings.tick);
            child.placement = next;
            match effects.first() {
                // A write in flight: decided once it returns.
                None => return,
                // The write stops any actor here and waits for it first.
                Some(machine::Effect::Write(record)) => {
                    let record = *record;
                    child.instance = instance;
                    placement::write(state, myself, &name, record);
                    return;
                }
                // Run here, or stop: the lifecycle below acts on `step`.
                Some(_) => {}
            }
        }
        let leader = match step {
            Some(s) => s == Step::Run,
            None => state.ctx.leadership.is_leader(),
        };
        let (spec_changed, restart_requested) = match state.children.get_mut(&name) {
            Some(child) => {
                let changed = spec_key(&child.instance) != spec_key(&instance);
                let stamp = restart_stamp(&instance);
                let restart = stamp.is_some() && stamp != child.restarted_at;
                // A deleted instance's restart stamp is not taken in: it never restarts.
                if !deleting(&instance) {
                    child.restarted_at = stamp;
                }
                (changed, restart)
            }
            None => (true, false),
        };
        let child = state
            .children
            .entry(name.clone())
            .or_insert_with(|| new_child(instance.clone()));
        child.instance = instance;
        let seen = Seen {
            deleting: deleting(&child.instance),
            has_finalizer: child
                .instance
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|x| x == FINALIZER)),
            leader,
            paused: child.instance.spec.paused,
            asleep: child.instance.asleep(),
            owned_elsewhere: step.is_some_and(|s| s != Step::Run),
            spec_changed,
            restart_requested,
            running: child.actor.is_some(),
            pending: child.pending,
            degraded: child.state == ActorState::Degraded,
        };
        let acting = placement::acting(&state.ctx);
        for effect in decide(&seen) {
            match effect {
                Effect::Stop(why) => Self::stop_child(state, &name, why),
                Effect::Cleanup => {
                    if let Some(child) = state.children.get_mut(&name) {
                        child.pending = Pending::Cleanup;
                        cleanup::spawn_cleanup(
                            acting.clone(),
                            child.instance.clone(),
                            myself.clone(),
                        );
                    }
                }
                Effect::AddFinalizer => cleanup::add_finalizer(&acting, &name),
                Effect::Restart => {
                    info!(instance = %name, "restart requested through the Instance annotation");
                    self.restart_child(myself, state, &name).await;
                }
                Effect::Spawn => self.spawn_child(myself, state, &name).await,
            }
        }
    }
}

fn new_child(instance: Instance) -> Child {
    Child {
        restarted_at: restart_stamp(&instance),
        requested_restarts: 0,
        placement: Placement::default(),
        instance,
        actor: None,
        state: ActorState::Starting,
        tracker: RestartTracker::default(),
        last_error: None,
        since: Instant::now(),
        pending: Pending::Nothing,
    }
}

/// Feeds the manager from the process's Instance watch: everything there is when it
/// starts (a restarted manager begins from the whole list), then every change.
fn watch_instances(ctx: &Context, manager: ActorRef<ManagerMsg>) -> tokio::task::JoinHandle<()> {
    let mut events = ctx.instances.subscribe();
    tokio::spawn(async move {
        while let Some(batch) = events.next().await {
            for event in batch {
                let msg = match event {
                    InstanceEvent::Applied(i) => ManagerMsg::Apply(Box::new((*i).clone())),
                    InstanceEvent::Deleted(name) => ManagerMsg::Deleted(name),
                    InstanceEvent::Listed(names) => ManagerMsg::Resync(names),
                };
                if manager.send_message(msg).is_err() {
                    return;
                }
            }
        }
    })
}

impl Actor for InstanceManager {
    type Msg = ManagerMsg;
    type State = ManagerState;
    type Arguments = ManagerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ManagerMsg>,
        args: ManagerArgs,
    ) -> Result<ManagerState, ActorProcessingErr> {
        let ManagerArgs {
            ctx,
            restarts,
            last_error,
        } = args;
        let watch_task = watch_instances(&ctx, myself.clone());
        let members_task = placement::watch_members(&ctx, myself.clone());
        Ok(ManagerState {
            ctx,
            restarts,
            last_error,
            children: HashMap::new(),
            by_actor: HashMap::new(),
            watch_task,
            members_task,
            started: Instant::now(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ManagerMsg>,
        state: &mut ManagerState,
    ) -> Result<(), ActorProcessingErr> {
        state.watch_task.abort();
        if let Some(t) = &state.members_task {
            t.abort();
        }
        let names: Vec<String> = state.children.keys().cloned().collect();
        for n in names {
            Self::stop_child(state, &n, "manager stopping");
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ManagerMsg>,
        msg: ManagerMsg,
        state: &mut ManagerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ManagerMsg::Apply(i) => self.apply(&myself, state, *i).await,
            ManagerMsg::Deleted(name) => {
                Self::stop_child(state, &name, "instance deleted");
                state.children.remove(&name);
            }
            ManagerMsg::Resync(names) => {
                // Readers left by a crashed predecessor's actors, for instances now gone.
                state.ctx.routes.retain(&names);
                let gone: Vec<String> = state
                    .children
                    .keys()
                    .filter(|n| !names.contains(n))
                    .cloned()
                    .collect();
                for n in gone {
                    Self::stop_child(state, &n, "instance no longer exists");
                    state.children.remove(&n);
                }
            }
            ManagerMsg::Respawn(name) => self.spawn_child(&myself, state, &name).await,
            // Instances may move between replicas.
            ManagerMsg::MembersChanged => self.apply_all(&myself, state).await,
            ManagerMsg::Recorded(name, result) => {
                let retry = state.ctx.settings.tick;
                placement::recorded(state, &myself, &name, result, retry);
            }
            ManagerMsg::LeadershipChanged(leading) => {
                info!(leader = leading, "leadership changed");
                if leading {
                    // Catch up on leader-only work (finalizers, cleanups) for what we know.
                    self.apply_all(&myself, state).await;
                }
            }
            ManagerMsg::CleanedUp(name, result) => {
                if let Some(child) = state.children.get_mut(&name) {
                    child.finished(Pending::Cleanup);
                    if let Err(e) = result {
                        warn!(instance = %name, error = %e, "cleanup failed; retrying");
                        child.last_error = Some(e.to_string());
                        let instance = child.instance.clone();
                        myself.send_after(state.ctx.settings.tick, move || {
                            ManagerMsg::Apply(Box::new(instance))
                        });
                    }
                }
            }
            ManagerMsg::Snapshot(reply) => {
                let mut out = vec![ActorSnapshot {
                    name: "instance-manager".into(),
                    parent: "root".into(),
                    state: ActorState::Running,
                    restart_count: state.restarts,
                    requested_restarts: 0,
                    last_error: state.last_error.clone(),
                    uptime: state.started.elapsed(),
                    instance: None,
                }];
                let mut names: Vec<&String> = state.children.keys().collect();
                names.sort();
                for n in names {
                    let c = &state.children[n];
                    out.push(ActorSnapshot {
                        name: format!("instance/{n}"),
                        parent: "instance-manager".into(),
                        state: c.state,
                        restart_count: c.tracker.total_restarts,
                        requested_restarts: c.requested_restarts,
                        last_error: c.last_error.clone(),
                        uptime: c.since.elapsed(),
                        instance: Some(n.clone()),
                    });
                }
                let _ = reply.send(out);
            }
            ManagerMsg::Restart(name, stamp, reply) => {
                let result = match state.children.get_mut(&name) {
                    // The annotation's watch event came first and restarted it already.
                    Some(child) if stamp.is_some() && child.restarted_at == stamp => Ok(()),
                    Some(child) => {
                        if stamp.is_some() {
                            child.restarted_at = stamp;
                        }
                        self.restart_child(&myself, state, &name).await;
                        Ok(())
                    }
                    None => Err(format!("no instance named {name:?}")),
                };
                let _ = reply.send(result);
            }
            ManagerMsg::Lookup(name, reply) => {
                let _ = reply.send(state.children.get(&name).and_then(|c| c.actor.clone()));
            }
            #[cfg(feature = "testbed")]
            ManagerMsg::InjectPanic(name, reply) => {
                let actor = state.children.get(&name).and_then(|c| c.actor.clone());
                let _ = reply.send(
                    actor
                        .map(|a| a.send_message(InstanceMsg::Panic).is_ok())
                        .unwrap_or(false),
                );
            }
            #[cfg(feature = "testbed")]
            ManagerMsg::Crash => panic!("chaos: the instance manager was told to crash"),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ManagerMsg>,
        evt: SupervisionEvent,
        state: &mut ManagerState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, error): (ActorCell, String) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => (
                cell,
                reason.unwrap_or_else(|| "terminated unexpectedly".into()),
            ),
            _ => return Ok(()),
        };
        // Only children we did not stop ourselves are still in by_actor.
        if let Some(name) = state.by_actor.remove(&cell.get_id()) {
            // A panicked actor never ran post_stop: take down what it published.
            state.ctx.routes.withdraw(&name, cell.get_id());
            self.on_failure(&myself, state, &name, error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BackupScheduleSpec, InstanceMode, InstanceSpec};

    #[test]
    fn a_backup_schedule_does_not_restart_the_actor_but_a_pause_does() {
        let before = Instance::new(
            "a",
            InstanceSpec {
                mode: InstanceMode::Managed,
                external: None,
                managed: None,
                paused: false,
                cache_budget: None,
                backup_schedule: None,
                maintenance_window: None,
                class_name: None,
                guardrails: Vec::new(),
                hibernation: None,
            },
        );
        let mut scheduled = before.clone();
        scheduled.spec.backup_schedule = Some(BackupScheduleSpec {
            interval_minutes: 60,
            keep: None,
        });
        assert_eq!(spec_key(&before), spec_key(&scheduled));
        let mut paused = before.clone();
        paused.spec.paused = true;
        assert_ne!(spec_key(&before), spec_key(&paused));
    }
}
