//! What one tick of an instance actor does: its stats (recomputed only when an input
//! changed), probes, the caches' budget, failing watches and components, the per-instance
//! controllers (`crate::controllers`), and on the leader the status write.

use ractor::ActorRef;

use super::stats;
use super::status_sync::sync_status;
use super::{InstanceMsg, InstanceState};
use crate::cache::caches::{Caches, Kind};
use crate::controllers::Scope;
use crate::status::lifecycle::Event;

#[derive(PartialEq)]
pub(super) struct StatsInputs {
    clusters: Vec<Option<String>>,
    counts: stats::Counts,
}

pub(super) fn tick(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    let answering =
        state.probes.failures == 0 && state.observed.lifecycle.reachable() == Some(true);
    // Over its budget the instance's watches stop and its objects go; the instance is
    // Degraded below whether or not it answers (the budget is Kairship's own finding, not
    // the instance's health), and the API reads from the instance (the reader says so).
    let over_budget = state
        .caches
        .as_mut()
        .is_some_and(|caches| caches.stop_if_over_budget());
    if let Some(caches) = &state.caches {
        if state.observed.lifecycle.synced() {
            let inputs = stats_inputs(caches);
            if state.stats_inputs.as_ref() != Some(&inputs) {
                state.observed.stats = Some(compute_stats(caches, inputs.counts));
                state.stats_inputs = Some(inputs);
            }
        }
        // Only an answering instance is degraded by its watches; a silent one is the
        // probes' to report (unless it is over its budget).
        if answering || over_budget {
            // A failing watch first (reads are wrong), then a failing component.
            let failing = caches
                .failing_for(state.ctx.settings.degraded_after, state.answering_since)
                .or_else(|| state.observed.failing_component());
            state.on(Event::Faults(failing));
        }
    }
    if state
        .probes
        .due(answering, state.ctx.settings.probe_every_ticks)
    {
        probe(myself, state);
    }
    run_controllers(myself, state, answering);
    state.observed.last_request = state
        .traffic
        .last_request()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map(|t| t.to_string());
    if state.ctx.leadership.is_leader() {
        sync_status(myself, state);
    }
}

/// Gives each per-instance controller its look at the instance (`controllers::Runner`).
fn run_controllers(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState, answering: bool) {
    let scope = Scope {
        name: &state.name,
        instance: &state.instance,
        ctx: &state.ctx,
        client: state.client.as_ref(),
        connected: state.observed.lifecycle.connected(),
        answering,
        namespaces: state.caches.as_ref().and_then(|c| c.store(Kind::Namespace)),
        clusters: state.caches.as_ref().and_then(|c| c.store(Kind::Cluster)),
        kubeconfig_source: state.kubeconfig_source.as_ref(),
        certificate_inputs: state.certificate_inputs.as_ref(),
        traffic: &state.traffic,
        runs: &[],
        requeued: false,
    };
    let me = myself.clone();
    let report = move |done| drop(me.send_message(InstanceMsg::Reconciled(done)));
    let leader = state.ctx.leadership.is_leader();
    state
        .controllers
        .tick(scope, leader, &mut state.observed, report);
}

/// Asks the instance for its version, unless a probe is in flight.
pub(super) fn probe(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    if let Some(client) = &state.client {
        state
            .probes
            .send(client, myself, state.ctx.settings.probe_timeout);
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
            .map(|c| Some(c.resource_version().to_string()))
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
    // Clusters are few: decoded from their JSON at each recount.
    let decoded: Vec<serde_json::Value> = clusters
        .iter()
        .filter_map(|c| serde_json::from_slice(c.json()).ok())
        .collect();
    let values: Vec<&serde_json::Value> = decoded.iter().collect();
    stats::aggregate(&values, counts)
}
