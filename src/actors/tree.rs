//! The running supervision tree: start it, inspect it, restart an instance actor, shut it
//! down (releasing the lease) or kill it (as a crash would). Queries go through a cheap,
//! cloneable [`TreeHandle`], which is what the API holds.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};

use super::instance::InstanceMsg;
use super::manager::ManagerMsg;
use super::root::{RootMsg, RootSupervisor};
use super::supervision::ActorSnapshot;
use crate::context::{Context, Counters, Settings};
use crate::host::leader::{self, Elector, LeaderConfig, Leadership};

/// How long a query into the tree may take before it is reported as failed.
const QUERY_TIMEOUT_MS: u64 = 2_000;

#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("starting the supervision tree: {0}")]
    Spawn(String),
    #[error("the supervision tree did not answer: {0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
}

/// The running tree; derefs to its [`TreeHandle`] for queries.
/// Who leads in this process.
pub enum Election {
    /// Take part in Lease election.
    Lease(LeaderConfig),
    /// Single replica: always the leader.
    Always,
    /// Read-only replica (apiserver role): never writes.
    Never,
}

pub struct Tree {
    handle: TreeHandle,
    root_task: tokio::task::JoinHandle<()>,
    elector: Option<Elector>,
    shards: Option<crate::host::shards::Running>,
}

#[derive(Clone)]
pub struct TreeHandle {
    root: ActorRef<RootMsg>,
    ctx: Context,
}

impl std::ops::Deref for Tree {
    type Target = TreeHandle;
    fn deref(&self) -> &TreeHandle {
        &self.handle
    }
}

impl Tree {
    /// Starts the tree against a host cluster. With `leader: None` this replica always
    /// leads (single replica, no election).
    pub async fn start(
        host: kube::Client,
        leader: Option<LeaderConfig>,
        identity: &str,
        settings: Settings,
    ) -> Result<Self, TreeError> {
        let election = leader.map_or(Election::Always, Election::Lease);
        Self::start_with(host, election, identity, settings).await
    }

    pub async fn start_with(
        host: kube::Client,
        election: Election,
        identity: &str,
        settings: Settings,
    ) -> Result<Self, TreeError> {
        let (leadership, elector) = match election {
            Election::Lease(cfg) => {
                let e = leader::spawn(host.clone(), cfg);
                (e.leadership.clone(), Some(e))
            }
            Election::Always => (Leadership::always(identity), None),
            Election::Never => (Leadership::never(identity), None),
        };
        let shards = settings
            .shards
            .clone()
            .map(|cfg| crate::host::shards::spawn(host.clone(), cfg));
        let starting_at_once = settings.starting_at_once.max(1);
        let ctx = Context {
            instances: crate::host::instance_informer::InstanceInformer::start(&host),
            rollouts: crate::host::rollouts::FleetRollouts::start(&host),
            classes: crate::host::watched::Watched::start(&host),
            cluster_profiles: crate::controllers::cluster_profiles::watch(&host),
            shards: shards.as_ref().map(|r| r.shards.clone()),
            host,
            leadership,
            settings: Arc::new(settings),
            counters: Arc::new(Counters::default()),
            routes: Default::default(),
            starts: Arc::new(tokio::sync::Semaphore::new(starting_at_once)),
        };
        let (root, root_task) = Actor::spawn(None, RootSupervisor, ctx.clone())
            .await
            .map_err(|e| TreeError::Spawn(e.to_string()))?;
        Ok(Self {
            handle: TreeHandle { root, ctx },
            root_task,
            elector,
            shards,
        })
    }

    pub fn handle(&self) -> TreeHandle {
        self.handle.clone()
    }

    /// Stops every actor and releases the lease, so a successor takes over at once.
    pub async fn shutdown(self) {
        let _ = self
            .handle
            .root
            .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(15)))
            .await;
        if let Some(e) = self.elector {
            e.shutdown().await;
        }
        // After the actors stopped: the others take this replica's instances at once.
        if let Some(s) = self.shards {
            s.shutdown().await;
        }
        let _ = self.root_task.await;
    }

    /// Sharded: gives up this replica's instances while it still serves (its Lease is
    /// released, the others take them over) and waits, at most `bound`, until none is
    /// recorded as its own any more. The first step of a graceful stop. Unsharded: nothing.
    pub async fn hand_over(&mut self, bound: Duration) {
        let Some(running) = self.shards.as_mut() else {
            return;
        };
        let me = running.shards.me().to_string();
        running.release().await;
        let held = |ctx: &Context| {
            ctx.instances
                .store()
                .state()
                .iter()
                .filter(|i| crate::host::shards::handoff::recorded(i) == Some(me.as_str()))
                .count()
        };
        let started = tokio::time::Instant::now();
        while held(&self.handle.ctx) > 0 && started.elapsed() < bound {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let left = held(&self.handle.ctx);
        match left {
            0 => tracing::info!(
                replica = %me,
                secs = started.elapsed().as_secs_f64(),
                "handed every instance over"
            ),
            n => tracing::warn!(
                replica = %me,
                instances = n,
                "instances still recorded as this replica's after the hand-over bound; the others take them when its Lease expires"
            ),
        }
    }

    /// Ends the tree as a crash would: nothing is released, the lease must expire.
    pub fn kill(self) {
        self.handle.root.kill();
        if let Some(e) = self.elector {
            e.abort();
        }
        if let Some(s) = self.shards {
            s.abort();
        }
    }
}

impl TreeHandle {
    /// This replica's identity (the Lease holder name it uses).
    pub fn identity(&self) -> &str {
        self.ctx.leadership.identity()
    }

    /// This replica's share of the instances, when the fleet is sharded.
    pub fn shards(&self) -> Option<&crate::host::shards::Shards> {
        self.ctx.shards.as_ref()
    }

    pub fn leadership(&self) -> &Leadership {
        &self.ctx.leadership
    }

    pub fn counters(&self) -> &Counters {
        &self.ctx.counters
    }

    pub fn host(&self) -> &kube::Client {
        &self.ctx.host
    }

    /// The process's Instance objects, as its one watch of them sees them.
    pub fn instances(&self) -> &crate::host::instance_informer::InstanceInformer {
        &self.ctx.instances
    }

    /// The host's InstanceClasses as watched.
    pub fn classes(&self) -> &crate::host::watched::Watched<crate::crd::InstanceClass> {
        &self.ctx.classes
    }

    /// The host's FleetRollouts as watched.
    pub fn rollouts(&self) -> &crate::host::rollouts::FleetRollouts {
        &self.ctx.rollouts
    }

    pub fn settings(&self) -> &Settings {
        &self.ctx.settings
    }

    async fn manager(&self) -> Result<ActorRef<ManagerMsg>, TreeError> {
        ractor::call_t!(self.root, RootMsg::Manager, QUERY_TIMEOUT_MS)
            .map_err(|e| TreeError::Unavailable(e.to_string()))?
            .ok_or_else(|| TreeError::Unavailable("the instance manager is restarting".into()))
    }

    /// Every actor of the tree with its state, restarts, last error and uptime.
    pub async fn actors(&self) -> Result<Vec<ActorSnapshot>, TreeError> {
        let root = ractor::call_t!(self.root, RootMsg::Snapshot, QUERY_TIMEOUT_MS)
            .map_err(|e| TreeError::Unavailable(e.to_string()))?;
        let rest = ractor::call_t!(
            self.manager().await?,
            ManagerMsg::Snapshot,
            QUERY_TIMEOUT_MS
        )
        .map_err(|e| TreeError::Unavailable(e.to_string()))?;
        let leadership = &self.ctx.leadership;
        // The elector is a task of the process beside the root (it restarts itself after
        // a panic, with back-off), shown with its own run time and state.
        let elector = leadership.has_elector().then(|| {
            let (restarts, error) = leadership.elector_health();
            let (uptime, backing_off) = leadership.elector_run();
            ActorSnapshot {
                name: "leader-elector".into(),
                parent: String::new(),
                state: if backing_off {
                    crate::actors::supervision::ActorState::Backoff
                } else {
                    crate::actors::supervision::ActorState::Running
                },
                restart_count: restarts,
                requested_restarts: 0,
                last_error: error,
                uptime,
                instance: None,
            }
        });
        Ok(std::iter::once(root).chain(elector).chain(rest).collect())
    }

    pub async fn restart_instance(&self, name: &str) -> Result<(), TreeError> {
        self.restart_instance_stamped(name, None).await
    }

    /// Restarts here; `stamp` is the restart annotation this restart wrote to the Instance
    /// (so its watch event does not restart the actor a second time on this replica).
    pub async fn restart_instance_stamped(
        &self,
        name: &str,
        stamp: Option<String>,
    ) -> Result<(), TreeError> {
        let n = name.to_string();
        ractor::call_t!(
            self.manager().await?,
            |reply| ManagerMsg::Restart(n, stamp, reply),
            QUERY_TIMEOUT_MS
        )
        .map_err(|e| TreeError::Unavailable(e.to_string()))?
        .map_err(TreeError::NotFound)
    }

    /// The reader an instance actor published, for request routing: no mailbox is asked.
    pub fn reader(&self, name: &str) -> Option<Arc<crate::cache::InstanceReader>> {
        self.ctx.routes.get(name)
    }

    /// The live actor of an instance.
    pub async fn instance(&self, name: &str) -> Result<Option<ActorRef<InstanceMsg>>, TreeError> {
        let n = name.to_string();
        ractor::call_t!(
            self.manager().await?,
            |reply| ManagerMsg::Lookup(n, reply),
            QUERY_TIMEOUT_MS
        )
        .map_err(|e| TreeError::Unavailable(e.to_string()))
    }

    /// Chaos: crash the instance manager (its children go with it; the root restarts it).
    #[cfg(feature = "testbed")]
    pub async fn crash_manager(&self) -> Result<(), TreeError> {
        self.manager()
            .await?
            .send_message(ManagerMsg::Crash)
            .map_err(|e| TreeError::Unavailable(e.to_string()))
    }

    /// Chaos: panic one instance actor. False when it has no live actor.
    #[cfg(feature = "testbed")]
    pub async fn inject_panic(&self, name: &str) -> Result<bool, TreeError> {
        let n = name.to_string();
        ractor::call_t!(
            self.manager().await?,
            |reply| ManagerMsg::InjectPanic(n, reply),
            QUERY_TIMEOUT_MS
        )
        .map_err(|e| TreeError::Unavailable(e.to_string()))
    }
}
