//! What every long-running part is handed (actors, controllers, the leader's passes, the
//! API): the host client, leadership, settings, the process's watches, the routes to each
//! instance's reader ([`routes`]), and Events on Kairship's objects ([`events`]).

pub mod events;
pub mod routes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::host::backoff::RestartPolicy;
use crate::host::leader::Leadership;

#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of `Karmada` objects for managed instances.
    pub managed_namespace: String,
    /// Registry, tags, version and CRD tarball for managed instances that do not say.
    pub managed_defaults: crate::crd::karmada_spec::Defaults,
    /// What an instance's caches may keep (an Instance's spec may set its own).
    pub cache_budget: crate::cache::budget::CacheBudget,
    /// What Kairship may touch on the host for an instance: kubeconfig Secrets' and
    /// managed control planes' namespaces, image registries, CRD tarball locations.
    pub scope: crate::host::scope::HostScope,
    /// How often an instance actor recomputes stats, probes and syncs status.
    pub tick: Duration,
    /// Upper bound on one reachability probe.
    pub probe_timeout: Duration,
    /// Consecutive failed probes before an instance is Unreachable.
    pub unreachable_after: u32,
    /// Ticks between probes of an instance that answers; after a failure it is probed
    /// again at once, and on every tick while it does not answer. Probes were most of an
    /// idle fleet's CPU (1,000 instances: 500 requests/s at one per tick).
    pub probe_every_ticks: u32,
    /// A cache's watch failing this long, while the instance answers probes, makes the
    /// instance Degraded (a Karmada CRD missing, a resource Kairship may not list). Longer
    /// than kube-runtime's watch backoff (at most 30 s), so a watch that recovers on its
    /// next retry never shows.
    pub degraded_after: Duration,
    /// Status is rewritten at least this often (refreshing lastSyncTime) and, on
    /// change, at most once per `tick`.
    pub status_refresh: Duration,
    /// Timeouts for every call to an instance's karmada-apiserver: connecting, and a
    /// request passed through or a write of the actors.
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// One call to an instance made for an API request: a write, or a read the caches
    /// cannot answer alone (an access review, a CRD's printer columns, member Nodes, Works).
    pub instance_call_timeout: Duration,
    /// One call to the host cluster made for an API request or a global-management event.
    pub host_call_timeout: Duration,
    pub restart: RestartPolicy,
    /// Clusterpedia's namespace, when each instance is registered with Clusterpedia.
    pub clusterpedia: Option<String>,
    /// How often the leader makes each instance's PediaCluster what it should be and reads
    /// what Clusterpedia reports of it, once Clusterpedia reports it Ready (three times as
    /// often until then): three reads of the host per instance each time, so at 1,000
    /// instances 50 reads a second at the default.
    pub clusterpedia_every: Duration,
    /// How long before an instance's first certificate expires its
    /// `CertificatesExpiring` condition turns True.
    pub certificate_warning: Duration,
    /// How often each replica reads a managed instance's component pods in the host (one
    /// list per instance): a crash-looping component shows within this.
    pub component_check_every: Duration,
    /// How often the leader reads each instance's certificates again while connected.
    pub certificate_check_every: Duration,
    /// The leader renews a managed instance's leaf certificates once the first expires
    /// within this (`None`: only on request).
    pub certificate_auto_renew: Option<Duration>,
    /// The host namespace whose Secrets hold backups.
    pub backup_namespace: String,
    /// A directory (a mounted PersistentVolume) that holds backups instead of Secrets.
    pub backup_dir: Option<std::path::PathBuf>,
    /// Compressed bytes all backups there may hold together.
    pub backup_max_bytes: u64,
    /// How often the leader checks whether an instance's scheduled backup is due.
    pub backup_check_every: Duration,
    /// The per-instance controllers switched off (`--controllers`): a plain set of names,
    /// so the settings need not know the controllers' table.
    pub controllers_off: std::collections::BTreeSet<String>,
    /// How often a controller that keeps something in place (registration, roles on the
    /// members) makes sure of it again, so what was changed by hand is put back.
    pub controller_resync: Duration,
    /// Shard the instances across replicas by Leases of their own (`None`: every replica
    /// runs every instance, as a single replica does).
    pub shards: Option<crate::host::shards::ShardConfig>,
    /// Where member clusters a caller names (join, remove) may be.
    pub member_networks: crate::member_networks::MemberNetworks,
    /// The plain probes port's `/metrics` shows series naming instances (it asks no token).
    pub probes_instance_series: bool,
    /// Prometheus, whose firing alerts halt fleet rollouts (`None`: alerts are not read).
    pub alerts_url: Option<String>,
    /// Instance actors of this replica that connect and fill their caches at once
    /// (`--instances-starting-at-once`).
    pub starting_at_once: usize,
    /// How long a request to a hibernated instance is held while it wakes
    /// (`--wake-timeout-secs`).
    pub wake_timeout: Duration,
}

impl Settings {
    /// The namespace of a managed instance's `Karmada` object: its own, else Kairship's.
    pub fn managed_namespace_of(&self, instance: &crate::crd::Instance) -> String {
        instance
            .spec
            .managed
            .as_ref()
            .and_then(|m| m.namespace.clone())
            .unwrap_or_else(|| self.managed_namespace.clone())
    }

    /// Where backups are kept, reached with `host`.
    pub fn backup_store(&self, host: &kube::Client) -> crate::backups::Store {
        match &self.backup_dir {
            Some(dir) => crate::backups::Store::directory(
                dir.clone(),
                self.backup_max_bytes,
                self.host_call_timeout,
            ),
            None => crate::backups::Store::secrets(
                host.clone(),
                self.backup_namespace.clone(),
                self.backup_max_bytes,
                self.host_call_timeout,
            ),
        }
    }
}

/// Instance actors of one replica that connect and fill their caches at once; the others
/// wait their turn. 2,000 actors of a replica starting together (a cold start, a replica
/// taking over a dead one's share) opened 2,000 TLS connections and 22,000 LISTs at once:
/// the listener's queue overflowed, host calls timed out behind them, and the retries
/// kept the fleet from ever reaching Running.
pub const STARTING_AT_ONCE: usize = 64;

impl Default for Settings {
    fn default() -> Self {
        Self {
            managed_namespace: "kairship-system".into(),
            managed_defaults: Default::default(),
            scope: Default::default(),
            cache_budget: Default::default(),
            tick: Duration::from_secs(2),
            probe_timeout: Duration::from_secs(3),
            unreachable_after: 2,
            probe_every_ticks: 2,
            degraded_after: Duration::from_secs(60),
            status_refresh: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            instance_call_timeout: Duration::from_secs(10),
            host_call_timeout: Duration::from_secs(10),
            restart: RestartPolicy::default(),
            clusterpedia: None,
            clusterpedia_every: Duration::from_secs(60),
            certificate_warning: Duration::from_secs(30 * 86_400),
            component_check_every: Duration::from_secs(30),
            certificate_check_every: Duration::from_secs(600),
            certificate_auto_renew: Some(Duration::from_secs(30 * 86_400)),
            backup_namespace: "kairship-system".into(),
            backup_dir: None,
            backup_max_bytes: 256 * 1024 * 1024,
            backup_check_every: Duration::from_secs(60),
            controllers_off: Default::default(),
            controller_resync: Duration::from_secs(300),
            shards: None,
            member_networks: Default::default(),
            probes_instance_series: false,
            alerts_url: None,
            starting_at_once: STARTING_AT_ONCE,
            wake_timeout: Duration::from_secs(120),
        }
    }
}

/// Counters the tests and metrics read.
#[derive(Debug, Default)]
pub struct Counters {
    pub status_writes: AtomicU64,
    pub registration_writes: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub struct Context {
    pub host: kube::Client,
    pub leadership: Leadership,
    pub settings: Arc<Settings>,
    pub counters: Arc<Counters>,
    /// Instance readers published for routing (see [`routes`]).
    pub routes: routes::Routes,
    /// The process's one watch of Instance objects (the manager's and the API's).
    pub instances: crate::host::instance_informer::InstanceInformer,
    /// This replica's share of the instances, when sharded.
    pub shards: Option<crate::host::shards::Shards>,
    /// The host's FleetRollouts (`host::rollouts`).
    pub rollouts: crate::host::rollouts::FleetRollouts,
    /// The host's InstanceClasses.
    pub classes: crate::host::watched::Watched<crate::crd::InstanceClass>,
    /// Which instances hold each member cluster, from the metadata of Kairship's
    /// ClusterProfiles in the host (`controllers::cluster_profiles`).
    pub cluster_profiles: crate::host::member_index::MemberIndex,
    /// Turns for instance actors connecting and filling their caches
    /// ([`Settings::starting_at_once`] at once).
    pub starts: Arc<tokio::sync::Semaphore>,
}
