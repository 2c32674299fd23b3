//! The InstanceActor: owns everything of one Karmada instance and nothing of another —
//! its client, caches, stats, status sync and registration. Slow I/O runs in spawned
//! tasks that report back as messages, so the actor never blocks on its instance.

pub mod connect;
pub mod messages;
pub mod probe;
pub mod stats;
mod status_sync;
mod tick;

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::{debug, info, warn};

use crate::cache::caches::Caches;
pub use crate::cache::InstanceReader;
use crate::context::Context;
use crate::crd::{Instance, InstanceStatus, Phase};
use crate::status::lifecycle::{Event, Lifecycle, Wait};
use crate::status::{self, Observed};
pub use messages::{InstanceMsg, InstanceView, StatusWrite};
use status_sync::sync_status;

pub struct InstanceActor;

/// Concurrent API requests one instance may have in flight.
pub const MAX_CONCURRENT_REQUESTS: usize = 64;
/// Streams (pass-through watches, followed logs) the API may hold open on the instance's
/// one HTTP/2 connection at once. kube-apiserver serves 250 streams per connection by
/// default; the rest stay for the caches' watches and for reads, which streams must never
/// starve.
pub const MAX_PASSTHROUGH_STREAMS: usize = 100;

/// The longest an actor keeps its starting turn: one whose caches never fill (a kind the
/// instance serves but never lists) must not keep the others waiting.
const START_TURN: Duration = Duration::from_secs(30);

pub struct InstanceArgs {
    pub instance: Instance,
    pub ctx: Context,
}

pub struct InstanceState {
    name: String,
    instance: Instance,
    ctx: Context,
    client: Option<kube::Client>,
    /// The instance's HTTP/1.1 client for upgraded connections.
    upgrades: Option<kube::Client>,
    caches: Option<Caches>,
    observed: Observed,
    probes: probe::Probes,
    /// When probes last began answering: watches that failed while the instance was down
    /// are counted towards Degraded only from then.
    answering_since: Instant,
    /// What was observed when the status last built equal to the written one.
    unchanged_since: Option<Observed>,
    write_in_flight: bool,
    last_written: Option<InstanceStatus>,
    /// The Running or Degraded verdict this actor started with (Kairship restarted, the
    /// actor was restarted, or another replica handed the instance over) stands while it
    /// is still connecting and syncing, until then at the latest: Kairship restarting
    /// does not make an instance Pending (a rollout soaking it would halt on that).
    keep_verdict_until: Option<Instant>,
    /// The Instance's resourceVersion as last seen: status writes are conditional on it,
    /// so a write that reaches the host after another replica's is refused (fencing).
    resource_version: Option<String>,
    last_write_at: Option<Instant>,
    /// The Secret the instance's kubeconfig was read from at the last connect.
    kubeconfig_source: Option<crate::host::kubeconfig::KubeconfigSource>,
    /// What the instance's certificates are read from, once connected.
    certificate_inputs: Option<crate::certificates::Inputs>,
    /// The per-instance controllers (their work is aborted with the actor).
    controllers: crate::controllers::Runner,
    last_error: Option<String>,
    ticker: Option<tokio::task::JoinHandle<()>>,
    /// Ticks at once when this replica becomes the leader, so a new leader writes status
    /// without waiting for the next tick.
    on_leadership: Option<tokio::task::JoinHandle<()>>,
    /// Serialized JSON of cached objects, shared by the API's readers of this instance.
    /// Access decisions for cache-served reads, shared by the API's readers of this instance.
    access: crate::cache::access::AccessReviews,
    /// Versions written through the proxy, for read-your-writes from the cache.
    writes: crate::cache::write_marks::WriteMarks,
    /// What the proxy answered for it, which a rollout's soak is judged on.
    traffic: std::sync::Arc<crate::cache::traffic::Traffic>,
    printers: crate::cache::printers::Printers,
    /// Bounds concurrent API requests to this instance, so a slow one cannot take all workers.
    limiter: std::sync::Arc<tokio::sync::Semaphore>,
    /// Bounds the streams the API holds open on the instance (`MAX_PASSTHROUGH_STREAMS`).
    streams: std::sync::Arc<tokio::sync::Semaphore>,
    /// What the published reader was built from, to republish only on change.
    published: Option<(bool, bool, Result<(), String>)>,
    /// What the last stats were computed from (Cluster resourceVersions and counts):
    /// aggregating parses every Cluster's summary, which at 1,000 idle instances was most
    /// of the CPU, so it runs only when an input changed.
    stats_inputs: Option<tick::StatsInputs>,
    /// This actor's turn among the replica's starting actors
    /// (`Settings::starting_at_once`), held from the connect until its caches are filled
    /// (at most [`START_TURN`]).
    start_turn: Option<(tokio::sync::OwnedSemaphorePermit, Instant)>,
}

impl InstanceState {
    /// Whether the API may read this instance, and why not.
    fn health(&self) -> Result<(), String> {
        let name = &self.name;
        match &self.observed.lifecycle {
            Lifecycle::Unreachable { why, .. } => {
                Err(format!("instance {name} is unreachable: {why}"))
            }
            Lifecycle::Connecting { why, .. } => Err(format!(
                "instance {name} is not connected yet: {}",
                why.as_deref().unwrap_or("connecting")
            )),
            Lifecycle::Degraded { synced: false, why } => {
                Err(format!("instance {name} caches cannot sync: {why}"))
            }
            l if !l.synced() => Err(format!("instance {name} caches are still syncing")),
            _ => Ok(()),
        }
    }

    /// The one place the lifecycle moves; a new phase is logged with why.
    fn on(&mut self, event: Event) {
        let before = self.observed.lifecycle.phase();
        self.observed.lifecycle = std::mem::take(&mut self.observed.lifecycle).on(event);
        let (after, why) = (
            self.observed.lifecycle.phase(),
            self.observed.lifecycle.why(),
        );
        match (before, after) {
            (b, a) if b == a => {}
            (_, Phase::Unreachable | Phase::Degraded) => {
                warn!(from = ?before, to = ?after, why = why.unwrap_or_default(), "instance phase changed")
            }
            _ => info!(from = ?before, to = ?after, "instance phase changed"),
        }
    }

    fn reader(&self) -> InstanceReader {
        let health = self.health();
        InstanceReader {
            name: self.name.clone(),
            client: self.client.clone(),
            upgrades: self.upgrades.clone(),
            stores: self
                .caches
                .as_ref()
                .map(|c| c.stores.clone())
                .unwrap_or_default(),
            access: self.access.clone(),
            writes: self.writes.clone(),
            printers: self.printers.clone(),
            health,
            limiter: self.limiter.clone(),
            streams: self.streams.clone(),
            meter: self.caches.as_ref().map(|c| c.meter.clone()),
            call_timeout: self.ctx.settings.instance_call_timeout,
            watch_health: self
                .caches
                .as_ref()
                .map(|c| c.health.clone())
                .unwrap_or_default(),
            watch_restarts: self
                .caches
                .as_ref()
                .map(|c| c.watch_restarts.clone())
                .unwrap_or_default(),
            trust: self.certificate_inputs.clone().map(std::sync::Arc::new),
            traffic: self.traffic.clone(),
        }
    }

    /// Publishes the reader for routing when what requests see of it changed.
    /// Runs after every message: the reader (which clones the store map) is built only
    /// when what it publishes changed.
    fn publish(&mut self, me: &ActorRef<InstanceMsg>) {
        let key = (self.client.is_some(), self.caches.is_some(), self.health());
        if self.published.as_ref() != Some(&key) {
            self.ctx
                .routes
                .publish(&self.name, me.get_id(), self.reader());
            self.published = Some(key);
        }
    }

    fn view(&self) -> InstanceView {
        InstanceView {
            name: self.name.clone(),
            status: status::build(self.last_written.as_ref(), &self.observed, &now()),
            last_error: self.last_error.clone(),
            controllers: self.controllers.view(),
        }
    }
}

/// Now as Kubernetes writes times (RFC 3339, UTC, whole seconds).
pub(super) fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Delay before the n-th reconnect: exponential from 500 ms, capped at 10 s.
fn reconnect_delay(attempt: u32) -> Duration {
    let n = attempt as usize + 1;
    crate::host::backoff::backoff_step(Duration::from_millis(500), Duration::from_secs(10), n)
}

impl Actor for InstanceActor {
    type Msg = InstanceMsg;
    type State = InstanceState;
    type Arguments = InstanceArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<InstanceMsg>,
        args: InstanceArgs,
    ) -> Result<InstanceState, ActorProcessingErr> {
        let name = args.instance.metadata.name.clone().unwrap_or_default();
        let (tick, call_timeout) = (
            args.ctx.settings.tick,
            args.ctx.settings.instance_call_timeout,
        );
        let ticker = myself.send_interval(tick, || InstanceMsg::Tick);
        let on_leadership = {
            let (mut leading, me) = (args.ctx.leadership.subscribe(), myself.clone());
            tokio::spawn(async move {
                while leading.changed().await.is_ok() {
                    let now_leading = *leading.borrow_and_update();
                    if now_leading && me.send_message(InstanceMsg::Tick).is_err() {
                        return;
                    }
                }
            })
        };
        myself.send_message(InstanceMsg::Connect)?;
        let observed = Observed {
            generation: args.instance.metadata.generation,
            certificate_warning: args.ctx.settings.certificate_warning,
            ..Default::default()
        };
        let controllers = crate::controllers::Runner::new(&args.ctx.settings.controllers_off);
        let settled = args.instance.status.as_ref().is_some_and(|s| {
            matches!(
                s.phase,
                crate::crd::Phase::Running | crate::crd::Phase::Degraded
            )
        });
        let keep_verdict_until = settled.then(|| Instant::now() + args.ctx.settings.degraded_after);
        Ok(InstanceState {
            name,
            keep_verdict_until,
            last_written: args.instance.status.clone(),
            resource_version: args.instance.metadata.resource_version.clone(),
            instance: args.instance,
            ctx: args.ctx,
            client: None,
            upgrades: None,
            caches: None,
            observed,
            probes: probe::Probes::default(),
            answering_since: Instant::now(),
            unchanged_since: None,
            write_in_flight: false,
            last_write_at: None,
            kubeconfig_source: None,
            certificate_inputs: None,
            controllers,
            last_error: None,
            ticker: Some(ticker),
            on_leadership: Some(on_leadership),
            limiter: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            streams: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_PASSTHROUGH_STREAMS)),
            access: crate::cache::access::AccessReviews::new(call_timeout),
            writes: crate::cache::write_marks::WriteMarks::default(),
            traffic: Default::default(),
            printers: crate::cache::printers::Printers::new(call_timeout),
            published: None,
            stats_inputs: None,
            start_turn: None,
        })
    }

    async fn post_stop(
        &self,
        myself: ActorRef<InstanceMsg>,
        state: &mut InstanceState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.ticker.take() {
            t.abort();
        }
        if let Some(t) = state.on_leadership.take() {
            t.abort();
        }
        state.controllers.abort();
        state.ctx.routes.withdraw(&state.name, myself.get_id());
        // Dropping the caches aborts their watch tasks.
        state.caches = None;
        crate::memory::release_soon();
        debug!(instance = %state.name, "instance actor stopped");
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<InstanceMsg>,
        msg: InstanceMsg,
        state: &mut InstanceState,
    ) -> Result<(), ActorProcessingErr> {
        // At ERROR so it is never filtered out: a warning must name its instance even
        // under `RUST_LOG=warn` (the chaos runner's default).
        let span = tracing::error_span!("instance", instance = %state.name);
        let _g = span.enter();
        match msg {
            InstanceMsg::Connect => {
                let (ctx, instance, me) =
                    (state.ctx.clone(), state.instance.clone(), myself.clone());
                spawn_here(async move {
                    // Never closed, so a turn always comes.
                    let turn = ctx.starts.clone().acquire_owned().await.ok();
                    // Stopped while it waited (its instance moved on): no connect.
                    if me.get_status() != ractor::ActorStatus::Running {
                        return;
                    }
                    let msg = match connect::connect(&ctx, &instance).await {
                        Ok(c) => InstanceMsg::Connected(Box::new(c), turn),
                        Err(e) => InstanceMsg::ConnectFailed(e),
                    };
                    let _ = me.send_message(msg);
                });
            }
            InstanceMsg::Connected(c, turn) => {
                info!(endpoint = %c.endpoint, "connected");
                // The components controller judges the running control plane from here.
                state.observed.upgrade_components = None;
                state.start_turn = turn.map(|t| (t, Instant::now()));
                let budget = state
                    .ctx
                    .settings
                    .cache_budget
                    .with(state.instance.spec.cache_budget.as_ref());
                let mut caches = Caches::start(&c.client, &state.name, budget);
                let ready = caches.ready();
                let me = myself.clone();
                spawn_here(async move {
                    ready.await;
                    let _ = me.send_message(InstanceMsg::CachesSynced);
                });
                let me = myself.clone();
                caches.on_breach(move || drop(me.send_message(InstanceMsg::Tick)));
                state.on(Event::Connected);
                state.observed.endpoint = Some(c.endpoint);
                state.kubeconfig_source = Some(c.source);
                state.observed.karmada_version = c.karmada_version;
                state.certificate_inputs = Some(c.certificates);
                state.client = Some(c.client);
                state.upgrades = Some(c.upgrades);
                state.caches = Some(caches);
                state.last_error = None;
                myself.send_message(InstanceMsg::Tick)?;
            }
            InstanceMsg::ConnectFailed(e) => {
                let delay = reconnect_delay(state.observed.lifecycle.connect_attempts());
                let wait = match e {
                    connect::ConnectError::Provisioning(_) => Wait::Provisioning,
                    connect::ConnectError::Upgrading { .. } => Wait::Upgrading,
                    connect::ConnectError::Failed(_) => Wait::Dialing,
                };
                // What the components controller would say, were the instance answering:
                // the rollout engine fails an upgrade whose new pods cannot run.
                if let connect::ConnectError::Upgrading { failing, .. } = &e {
                    state.observed.upgrade_components = Some(failing.clone());
                }
                if wait == Wait::Dialing {
                    warn!(error = %e, retry_in = ?delay, "cannot connect to instance");
                    state.last_error = Some(e.to_string());
                }
                state.on(Event::ConnectFailed {
                    wait,
                    why: e.to_string(),
                });
                myself.send_after(delay, || InstanceMsg::Connect);
            }
            InstanceMsg::CachesSynced => {
                info!("caches synced");
                state.start_turn = None;
                state.on(Event::CachesSynced);
                myself.send_message(InstanceMsg::Tick)?;
            }
            InstanceMsg::Tick => {
                if state
                    .start_turn
                    .as_ref()
                    .is_some_and(|(_, since)| since.elapsed() > START_TURN)
                {
                    state.start_turn = None;
                }
                tick::tick(&myself, state)
            }
            InstanceMsg::Probed(result) => {
                state.probes.in_flight = false;
                match result {
                    Ok(version) => {
                        if state.observed.lifecycle.reachable() != Some(true) {
                            state.answering_since = Instant::now();
                        }
                        state.probes.failures = 0;
                        state.observed.kubernetes_version = Some(version);
                        state.on(Event::ProbeAnswered);
                    }
                    Err(e) => {
                        state.probes.failures += 1;
                        state.last_error = Some(e.to_string());
                        if state.probes.failures >= state.ctx.settings.unreachable_after {
                            state.on(Event::ProbesFailed(e.to_string()));
                            // Reported at once, not on the next tick.
                            if state.ctx.leadership.is_leader() {
                                sync_status(&myself, state);
                            }
                        } else {
                            // Confirmed or cleared by the next probe, sent now.
                            tick::probe(&myself, state);
                        }
                    }
                }
            }
            InstanceMsg::StatusWritten(w) => status_sync::written(state, w),
            InstanceMsg::Reconciled(done) => {
                if let Some(e) = state.controllers.finished(done, &mut state.observed) {
                    state.last_error = Some(e);
                }
            }
            InstanceMsg::View(reply) => {
                let _ = reply.send(state.view());
            }
            #[cfg(feature = "testbed")]
            InstanceMsg::Panic => {
                panic!("chaos: panic injected into instance actor {}", state.name)
            }
        }
        state.publish(&myself);
        Ok(())
    }
}

/// Spawns work for this instance in the current span (the actor's, naming the instance),
/// so what the task logs says which instance it is about.
pub(super) fn spawn_here<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(tracing::Instrument::in_current_span(f))
}
