//! The RootSupervisor: starts the InstanceManager, restarts it with backoff if it fails,
//! and forwards leadership changes so leader-only duties switch on and off without
//! restarting any cache.

pub mod messages;

use tokio::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tracing::{error, info};

use super::manager::{InstanceManager, ManagerArgs, ManagerMsg};
use super::supervision::{ActorSnapshot, ActorState, Decision, RestartTracker};
use crate::context::Context;
pub use messages::RootMsg;

pub struct RootSupervisor;

pub struct RootState {
    ctx: Context,
    manager: Option<ActorRef<ManagerMsg>>,
    tracker: RestartTracker,
    last_error: Option<String>,
    started: Instant,
    leadership_task: tokio::task::JoinHandle<()>,
    /// The leader's FleetRollout passes (`rollout::runner`).
    rollouts_task: tokio::task::JoinHandle<()>,
    /// The leader's hibernation passes (`hibernation::runner`).
    hibernation_task: tokio::task::JoinHandle<()>,
}

impl RootSupervisor {
    async fn spawn_manager(
        myself: &ActorRef<RootMsg>,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        let args = ManagerArgs {
            ctx: state.ctx.clone(),
            restarts: state.tracker.total_restarts,
            last_error: state.last_error.clone(),
        };
        let (manager, _) =
            Actor::spawn_linked(None, InstanceManager, args, myself.get_cell()).await?;
        state.manager = Some(manager);
        Ok(())
    }
}

impl Actor for RootSupervisor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = Context;

    async fn pre_start(
        &self,
        myself: ActorRef<RootMsg>,
        ctx: Context,
    ) -> Result<RootState, ActorProcessingErr> {
        let mut changes = ctx.leadership.subscribe();
        let me = myself.clone();
        let leadership_task = tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let leading = *changes.borrow_and_update();
                if me
                    .send_message(RootMsg::LeadershipChanged(leading))
                    .is_err()
                {
                    return;
                }
            }
        });
        let rollouts_task = tokio::spawn(crate::rollout::runner::run(ctx.clone()));
        let hibernation_task = tokio::spawn(crate::hibernation::runner::run(ctx.clone()));
        let mut state = RootState {
            ctx,
            rollouts_task,
            hibernation_task,
            manager: None,
            tracker: RestartTracker::default(),
            last_error: None,
            started: Instant::now(),
            leadership_task,
        };
        Self::spawn_manager(&myself, &mut state).await?;
        info!(identity = %state.ctx.leadership.identity(), "supervision tree started");
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<RootMsg>,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        state.leadership_task.abort();
        state.rollouts_task.abort();
        state.hibernation_task.abort();
        if let Some(m) = state.manager.take() {
            let _ = m
                .stop_and_wait(
                    Some("shutting down".into()),
                    Some(std::time::Duration::from_secs(10)),
                )
                .await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<RootMsg>,
        msg: RootMsg,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Manager(reply) => {
                let _ = reply.send(state.manager.clone());
            }
            RootMsg::Snapshot(reply) => {
                let _ = reply.send(ActorSnapshot {
                    name: "root".into(),
                    parent: String::new(),
                    state: ActorState::Running,
                    restart_count: 0,
                    requested_restarts: 0,
                    last_error: None,
                    uptime: state.started.elapsed(),
                    instance: None,
                });
            }
            RootMsg::RespawnManager => Self::spawn_manager(&myself, state).await?,
            RootMsg::LeadershipChanged(leading) => {
                if let Some(m) = &state.manager {
                    let _ = m.send_message(ManagerMsg::LeadershipChanged(leading));
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        evt: SupervisionEvent,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        let error = match evt {
            SupervisionEvent::ActorFailed(_, e) => e.to_string(),
            SupervisionEvent::ActorTerminated(_, _, reason) => {
                reason.unwrap_or_else(|| "terminated".into())
            }
            _ => return Ok(()),
        };
        error!(error = %error, "instance manager failed; restarting it");
        state.manager = None;
        state.last_error = Some(error);
        let delay = match state
            .tracker
            .on_failure(&state.ctx.settings.restart, Instant::now())
        {
            Decision::Restart(d) | Decision::Degraded(d) => d,
        };
        myself.send_after(delay, || RootMsg::RespawnManager);
        Ok(())
    }
}
