//! `/metrics` in the Prometheus text format. Instance gauges are computed at scrape time
//! from the API's caches and the actor tree; request metrics are recorded as requests
//! finish. Names follow controller-runtime where they fit (`leader_election_master_status`)
//! and `kairship_*` otherwise; instances are labelled `karmada_instance`, since Prometheus
//! sets `instance` itself.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

mod usage;

use crate::actors::tree::TreeHandle;
use crate::cache::caches::Kind;
use crate::crd::Instance;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    karmada_instance: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    karmada_instance: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    karmada_instance: String,
    karmada_version: String,
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CountLabels {
    karmada_instance: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    karmada_instance: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CertificateLabels {
    karmada_instance: String,
    certificate: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RolloutPhaseLabels {
    rollout: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RolloutStepLabels {
    rollout: String,
    step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaderLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    surface: String,
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    surface: String,
    method: String,
}

pub struct Metrics {
    registry: Registry,
    phase: Family<PhaseLabels, Gauge>,
    info: Family<InfoLabels, Gauge>,
    clusters: Family<CountLabels, Gauge>,
    nodes: Family<CountLabels, Gauge>,
    cached: Family<KindLabels, Gauge>,
    restarts: Family<InstanceLabels, Gauge>,
    watch_restarts: Family<InstanceLabels, Gauge>,
    certificates: Family<CertificateLabels, Gauge>,
    backup_completed: Family<InstanceLabels, Gauge>,
    backup_interval: Family<InstanceLabels, Gauge>,
    backup_failing: Family<InstanceLabels, Gauge>,
    leader: Family<LeaderLabels, Gauge>,
    rollout_phase: Family<RolloutPhaseLabels, Gauge>,
    rollout_instances: Family<RolloutStepLabels, Gauge>,
    status_writes: Counter,
    heap_allocated: Gauge,
    heap_free: Gauge,
    /// The tree's count at the last scrape: the counter grows by the difference.
    status_writes_seen: std::sync::atomic::AtomicU64,
    requests: Family<RequestLabels, Counter>,
    latency: Family<DurationLabels, Histogram>,
    usage: usage::Usage,
}

const PHASES: [&str; 7] = [
    "Pending",
    "Provisioning",
    "Upgrading",
    "Running",
    "Degraded",
    "Unreachable",
    "Terminating",
];

const ROLLOUT_PHASES: [&str; 7] = [
    "Planned",
    "Blocked",
    "Progressing",
    "Paused",
    "Halted",
    "Aborted",
    "Completed",
];

const ROLLOUT_STEPS: [&str; 7] = [
    "Pending",
    "BackingUp",
    "Upgrading",
    "Soaking",
    "Done",
    "Failed",
    "RolledBack",
];

impl Metrics {
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::default();
        let phase = Family::<PhaseLabels, Gauge>::default();
        let info = Family::<InfoLabels, Gauge>::default();
        let clusters = Family::<CountLabels, Gauge>::default();
        let nodes = Family::<CountLabels, Gauge>::default();
        let cached = Family::<KindLabels, Gauge>::default();
        let restarts = Family::<InstanceLabels, Gauge>::default();
        let watch_restarts = Family::<InstanceLabels, Gauge>::default();
        let leader = Family::<LeaderLabels, Gauge>::default();
        let certificates = Family::<CertificateLabels, Gauge>::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<DurationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "kairship_instance_phase",
            "1 for the phase each instance is in",
            phase.clone(),
        );
        registry.register(
            "kairship_instance_info",
            "1 for each instance, with the Karmada release it runs and its InstanceClass",
            info.clone(),
        );
        registry.register(
            "kairship_instance_clusters",
            "Member clusters per instance by state (ready, total)",
            clusters.clone(),
        );
        registry.register(
            "kairship_instance_nodes",
            "Nodes per instance by state (ready, total)",
            nodes.clone(),
        );
        registry.register(
            "kairship_instance_cached_objects",
            "Objects in each instance cache by kind",
            cached.clone(),
        );
        registry.register(
            "kairship_actor_restarts",
            "Restarts of each instance actor since it was created",
            restarts.clone(),
        );
        registry.register(
            "kairship_instance_watch_restarts",
            "Cache watches that failed and were resumed or relisted, since the instance actor started",
            watch_restarts.clone(),
        );
        registry.register(
            "kairship_instance_certificate_expiry_seconds",
            "Seconds until each certificate an instance is reached with expires (negative once expired)",
            certificates.clone(),
        );
        let backup_completed = Family::<InstanceLabels, Gauge>::default();
        registry.register(
            "kairship_backup_last_completed_timestamp_seconds",
            "When the newest completed backup of each instance with scheduled backups completed (Unix seconds)",
            backup_completed.clone(),
        );
        let backup_interval = Family::<InstanceLabels, Gauge>::default();
        registry.register(
            "kairship_backup_interval_seconds",
            "Seconds between scheduled backups of each instance that has a schedule",
            backup_interval.clone(),
        );
        let backup_failing = Family::<InstanceLabels, Gauge>::default();
        registry.register(
            "kairship_backup_failing",
            "1 while an instance's scheduled backups fail (its BackupsHealthy condition is False)",
            backup_failing.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 when this replica holds the lease",
            leader.clone(),
        );
        let rollout_phase = Family::<RolloutPhaseLabels, Gauge>::default();
        registry.register(
            "kairship_rollout_phase",
            "1 for the phase each FleetRollout is in",
            rollout_phase.clone(),
        );
        let rollout_instances = Family::<RolloutStepLabels, Gauge>::default();
        registry.register(
            "kairship_rollout_instances",
            "Instances of each FleetRollout by their step",
            rollout_instances.clone(),
        );
        let status_writes = Counter::default();
        registry.register(
            "kairship_instance_status_writes",
            "Instance status writes the host accepted from this replica (only its leader writes)",
            status_writes.clone(),
        );
        let (heap_allocated, heap_free) = (Gauge::default(), Gauge::default());
        registry.register(
            "kairship_heap_allocated_bytes",
            "Bytes the C allocator has handed out and not had back, by its own count",
            heap_allocated.clone(),
        );
        registry.register(
            "kairship_heap_free_bytes",
            "Bytes freed but kept by the C allocator: resident memory above what is allocated",
            heap_free.clone(),
        );
        registry.register(
            "kairship_api_requests",
            "API requests by surface, method and status code",
            requests.clone(),
        );
        registry.register(
            "kairship_api_request_duration_seconds",
            "API request latency by surface and method",
            latency.clone(),
        );
        let usage = usage::Usage::default();
        usage.register(&mut registry);
        Arc::new(Self {
            registry,
            phase,
            info,
            clusters,
            nodes,
            cached,
            restarts,
            watch_restarts,
            certificates,
            backup_completed,
            backup_interval,
            backup_failing,
            leader,
            rollout_phase,
            rollout_instances,
            status_writes,
            heap_allocated,
            heap_free,
            status_writes_seen: Default::default(),
            requests,
            latency,
            usage,
        })
    }

    pub fn observe(&self, surface: &str, method: &str, code: &str, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                surface: surface.into(),
                method: method.into(),
                code: code.into(),
            })
            .inc();
        self.latency
            .get_or_create(&DurationLabels {
                surface: surface.into(),
                method: method.into(),
            })
            .observe(took.as_secs_f64());
    }

    /// The FleetRollout gauges, from the host's rollouts as watched.
    fn rollouts(&self, tree: &TreeHandle) {
        self.rollout_phase.clear();
        self.rollout_instances.clear();
        for r in tree.rollouts().store().state() {
            let rollout = r.metadata.name.clone().unwrap_or_default();
            let status = r.status.clone().unwrap_or_default();
            let phase = match status.phase.as_str() {
                "" => "Planned",
                p => p,
            };
            for p in ROLLOUT_PHASES {
                self.rollout_phase
                    .get_or_create(&RolloutPhaseLabels {
                        rollout: rollout.clone(),
                        phase: p.into(),
                    })
                    .set(i64::from(p == phase));
            }
            for step in ROLLOUT_STEPS {
                let n = status.instances.values().filter(|e| e.step == step).count();
                self.rollout_instances
                    .get_or_create(&RolloutStepLabels {
                        rollout: rollout.clone(),
                        step: step.into(),
                    })
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
    }

    /// Refreshes the instance gauges from `instances` (the host's Instance objects) and the
    /// tree, and renders everything.
    pub async fn render(&self, tree: &TreeHandle, instances: &[Arc<Instance>]) -> String {
        for f in [&self.clusters, &self.nodes] {
            f.clear();
        }
        self.phase.clear();
        self.info.clear();
        self.cached.clear();
        self.restarts.clear();
        self.watch_restarts.clear();
        self.certificates.clear();
        for f in [
            &self.backup_completed,
            &self.backup_interval,
            &self.backup_failing,
        ] {
            f.clear();
        }
        let now = jiff::Timestamp::now().as_second();
        for inst in instances {
            let name = inst.metadata.name.clone().unwrap_or_default();
            let status = inst.status.clone().unwrap_or_default();
            let current = format!("{:?}", status.phase);
            for p in PHASES {
                self.phase
                    .get_or_create(&PhaseLabels {
                        karmada_instance: name.clone(),
                        phase: p.into(),
                    })
                    .set(i64::from(p == current));
            }
            self.info
                .get_or_create(&InfoLabels {
                    karmada_instance: name.clone(),
                    karmada_version: status.karmada_version.clone().unwrap_or_default(),
                    class: inst.spec.class_name.clone().unwrap_or_default(),
                })
                .set(1);
            for c in &status.certificates {
                if let Ok(at) = c.not_after.parse::<jiff::Timestamp>() {
                    self.certificates
                        .get_or_create(&CertificateLabels {
                            karmada_instance: name.clone(),
                            certificate: c.name.clone(),
                        })
                        .set(at.as_second() - now);
                }
            }
            if let Some(schedule) = &inst.spec.backup_schedule {
                let labels = InstanceLabels {
                    karmada_instance: name.clone(),
                };
                self.backup_interval
                    .get_or_create(&labels)
                    .set(i64::from(schedule.interval_minutes) * 60);
                let failing = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == crate::status::BACKUPS_CONDITION && c.status == "False");
                self.backup_failing
                    .get_or_create(&labels)
                    .set(i64::from(failing));
                // Never completed: 0, so a backup too old fires for it as well.
                let completed = status
                    .last_backup
                    .as_ref()
                    .and_then(|b| b.completed.parse::<jiff::Timestamp>().ok())
                    .map_or(0, |t| t.as_second());
                self.backup_completed.get_or_create(&labels).set(completed);
            }
            if let Some(s) = &status.stats {
                let count = |f: &Family<CountLabels, Gauge>, state: &str, v: i64| {
                    f.get_or_create(&CountLabels {
                        karmada_instance: name.clone(),
                        state: state.into(),
                    })
                    .set(v)
                };
                count(&self.clusters, "ready", s.clusters_ready);
                count(&self.clusters, "total", s.clusters_total);
                count(&self.nodes, "ready", s.nodes_ready);
                count(&self.nodes, "total", s.nodes_total);
            }
            if let Some(reader) = tree.reader(&name) {
                {
                    let restarts = reader.watch_restarts();
                    self.watch_restarts
                        .get_or_create(&InstanceLabels {
                            karmada_instance: name.clone(),
                        })
                        .set(i64::try_from(restarts).unwrap_or(i64::MAX));
                    for kind in Kind::ALL {
                        let n = reader.store(kind).map_or(0, |s| s.len());
                        self.cached
                            .get_or_create(&KindLabels {
                                karmada_instance: name.clone(),
                                kind: kind.resource().kind,
                            })
                            .set(i64::try_from(n).unwrap_or(i64::MAX));
                    }
                }
            }
        }
        let readers: Vec<(String, Arc<crate::cache::InstanceReader>)> = instances
            .iter()
            .filter_map(|i| {
                let name = i.metadata.name.clone()?;
                Some((name.clone(), tree.reader(&name)?))
            })
            .collect();
        self.usage.render(
            readers.iter().map(|(n, r)| (n.as_str(), &**r)),
            instances
                .iter()
                .filter_map(|i| Some((i.metadata.name.as_deref()?, i.status.as_ref()?))),
        );
        if let Ok(actors) = tree.actors().await {
            for a in actors {
                if let Some(i) = a.instance {
                    self.restarts
                        .get_or_create(&InstanceLabels {
                            karmada_instance: i,
                        })
                        .set(i64::from(a.restart_count));
                }
            }
        }
        self.rollouts(tree);
        self.leader
            .get_or_create(&LeaderLabels {
                name: "kairship-controller-manager".into(),
            })
            .set(i64::from(tree.leadership().is_leader()));
        let writes = tree
            .counters()
            .status_writes
            .load(std::sync::atomic::Ordering::Relaxed);
        let seen = self
            .status_writes_seen
            .swap(writes, std::sync::atomic::Ordering::Relaxed);
        self.status_writes.inc_by(writes.saturating_sub(seen));
        if let Some(heap) = kairship_heap::stats() {
            let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            self.heap_allocated.set(n(heap.allocated));
            self.heap_free.set(n(heap.free));
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            tracing::warn!("encoding metrics failed");
        }
        out
    }
}
