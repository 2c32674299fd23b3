//! Leader election on a `coordination.k8s.io/v1` Lease, as kube-controller-manager does:
//! claim when free or expired, renew while held, and stop acting as leader once renewal
//! has failed for `renew_deadline` (shorter than the lease), so no two leaders write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::{error, info, warn};

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    /// Holder identity: the pod name in a cluster, host name plus pid otherwise.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// Written on the Lease with each claim and renewal (a shard Lease carries its
    /// replica's address for peers).
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl LeaderConfig {
    /// kube-controller-manager's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            annotations: Default::default(),
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    /// When the last successful renewal was sent (not answered): another replica can
    /// count the lease from no earlier than that.
    last_renew: Option<Instant>,
    holder: Option<String>,
    renew_time: Option<String>,
    elector_restarts: u32,
    elector_error: Option<String>,
    /// When the elector's current run began (at spawn, then at each restart), and whether
    /// it is waiting out its back-off now.
    elector_since: Option<Instant>,
    elector_backing_off: bool,
    /// Chaos: the elector panics at its next round (never set in a product build).
    #[cfg(feature = "testbed")]
    panic_next: bool,
}

/// The Lease holder identity of this process: the replica's name (its pod) and a suffix
/// fresh for each process, as kube-controller-manager's `<host>_<uuid>`, so a container
/// restarted in the same pod is a new candidate and never inherits its predecessor's
/// lease while that lease may still be counted on.
pub fn process_identity(replica: &str) -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    // Without randomness the pid still tells processes of one host apart.
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        b = std::process::id().to_be_bytes();
    }
    let suffix: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{replica}_{suffix}")
}

/// The replica a holder identity names (`process_identity` undone).
pub fn replica_of(holder: &str) -> &str {
    holder
        .rsplit_once('_')
        .map_or(holder, |(replica, _)| replica)
}

/// What the rest of the tree asks: am I the leader right now, and who is?
#[derive(Clone)]
pub struct Leadership {
    identity: String,
    renew_deadline: Duration,
    lease_duration: Duration,
    shared: Arc<Mutex<Shared>>,
    changes: watch::Receiver<bool>,
    /// Keeps the channel open when no elector owns it (`always`).
    _fixed: Option<Arc<watch::Sender<bool>>>,
    /// Bounds leader-only writes in flight to the host: 1,000 instance actors writing at
    /// once opened thousands of pooled connections, on the host the Lease renewal uses.
    writes: Arc<tokio::sync::Semaphore>,
}

/// Leader-only writes to the host in flight at once, as client-go's default QPS/burst
/// bound a controller's writes.
const WRITES_IN_FLIGHT: usize = 32;

impl Leadership {
    /// True only while the last successful renewal is within the renew deadline, checked
    /// at call time, so a stuck elector can never leave a stale "leader" behind.
    pub fn is_leader(&self) -> bool {
        *self.changes.borrow()
            && self
                .shared
                .lock()
                .last_renew
                .is_some_and(|t| t.elapsed() < self.renew_deadline)
    }

    /// How long a leader-only write may still take and land safely: until the lease this
    /// replica last renewed could be claimed by another (the lease duration from when that
    /// renewal was sent, less a tenth for clock-rate drift). `None` when not leading.
    pub fn fence(&self) -> Option<Duration> {
        if !self.is_leader() {
            return None;
        }
        let since = self.shared.lock().last_renew?.elapsed();
        let safe = self.lease_duration.saturating_sub(self.lease_duration / 10);
        safe.checked_sub(since).filter(|d| !d.is_zero())
    }

    /// Runs one leader-only write, fenced: refused unless this replica leads now, and
    /// abandoned once it can no longer land within the lease (see [`Self::fence`]) or after
    /// `limit`, whichever comes first. Writes also carry resourceVersion preconditions, so
    /// a request that reaches the server late (after a new leader wrote) is refused there.
    pub async fn fenced<T>(
        &self,
        limit: Duration,
        write: impl std::future::Future<Output = T>,
    ) -> Result<T, Fenced> {
        let window = self.fence().ok_or(Fenced::NotLeader)?;
        let bound = window.min(limit);
        // The wait for a turn counts against the fence too.
        tokio::time::timeout(bound, async {
            let _turn = self.writes.acquire().await;
            write.await
        })
        .await
        .map_err(|_| Fenced::TimedOut(bound))
    }

    /// How often the elector failed and was restarted, and its last failure.
    pub fn elector_health(&self) -> (u32, Option<String>) {
        let s = self.shared.lock();
        (s.elector_restarts, s.elector_error.clone())
    }

    /// How long the elector's current run has lasted, and whether it is waiting out its
    /// back-off after a failure.
    pub fn elector_run(&self) -> (Duration, bool) {
        let s = self.shared.lock();
        let up = s.elector_since.map(|t| t.elapsed()).unwrap_or_default();
        (up, s.elector_backing_off)
    }

    /// Whether an elector runs (not a fixed `always`/`never`).
    pub fn has_elector(&self) -> bool {
        self._fixed.is_none()
    }

    /// Chaos: make the elector panic at its next round (it is restarted).
    #[cfg(feature = "testbed")]
    pub fn inject_elector_panic(&self) {
        self.shared.lock().panic_next = true;
    }

    /// Resolves whenever leadership flips.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.changes.clone()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The holder last seen on the Lease and its renew time.
    pub fn holder(&self) -> (Option<String>, Option<String>) {
        let s = self.shared.lock();
        (s.holder.clone(), s.renew_time.clone())
    }

    /// Never leader: an apiserver-only replica keeps caches for reads and writes nothing.
    pub fn never(identity: &str) -> Self {
        let (tx, rx) = watch::channel(false);
        Self {
            identity: identity.into(),
            renew_deadline: Duration::ZERO,
            lease_duration: Duration::ZERO,
            shared: Arc::new(Mutex::new(Shared::default())),
            changes: rx,
            _fixed: Some(Arc::new(tx)),
            writes: Arc::new(tokio::sync::Semaphore::new(WRITES_IN_FLIGHT)),
        }
    }

    /// Always leader: for single-replica runs without election.
    pub fn always(identity: &str) -> Self {
        let (tx, rx) = watch::channel(true);
        let shared = Shared {
            last_renew: Some(Instant::now()),
            holder: Some(identity.into()),
            ..Default::default()
        };
        Self {
            identity: identity.into(),
            renew_deadline: Duration::MAX,
            lease_duration: Duration::MAX,
            shared: Arc::new(Mutex::new(shared)),
            changes: rx,
            _fixed: Some(Arc::new(tx)),
            writes: Arc::new(tokio::sync::Semaphore::new(WRITES_IN_FLIGHT)),
        }
    }
}

/// Why a leader-only write did not run to the end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error("not the leader")]
    NotLeader,
    #[error("leader-only write abandoned after {0:?} (its lease could have passed on)")]
    TimedOut(Duration),
}

/// The elector task's handle: stop it to release the lease.
pub struct Elector {
    pub leadership: Leadership,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Elector {
    /// Stops without releasing anything, as a crashed process would.
    pub fn abort(self) {
        self.task.abort();
    }

    /// Releases the lease (so a successor need not wait a full lease) and stops.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

enum Outcome {
    Leading,
    Following,
}

pub fn spawn(client: kube::Client, config: LeaderConfig) -> Elector {
    let (tx, rx) = watch::channel(false);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let shared = Arc::new(Mutex::new(Shared {
        elector_since: Some(Instant::now()),
        ..Shared::default()
    }));
    let leadership = Leadership {
        identity: config.identity.clone(),
        renew_deadline: config.renew_deadline,
        lease_duration: config.lease_duration,
        shared: shared.clone(),
        changes: rx,
        _fixed: None,
        writes: Arc::new(tokio::sync::Semaphore::new(WRITES_IN_FLIGHT)),
    };
    let api: Api<Lease> = Api::namespaced(client, &config.namespace);
    // The elector is supervised: a panic in a round is caught, counted and reported, and
    // the elector restarts with back-off, not leading meanwhile (nothing renews).
    let task = tokio::spawn(async move {
        let mut failures = 0u32;
        loop {
            let round =
                std::panic::AssertUnwindSafe(elect(&api, &config, &shared, &tx, &mut stop_rx))
                    .catch_unwind()
                    .await;
            let Err(panic) = round else { break };
            failures += 1;
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panicked".into());
            error!(lease = %config.name, error = %why, restarts = failures, "leader elector failed; restarting it");
            {
                let mut s = shared.lock();
                s.last_renew = None;
                s.elector_restarts = failures;
                s.elector_error = Some(why);
                s.elector_backing_off = true;
                s.elector_since = Some(Instant::now());
            }
            if *tx.borrow() {
                tx.send_replace(false);
            }
            let delay = super::backoff::doubling(
                Duration::from_millis(250),
                Duration::from_secs(10),
                failures.saturating_add(1),
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop_rx.changed() => break,
            }
            {
                let mut s = shared.lock();
                s.elector_backing_off = false;
                s.elector_since = Some(Instant::now());
            }
        }
        if *tx.borrow() {
            tx.send_replace(false);
            shared.lock().last_renew = None;
            release(&api, &config).await;
        }
    });
    Elector {
        leadership,
        stop: stop_tx,
        task,
    }
}

/// Rounds of acquire-or-renew until told to stop.
async fn elect(
    api: &Api<Lease>,
    config: &LeaderConfig,
    shared: &Mutex<Shared>,
    tx: &watch::Sender<bool>,
    stop_rx: &mut watch::Receiver<bool>,
) {
    loop {
        #[cfg(feature = "testbed")]
        if std::mem::take(&mut shared.lock().panic_next) {
            panic!("chaos: the leader elector was told to panic");
        }
        let sent = Instant::now();
        // A renewal may take until the renew deadline, as client-go's: a slow host (a
        // read and a write that take seconds) must not cost the lease while it still
        // answers. Fencing needs no bound here: it counts from `sent`.
        let budget = shared
            .lock()
            .last_renew
            .map_or(Duration::ZERO, |t| {
                config.renew_deadline.saturating_sub(t.elapsed())
            })
            .max(config.retry_period.max(Duration::from_secs(1)));
        let attempt = tokio::time::timeout(budget, try_acquire_or_renew(api, config, shared)).await;
        let leading_now = match attempt {
            Ok(Ok(Outcome::Leading)) => {
                shared.lock().last_renew = Some(sent);
                true
            }
            Ok(Ok(Outcome::Following)) => false,
            Ok(Err(e)) => {
                warn!(lease = %config.name, error = %e, "lease renewal failed");
                shared
                    .lock()
                    .last_renew
                    .is_some_and(|t| t.elapsed() < config.renew_deadline)
                    && *tx.borrow()
            }
            Err(_) => {
                warn!(lease = %config.name, "lease renewal timed out");
                shared
                    .lock()
                    .last_renew
                    .is_some_and(|t| t.elapsed() < config.renew_deadline)
                    && *tx.borrow()
            }
        };
        if leading_now != *tx.borrow() {
            info!(lease = %config.name, identity = %config.identity, leader = leading_now, "leadership changed");
            if !leading_now {
                shared.lock().last_renew = None;
            }
            tx.send_replace(leading_now);
        }
        let jitter = Duration::from_millis(rand_jitter_ms(config.retry_period));
        tokio::select! {
            _ = tokio::time::sleep(config.retry_period + jitter) => {}
            _ = stop_rx.changed() => return,
        }
    }
}

/// Up to a fifth of the retry period, so replicas do not retry in lockstep.
fn rand_jitter_ms(period: Duration) -> u64 {
    let max = (period.as_millis() / 5).max(1) as u64;
    u64::from(std::process::id()).wrapping_mul(2654435761) % max
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderConfig,
    shared: &Mutex<Shared>,
) -> Result<Outcome, kube::Error> {
    let duration_secs = i32::try_from(config.lease_duration.as_secs()).unwrap_or(15);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                annotations: (!config.annotations.is_empty()).then(|| config.annotations.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(now_micro()),
                renew_time: Some(now_micro()),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => {
                note_holder(shared, &lease);
                Ok(Outcome::Leading)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Following),
            Err(e) => Err(e),
        };
    };
    note_holder(shared, &lease);
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
        (Some(MicroTime(t)), Some(d)) => {
            jiff::Timestamp::now().as_second() > t.as_second() + i64::from(d)
        }
        _ => true,
    };
    if holder != config.identity && !holder.is_empty() && !expired {
        return Ok(Outcome::Following);
    }
    if holder != config.identity {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now_micro());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.renew_time = Some(now_micro());
    spec.lease_duration_seconds = Some(duration_secs);
    if !config.annotations.is_empty() {
        lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(config.annotations.clone());
    }
    // The resourceVersion from our read guards the write: a racing claim gets 409.
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(written) => {
            note_holder(shared, &written);
            Ok(Outcome::Leading)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Following),
        Err(e) => Err(e),
    }
}

fn note_holder(shared: &Mutex<Shared>, lease: &Lease) {
    let spec = lease.spec.as_ref();
    let mut s = shared.lock();
    s.holder = spec
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty());
    s.renew_time = spec
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0.to_string());
}

async fn release(api: &Api<Lease>, config: &LeaderConfig) {
    let Ok(Some(mut lease)) = api.get_opt(&config.name).await else {
        return;
    };
    let Some(spec) = lease.spec.as_mut() else {
        return;
    };
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => info!(lease = %config.name, "lease released"),
        Err(e) => {
            warn!(lease = %config.name, error = %e, "releasing the lease failed; a successor waits for it to expire")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fenced_writes_need_leadership_and_a_bound() {
        let never = Leadership::never("x");
        assert_eq!(never.fence(), None);
        assert_eq!(
            never.fenced(Duration::from_secs(1), async { 1 }).await,
            Err(Fenced::NotLeader)
        );
        let always = Leadership::always("x");
        assert_eq!(
            always.fenced(Duration::from_secs(1), async { 1 }).await,
            Ok(1)
        );
        let slow = always
            .fenced(Duration::from_millis(10), std::future::pending::<()>())
            .await;
        assert_eq!(slow, Err(Fenced::TimedOut(Duration::from_millis(10))));
    }
}
