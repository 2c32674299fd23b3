//! Sharding: each instance is owned by exactly one live replica, which alone runs its
//! actor (connection, caches, status writes, controllers). Replicas hold one Lease each
//! (`members`), the owner of an instance is chosen by rendezvous hashing over the live ones
//! (`ring`), and an instance changes hands release-then-acquire through a record on the
//! Instance (`handoff`). On by default for `kairship run --role all`; with
//! `--shards=false` every replica holds every instance.

pub mod handoff;
pub mod machine;
pub mod members;
pub mod ring;
#[cfg(test)]
mod simulation;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::runtime::{watcher, WatchStreamExt};
use parking_lot::RwLock;
use tokio::sync::watch;
use tracing::{info, warn};

use super::leader::{self, Elector, LeaderConfig, Leadership};
use members::{Liveness, Seen};

/// Where the shard Leases live and their timings (the leader Lease's by default).
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub namespace: String,
    /// Lease names are `<prefix>-<replica>`.
    pub prefix: String,
    /// This replica's stable name (its pod's): what the ring hashes and the record names.
    pub replica: String,
    /// This process's holder identity on its Lease.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Where peers reach this replica's API (`https://<pod IP>:<port>`), published on its
    /// Lease; `None` for a replica that serves no API.
    pub address: Option<String>,
}

/// The annotation on a shard Lease naming where peers reach its replica.
pub const ADDRESS_ANNOTATION: &str = "kairship.io/address";

/// A peer's address as peers may dial it: `https://host:port` and nothing more, since
/// callers' credentials go there (an `http://` address from a Lease, which whoever may
/// write Leases in Kairship's namespace can set, would send them in clear).
pub fn peer_address(raw: &str) -> Result<String, String> {
    // (Checked again where a peer is dialled: `api::forward`.)
    let uri: http::Uri = raw.parse().map_err(|e| format!("not a URL ({e})"))?;
    if uri.scheme_str() != Some("https") {
        return Err("peers are reached over https only".into());
    }
    let authority = uri
        .authority()
        .ok_or_else(|| "it names no host".to_string())?;
    if authority.as_str().contains('@') {
        return Err("it carries user information".into());
    }
    if authority.port_u16().is_none() {
        return Err("it names no port".into());
    }
    if uri
        .path_and_query()
        .is_some_and(|p| p.as_str() != "/" && !p.as_str().is_empty())
    {
        return Err("it has a path or query".into());
    }
    Ok(format!("https://{authority}"))
}

impl ShardConfig {
    pub fn new(namespace: &str, replica: &str, identity: &str) -> Self {
        let leader = LeaderConfig::new(namespace, "", identity);
        Self {
            namespace: namespace.into(),
            prefix: "kairship-shard".into(),
            replica: replica.into(),
            identity: identity.into(),
            lease_duration: leader.lease_duration,
            renew_deadline: leader.renew_deadline,
            retry_period: leader.retry_period,
            address: None,
        }
    }
}

/// What the tree asks: who is alive, who owns an instance, and this replica's own Lease,
/// which fences its writes.
#[derive(Clone)]
pub struct Shards {
    me: String,
    lease: Leadership,
    live: watch::Receiver<BTreeSet<String>>,
    /// Replicas whose Lease changed within a lease duration, live or released: their
    /// records stand until they clear them (`handoff::step`).
    holding: Arc<RwLock<BTreeSet<String>>>,
    /// The Leases were listed while this replica held its own, and it has held it since.
    listed_since_held: Arc<std::sync::atomic::AtomicBool>,
    /// Each live replica's published address.
    addresses: Arc<RwLock<HashMap<String, String>>>,
}

impl Shards {
    pub fn me(&self) -> &str {
        &self.me
    }

    /// This replica's Lease: its writes for the instances it owns are fenced by it.
    pub fn lease(&self) -> &Leadership {
        &self.lease
    }

    /// The live replicas; this one only while its Lease is held now.
    pub fn live(&self) -> BTreeSet<String> {
        let mut live = self.live.borrow().clone();
        if !self.lease.is_leader() {
            live.remove(&self.me);
        }
        live
    }

    /// The live replicas an instance's placement is decided on: as [`live`](Self::live),
    /// but this replica counts only once it has listed the Leases since it last gained
    /// its own. One that regains its Lease (a partition healed) may hold a listing from
    /// before replicas joined whose records it must not override.
    fn deciding(&self) -> BTreeSet<String> {
        let mut live = self.live();
        if !self
            .listed_since_held
            .load(std::sync::atomic::Ordering::Acquire)
        {
            live.remove(&self.me);
        }
        live
    }

    /// The replica the ring gives `instance` to.
    pub fn owner(&self, instance: &str) -> Option<String> {
        let live: Vec<String> = self.live().into_iter().collect();
        ring::owner(instance, &live).map(str::to_string)
    }

    /// Where `replica` said peers reach it (an `https://` address; others are dropped).
    pub fn address(&self, replica: &str) -> Option<String> {
        self.addresses.read().get(replica).cloned()
    }

    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<String>> {
        self.live.clone()
    }

    /// This replica's step for `i` now.
    pub fn step(&self, i: &crate::crd::Instance) -> handoff::Step {
        let name = i.metadata.name.as_deref().unwrap_or_default();
        let live = self.deciding();
        let live_list: Vec<&String> = live.iter().collect();
        handoff::step(
            &self.me,
            ring::owner(name, &live_list),
            handoff::recorded(i),
            &live,
            &self.holding.read(),
        )
    }
}

/// Whether a watched Lease event may change who is live (errors are retried by the
/// watcher with backoff; the listing goes on meanwhile).
fn joined_or_released(holders: &mut members::Holders, event: WatchResult) -> bool {
    let holder = |l: &Lease| l.spec.as_ref().and_then(|s| s.holder_identity.clone());
    let mut changed = |l: &Lease, holder: Option<String>| {
        holders.changed(
            l.metadata.name.as_deref().unwrap_or_default(),
            holder.as_deref(),
        )
    };
    match event {
        Ok(watcher::Event::Apply(l) | watcher::Event::InitApply(l)) => changed(&l, holder(&l)),
        Ok(watcher::Event::Delete(l)) => changed(&l, None),
        Ok(watcher::Event::Init | watcher::Event::InitDone) => false,
        Err(e) => {
            tracing::debug!(error = %e, "watching the shard Leases failed; listing goes on");
            false
        }
    }
}

type WatchResult = Result<watcher::Event<Lease>, watcher::Error>;

/// The running shard machinery: this replica's Lease and the watcher of everyone's.
pub struct Running {
    pub shards: Shards,
    /// `None` once released by `hand_over`.
    elector: Option<Elector>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops watching and releases this replica's Lease, so the others take its instances
    /// over at once instead of after a lease duration.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.task).await;
        self.release().await;
    }

    /// Releases this replica's Lease while everything else runs on: this replica drops
    /// out of the ring, hands its instances over (its manager stops their actors and
    /// clears their records) and forwards requests for them to their new owners. A
    /// replica that stops gracefully does this before it closes its listeners, so peers
    /// never forward to a closed port.
    pub async fn release(&mut self) {
        if let Some(e) = self.elector.take() {
            e.shutdown().await;
        }
    }

    /// As a crash: nothing released; the others wait out the Lease.
    pub fn abort(self) {
        self.task.abort();
        if let Some(e) = self.elector {
            e.abort();
        }
    }
}

pub fn spawn(host: kube::Client, cfg: ShardConfig) -> Running {
    let elector = leader::spawn(
        host.clone(),
        LeaderConfig {
            namespace: cfg.namespace.clone(),
            name: Liveness::lease_name(&cfg.prefix, &cfg.replica),
            identity: cfg.identity.clone(),
            lease_duration: cfg.lease_duration,
            renew_deadline: cfg.renew_deadline,
            retry_period: cfg.retry_period,
            annotations: cfg
                .address
                .iter()
                .map(|a| (ADDRESS_ANNOTATION.to_string(), a.clone()))
                .collect(),
        },
    );
    let (tx, rx) = watch::channel(BTreeSet::new());
    let (stop, mut stopped) = watch::channel(false);
    let lease = elector.leadership.clone();
    let addresses: Arc<RwLock<HashMap<String, String>>> = Default::default();
    let holding: Arc<RwLock<BTreeSet<String>>> = Default::default();
    let listed_since_held: Arc<std::sync::atomic::AtomicBool> = Default::default();
    let shards = Shards {
        me: cfg.replica.clone(),
        lease: lease.clone(),
        live: rx,
        holding: holding.clone(),
        listed_since_held: listed_since_held.clone(),
        addresses: addresses.clone(),
    };
    let task = tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(host, &cfg.namespace);
        let mut liveness = Liveness::new(&cfg.prefix, cfg.lease_duration);
        // Addresses refused already, so each is logged once.
        let mut refused = std::collections::HashSet::new();
        // Leases are listed every retry period (a dead replica is one whose Lease stops
        // changing, which no event says), and also at once when a watch shows a replica
        // join or release its Lease, so instances move without waiting for the next
        // listing while requests for them wait.
        let mut holders = members::Holders::new(&cfg.prefix);
        let mut own = lease.subscribe();
        let mut own_gone = false;
        let mut events = std::pin::pin!(watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .fuse());
        loop {
            let listed = tokio::time::timeout(
                cfg.retry_period.max(Duration::from_secs(1)),
                api.list(&ListParams::default()),
            )
            .await;
            match listed {
                Ok(Ok(list)) => {
                    let seen: Vec<Seen> = list
                        .items
                        .iter()
                        .map(|l| Seen {
                            name: l.metadata.name.clone().unwrap_or_default(),
                            holder: l.spec.as_ref().and_then(|s| s.holder_identity.clone()),
                            renew_time: l
                                .spec
                                .as_ref()
                                .and_then(|s| s.renew_time.as_ref())
                                .map(|t| t.0.to_string()),
                        })
                        .collect();
                    let now = tokio::time::Instant::now();
                    let mut live = liveness.observe(now, &seen);
                    // A released Lease that lapsed frees the records it still held: the
                    // manager decides again for them although no one joined or left.
                    let recent = liveness.recent(now);
                    let lapsed = *holding.read() != recent;
                    *holding.write() = recent;
                    *addresses.write() = list
                        .items
                        .iter()
                        .filter_map(|l| {
                            let replica = l
                                .metadata
                                .name
                                .as_deref()?
                                .strip_prefix(&format!("{}-", cfg.prefix))?;
                            let address =
                                l.metadata.annotations.as_ref()?.get(ADDRESS_ANNOTATION)?;
                            match peer_address(address) {
                                Ok(a) => Some((replica.to_string(), a)),
                                Err(why) => {
                                    // Never dialled: a caller's token would go in clear.
                                    if refused.insert(address.clone()) {
                                        warn!(replica, address = %address, "a peer's address is refused: {why}");
                                    }
                                    None
                                }
                            }
                        })
                        .collect();
                    let held = lease.is_leader();
                    if !held {
                        live.remove(&cfg.replica);
                    }
                    // Gained since the last listing: the manager decides again on this one.
                    let before = listed_since_held.swap(held, std::sync::atomic::Ordering::AcqRel);
                    let gained = held && !before;
                    if *tx.borrow() != live {
                        info!(replicas = ?live, "live replicas changed");
                        tx.send_replace(live);
                    } else if lapsed || gained {
                        tx.send_replace(live);
                    }
                }
                // An unanswered listing ages nobody: peers are not declared dead for
                // what may be this replica's own trouble (its Lease fences it meanwhile).
                Ok(Err(e)) => warn!(error = %e, "listing the shard Leases failed"),
                Err(_) => warn!("listing the shard Leases timed out"),
            }
            let next = tokio::time::Instant::now() + cfg.retry_period;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => break,
                    _ = stopped.changed() => return,
                    // Lost or gained: this replica owns nothing until it has listed again
                    // while holding its Lease, which it does at once.
                    c = own.changed(), if !own_gone => {
                        own_gone = c.is_err();
                        listed_since_held.store(false, std::sync::atomic::Ordering::Release);
                        break;
                    }
                    Some(event) = events.next() => {
                        if joined_or_released(&mut holders, event) {
                            break;
                        }
                    }
                }
            }
        }
    });
    Running {
        shards,
        elector: Some(elector),
        stop,
        task,
    }
}
