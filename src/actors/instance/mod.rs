//! The InstanceActor: owns everything of one Karmada instance and nothing of another —
//! its client, caches, stats, status sync and registration. Slow I/O runs in spawned
//! tasks that report back as messages, so the actor never blocks on its instance.

pub mod access;
pub mod caches;
pub mod client;
pub mod connect;
pub mod feed;
pub mod memo;
pub mod messages;
pub mod printers;
pub mod registration;
pub mod stats;
pub mod status;
pub mod write_marks;

use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use kube::api::{Api, Patch, PatchParams};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::json;
use tracing::{debug, info, warn};

use super::context::{Context, Counters};
use crate::crd::{Instance, InstanceStatus};
use caches::{Caches, Kind};
pub use messages::{InstanceMsg, InstanceReader, InstanceView, StatusWrite};
use status::Observed;

pub struct InstanceActor;

/// Concurrent API requests one instance may have in flight.
pub const MAX_CONCURRENT_REQUESTS: usize = 64;

pub struct InstanceArgs {
    pub instance: Instance,
    pub ctx: Context,
}

pub struct InstanceState {
    name: String,
    instance: Instance,
    ctx: Context,
    client: Option<kube::Client>,
    caches: Option<Caches>,
    observed: Observed,
    connect_attempts: usize,
    probe_failures: u32,
    /// Ticks since the last probe was sent.
    ticks_since_probe: u32,
    /// What was observed when the status last built equal to the written one.
    unchanged_since: Option<Observed>,
    probe_in_flight: bool,
    write_in_flight: bool,
    last_written: Option<InstanceStatus>,
    /// The Instance's resourceVersion as last seen: status writes are conditional on it,
    /// so a write that reaches the host after another replica's is refused (fencing).
    resource_version: Option<String>,
    last_write_at: Option<Instant>,
    registered: bool,
    last_error: Option<String>,
    ticker: Option<tokio::task::JoinHandle<()>>,
    /// Ticks at once when this replica becomes the leader, so a new leader writes status
    /// without waiting for the next tick.
    on_leadership: Option<tokio::task::JoinHandle<()>>,
    /// Serialized JSON of cached objects, shared by the API's readers of this instance.
    json: memo::JsonMemo,
    /// Access decisions for cache-served reads, shared by the API's readers of this instance.
    access: access::AccessReviews,
    /// Versions written through the proxy, for read-your-writes from the cache.
    writes: write_marks::WriteMarks,
    printers: printers::Printers,
    /// Bounds concurrent API requests to this instance, so a slow one cannot take all workers.
    limiter: std::sync::Arc<tokio::sync::Semaphore>,
    /// What the published reader was built from, to republish only on change.
    published: Option<(bool, bool, Result<(), String>)>,
    /// What the last stats were computed from (Cluster resourceVersions and counts):
    /// aggregating parses every Cluster's summary, which at 1,000 idle instances was most
    /// of the CPU, so it runs only when an input changed.
    stats_inputs: Option<StatsInputs>,
}

#[derive(PartialEq)]
struct StatsInputs {
    clusters: Vec<Option<String>>,
    counts: stats::Counts,
}

impl InstanceState {
    /// Whether the API may read this instance, and why not.
    fn health(&self) -> Result<(), String> {
        if self.observed.reachable == Some(false) {
            Err(format!(
                "instance {} is unreachable: {}",
                self.name,
                self.observed.message.as_deref().unwrap_or("probe failed")
            ))
        } else if self.client.is_none() {
            Err(format!(
                "instance {} is not connected yet: {}",
                self.name,
                self.observed.message.as_deref().unwrap_or("connecting")
            ))
        } else if !self.observed.synced {
            Err(format!("instance {} caches are still syncing", self.name))
        } else {
            Ok(())
        }
    }

    fn reader(&self) -> InstanceReader {
        let health = self.health();
        InstanceReader {
            name: self.name.clone(),
            client: self.client.clone(),
            stores: self
                .caches
                .as_ref()
                .map(|c| c.stores.clone())
                .unwrap_or_default(),
            json: self.json.clone(),
            access: self.access.clone(),
            writes: self.writes.clone(),
            printers: self.printers.clone(),
            health,
            limiter: self.limiter.clone(),
            feeds: self
                .caches
                .as_ref()
                .map(|c| c.feeds.clone())
                .unwrap_or_default(),
            watch_restarts: self
                .caches
                .as_ref()
                .map(|c| c.watch_restarts.clone())
                .unwrap_or_default(),
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
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Delay before the n-th reconnect: exponential from 500 ms, capped at 10 s.
fn reconnect_delay(attempt: usize) -> Duration {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(10))
        .with_jitter()
        .without_max_times()
        .build()
        .nth(attempt)
        .unwrap_or(Duration::from_secs(10))
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
        let tick = args.ctx.settings.tick;
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
            ..Default::default()
        };
        Ok(InstanceState {
            name,
            last_written: args.instance.status.clone(),
            resource_version: args.instance.metadata.resource_version.clone(),
            instance: args.instance,
            ctx: args.ctx,
            client: None,
            caches: None,
            observed,
            connect_attempts: 0,
            probe_failures: 0,
            ticks_since_probe: 0,
            unchanged_since: None,
            probe_in_flight: false,
            write_in_flight: false,
            last_write_at: None,
            registered: false,
            last_error: None,
            ticker: Some(ticker),
            on_leadership: Some(on_leadership),
            limiter: std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            json: memo::JsonMemo::default(),
            access: access::AccessReviews::default(),
            writes: write_marks::WriteMarks::default(),
            printers: printers::Printers::default(),
            published: None,
            stats_inputs: None,
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
        state.ctx.routes.withdraw(&state.name, myself.get_id());
        // Dropping the caches aborts their watch tasks.
        state.caches = None;
        debug!(instance = %state.name, "instance actor stopped");
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<InstanceMsg>,
        msg: InstanceMsg,
        state: &mut InstanceState,
    ) -> Result<(), ActorProcessingErr> {
        let span = tracing::info_span!("instance", instance = %state.name);
        let _g = span.enter();
        match msg {
            InstanceMsg::Connect => {
                let (ctx, instance, me) =
                    (state.ctx.clone(), state.instance.clone(), myself.clone());
                tokio::spawn(async move {
                    let msg = match connect::connect(&ctx, &instance).await {
                        Ok(c) => InstanceMsg::Connected(Box::new(c)),
                        Err(e) => InstanceMsg::ConnectFailed(e),
                    };
                    let _ = me.send_message(msg);
                });
            }
            InstanceMsg::Connected(c) => {
                info!(endpoint = %c.endpoint, "connected");
                let caches = Caches::start(&c.client, &state.name);
                let ready = caches.ready();
                let me = myself.clone();
                tokio::spawn(async move {
                    ready.await;
                    let _ = me.send_message(InstanceMsg::CachesSynced);
                });
                state.observed.connected = true;
                state.observed.provisioning = false;
                state.observed.upgrading = false;
                state.observed.endpoint = Some(c.endpoint);
                state.observed.karmada_version = c.karmada_version;
                state.observed.message = None;
                state.client = Some(c.client);
                state.caches = Some(caches);
                state.connect_attempts = 0;
                state.last_error = None;
                myself.send_message(InstanceMsg::Tick)?;
            }
            InstanceMsg::ConnectFailed(e) => {
                let delay = reconnect_delay(state.connect_attempts);
                state.connect_attempts += 1;
                state.observed.provisioning = matches!(e, connect::ConnectError::Provisioning(_));
                state.observed.upgrading = matches!(e, connect::ConnectError::Upgrading(_));
                state.observed.message = Some(e.to_string());
                if !state.observed.provisioning && !state.observed.upgrading {
                    warn!(error = %e, retry_in = ?delay, "cannot connect to instance");
                    state.last_error = Some(e.to_string());
                }
                myself.send_after(delay, || InstanceMsg::Connect);
            }
            InstanceMsg::CachesSynced => {
                info!("caches synced");
                state.observed.synced = true;
                myself.send_message(InstanceMsg::Tick)?;
            }
            InstanceMsg::Tick => tick(&myself, state),
            InstanceMsg::Probed(result) => {
                state.probe_in_flight = false;
                match result {
                    Ok(version) => {
                        if state.observed.reachable == Some(false) {
                            info!("instance reachable again");
                        }
                        state.probe_failures = 0;
                        state.observed.reachable = Some(true);
                        state.observed.kubernetes_version = Some(version);
                        state.observed.message = None;
                    }
                    Err(e) => {
                        state.probe_failures += 1;
                        let confirmed =
                            state.probe_failures >= state.ctx.settings.unreachable_after;
                        if confirmed {
                            if state.observed.reachable != Some(false) {
                                warn!(error = %e, "instance unreachable");
                            }
                            state.observed.reachable = Some(false);
                            state.observed.message = Some(e.clone());
                        }
                        state.last_error = Some(e);
                        if confirmed {
                            // Reported at once, not on the next tick.
                            if state.ctx.leadership.is_leader() {
                                sync_status(&myself, state);
                            }
                        } else {
                            // Confirmed or cleared by the next probe, sent now.
                            probe(&myself, state);
                        }
                    }
                }
            }
            InstanceMsg::StatusWritten(StatusWrite {
                result,
                resource_version,
            }) => {
                state.write_in_flight = false;
                if resource_version.is_some() {
                    state.resource_version = resource_version;
                }
                match result {
                    Ok(written) => {
                        state.last_written = Some(*written);
                        state.last_write_at = Some(Instant::now());
                    }
                    Err(e) => {
                        warn!(error = %e, "writing Instance status failed");
                        state.last_error = Some(e);
                    }
                }
            }
            InstanceMsg::Registered(result) => match result {
                Ok(()) => state.registered = true,
                Err(e) => {
                    warn!(error = %e, "registration failed; retrying on the next tick");
                    state.registered = false;
                    state.last_error = Some(e.to_string());
                }
            },
            InstanceMsg::View(reply) => {
                let _ = reply.send(state.view());
            }
            InstanceMsg::Panic => {
                panic!("chaos: panic injected into instance actor {}", state.name)
            }
        }
        state.publish(&myself);
        Ok(())
    }
}

fn tick(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    if let Some(caches) = &state.caches {
        if state.observed.synced {
            let inputs = stats_inputs(caches);
            if state.stats_inputs.as_ref() != Some(&inputs) {
                state.observed.stats = Some(compute_stats(caches, inputs.counts));
                state.stats_inputs = Some(inputs);
            }
        }
    }
    state.ticks_since_probe += 1;
    let answering = state.probe_failures == 0 && state.observed.reachable == Some(true);
    if !answering || state.ticks_since_probe >= state.ctx.settings.probe_every_ticks {
        probe(myself, state);
    }
    if !state.ctx.leadership.is_leader() {
        state.registered = false;
        return;
    }
    if !state.registered && state.observed.connected {
        let (ctx, instance, endpoint, me) = (
            state.ctx.clone(),
            state.instance.clone(),
            state.observed.endpoint.clone(),
            myself.clone(),
        );
        state.registered = true; // one attempt in flight; the reply may clear it
        tokio::spawn(async move {
            let r = registration::ensure(&ctx, &instance, endpoint).await;
            if r.is_err() {
                let _ = me.send_message(InstanceMsg::Registered(r));
            }
        });
    }
    sync_status(myself, state);
}

/// Asks the instance for its version, unless a probe is in flight.
fn probe(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    let (Some(client), false) = (&state.client, state.probe_in_flight) else {
        return;
    };
    state.probe_in_flight = true;
    state.ticks_since_probe = 0;
    let (client, me, timeout) = (
        client.clone(),
        myself.clone(),
        state.ctx.settings.probe_timeout,
    );
    tokio::spawn(async move {
        let result = match tokio::time::timeout(timeout, client.apiserver_version()).await {
            Ok(Ok(v)) => Ok(v.git_version),
            Ok(Err(e)) => Err(format!("probe failed: {e}")),
            Err(_) => Err(format!("probe timed out after {timeout:?}")),
        };
        let _ = me.send_message(InstanceMsg::Probed(result));
    });
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
    let patch = Patch::Merge(json!({"metadata": {"resourceVersion": rv}, "status": next}));
    let params = PatchParams::default();
    let call = api.patch_status(name, &params, &patch);
    let fail = |e: String| StatusWrite {
        result: Err(e),
        resource_version: None,
    };
    match ctx
        .leadership
        .fenced(ctx.settings.request_timeout, call)
        .await
    {
        Ok(Ok(written)) => {
            Counters::bump(&ctx.counters.status_writes);
            StatusWrite {
                result: Ok(Box::new(next)),
                resource_version: written.metadata.resource_version,
            }
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 409 => {
            let fresh = tokio::time::timeout(ctx.settings.request_timeout, api.get_opt(name))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
            StatusWrite {
                result: Err(
                    "status write conflicted; retrying with a fresh resourceVersion".into(),
                ),
                resource_version: fresh.and_then(|i| i.metadata.resource_version),
            }
        }
        Ok(Err(e)) => fail(format!("patching status: {e}")),
        Err(e) => fail(format!("patching status: {e}")),
    }
}

fn stats_inputs(caches: &Caches) -> StatsInputs {
    let clusters = caches
        .store(Kind::Cluster)
        .map(|s| s.state())
        .unwrap_or_default();
    StatsInputs {
        clusters: clusters
            .iter()
            .map(|c| c.metadata.resource_version.clone())
            .collect(),
        counts: stats::Counts {
            propagation_policies: caches.count(Kind::PropagationPolicy),
            override_policies: caches.count(Kind::OverridePolicy),
            cluster_propagation_policies: caches.count(Kind::ClusterPropagationPolicy),
            cluster_override_policies: caches.count(Kind::ClusterOverridePolicy),
            resource_bindings: caches.count(Kind::ResourceBinding),
            workloads: Kind::WORKLOADS.iter().map(|k| caches.count(*k)).sum(),
            namespaces: caches.count(Kind::Namespace),
        },
    }
}

fn compute_stats(caches: &Caches, counts: stats::Counts) -> crate::crd::InstanceStats {
    let clusters = caches
        .store(Kind::Cluster)
        .map(|s| s.state())
        .unwrap_or_default();
    let values: Vec<&serde_json::Value> = clusters.iter().map(|c| &c.data).collect();
    stats::aggregate(&values, counts)
}

/// Writes status when it changed, or to refresh lastSyncTime; one write at a time.
fn sync_status(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
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
    if !status::changed(state.last_written.as_ref(), &next) && !stale {
        state.unchanged_since = Some(state.observed.clone());
        return;
    }
    state.unchanged_since = None;
    state.write_in_flight = true;
    let (ctx, name, me) = (state.ctx.clone(), state.name.clone(), myself.clone());
    let rv = state.resource_version.clone();
    tokio::spawn(async move {
        let written = write_status(&ctx, &name, next, rv).await;
        let _ = me.send_message(InstanceMsg::StatusWritten(written));
    });
}
