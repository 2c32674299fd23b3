//! What each instance is used for and costs, as `/metrics` shows it: the requests
//! Kairship's proxy answered for it and when the last came (so idle instances can be
//! found), what a managed instance's control plane requests in the host, and its member
//! clusters' capacity.
//! Request counts are the replica's that runs the instance: they start from zero with its
//! actor, and Prometheus reads a counter that starts again as a reset.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::InstanceLabels;
use crate::cache::traffic::Counts;
use crate::cache::InstanceReader;
use crate::crd::InstanceStatus;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CapacityLabels {
    karmada_instance: String,
    /// cpu (cores), memory (bytes), pods.
    resource: String,
    /// allocatable or allocated.
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    karmada_instance: String,
    /// cpu (cores), memory (bytes), pods.
    resource: String,
}

#[derive(Default)]
pub(super) struct Usage {
    control_plane: Family<ResourceLabels, Gauge<f64, AtomicU64>>,
    requests: Family<InstanceLabels, Counter>,
    request_errors: Family<InstanceLabels, Counter>,
    last_request: Family<InstanceLabels, Gauge>,
    capacity: Family<CapacityLabels, Gauge<f64, AtomicU64>>,
    hibernated: Family<InstanceLabels, Gauge>,
    hibernated_seconds: Family<InstanceLabels, Gauge>,
    wakes: Family<InstanceLabels, Gauge>,
    /// Each instance's counts at the last scrape: the counters grow by the difference.
    seen: Mutex<HashMap<String, Counts>>,
}

impl Usage {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "kairship_instance_requests",
            "Requests Kairship's proxy answered for each instance, counted by the replica that runs it",
            self.requests.clone(),
        );
        registry.register(
            "kairship_instance_request_errors",
            "Of those, answered with a server error (5xx, Kairship's own 502/503/504 included)",
            self.request_errors.clone(),
        );
        registry.register(
            "kairship_instance_last_request_timestamp_seconds",
            "When Kairship's proxy last answered a request for each instance (absent: none since its actor started)",
            self.last_request.clone(),
        );
        registry.register(
            "kairship_instance_control_plane_requests",
            "What a managed instance's control plane pods request in the host, by resource (cpu in cores, memory in bytes, pods: how many)",
            self.control_plane.clone(),
        );
        registry.register(
            "kairship_instance_member_capacity",
            "The member clusters' capacity each instance schedules onto, by resource (cpu in cores, memory in bytes, pods) and state (allocatable, allocated)",
            self.capacity.clone(),
        );
        registry.register(
            "kairship_instance_hibernated",
            "1 while a managed instance's control plane is hibernating, hibernated or waking (its actor stopped), else 0",
            self.hibernated.clone(),
        );
        registry.register(
            "kairship_instance_hibernated_seconds",
            "Seconds an instance has spent hibernated in all, the current sleep included (times its control plane's requests: what hibernation saved)",
            self.hibernated_seconds.clone(),
        );
        registry.register(
            "kairship_instance_wakes",
            "Times an instance was woken from hibernation",
            self.wakes.clone(),
        );
    }

    /// Sets the series of every instance this replica runs (`readers`) and of every
    /// instance's status as the host shows it; series of instances gone are dropped.
    pub(super) fn render<'a>(
        &self,
        readers: impl Iterator<Item = (&'a str, &'a InstanceReader)>,
        statuses: impl Iterator<Item = (&'a str, &'a InstanceStatus)>,
    ) {
        self.last_request.clear();
        self.capacity.clear();
        self.control_plane.clear();
        self.hibernated.clear();
        self.hibernated_seconds.clear();
        self.wakes.clear();
        let mut seen = self.seen.lock();
        let mut here = BTreeSet::new();
        for (name, reader) in readers {
            here.insert(name.to_string());
            let labels = InstanceLabels {
                karmada_instance: name.to_string(),
            };
            let now = reader.traffic().counts();
            // Counts that went back belong to a new actor: all of them are new.
            let new = seen
                .get(name)
                .and_then(|base| now.since(*base))
                .unwrap_or(now);
            seen.insert(name.to_string(), now);
            self.requests.get_or_create(&labels).inc_by(new.requests);
            self.request_errors
                .get_or_create(&labels)
                .inc_by(new.failed);
            if let Some(at) = reader.traffic().last_request() {
                self.last_request.get_or_create(&labels).set(at);
            }
        }
        seen.retain(|name, _| {
            let keep = here.contains(name);
            if !keep {
                let labels = InstanceLabels {
                    karmada_instance: name.clone(),
                };
                self.requests.remove(&labels);
                self.request_errors.remove(&labels);
            }
            keep
        });
        let now = jiff::Timestamp::now();
        for (name, status) in statuses {
            // Every instance's (0 for one never hibernated), so a sum counts the fleet.
            {
                let h = status.hibernation.clone().unwrap_or_default();
                let labels = InstanceLabels {
                    karmada_instance: name.to_string(),
                };
                let asleep = h.state.asleep();
                // The current sleep counts from when it began; past ones were added at
                // each wake.
                let current = match h.state {
                    crate::crd::HibernationState::Hibernated => h
                        .since
                        .as_deref()
                        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                        .map_or(0, |t| now.duration_since(t).as_secs().max(0)),
                    _ => 0,
                };
                self.hibernated
                    .get_or_create(&labels)
                    .set(i64::from(asleep));
                self.hibernated_seconds
                    .get_or_create(&labels)
                    .set(h.hibernated_seconds + current);
                self.wakes.get_or_create(&labels).set(h.wakes);
            }
            if let Some(c) = &status.control_plane {
                for (resource, value) in [
                    ("cpu", units(&c.cpu_requests)),
                    ("memory", units(&c.memory_requests)),
                    ("pods", c.pods as f64),
                ] {
                    self.control_plane
                        .get_or_create(&ResourceLabels {
                            karmada_instance: name.to_string(),
                            resource: resource.into(),
                        })
                        .set(value);
                }
            }
            let Some(s) = &status.stats else {
                continue;
            };
            for (resource, state, q) in [
                ("cpu", "allocatable", &s.cpu_allocatable),
                ("cpu", "allocated", &s.cpu_allocated),
                ("memory", "allocatable", &s.memory_allocatable),
                ("memory", "allocated", &s.memory_allocated),
                ("pods", "allocatable", &s.pods_allocatable),
                ("pods", "allocated", &s.pods_allocated),
            ] {
                self.capacity
                    .get_or_create(&CapacityLabels {
                        karmada_instance: name.to_string(),
                        resource: resource.into(),
                        state: state.into(),
                    })
                    .set(units(q));
            }
        }
    }
}

/// A quantity in its unit (cores, bytes, pods); 0 when absent or not one.
fn units(q: &str) -> f64 {
    crate::quantity::parse(q).map_or(0.0, |m| m.0 as f64 / 1000.0)
}
