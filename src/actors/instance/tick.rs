//! What one tick of an instance actor does: its stats (recomputed only when an input
//! changed), probes, the caches' budget, failing watches and components, and, on the leader, the
//! per-instance controllers (roles on the members, registration, Clusterpedia,
//! certificates) and the status write.

use ractor::ActorRef;

use super::caches::{Caches, Kind};
use super::lifecycle::Event;
use super::status_sync::sync_status;
use super::{
    certificates, clusterpedia, components, member_access, registration, renewal, spawn_here, stats,
};
use super::{InstanceMsg, InstanceState};

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
                .or_else(|| state.components.failing.clone());
            state.on(Event::Faults(failing));
        }
    }
    if state
        .probes
        .due(answering, state.ctx.settings.probe_every_ticks)
    {
        probe(myself, state);
    }
    let operator = state
        .certificates
        .inputs
        .as_ref()
        .and_then(|i| i.operator.clone());
    if let (Some(scope), true) = (
        operator,
        answering
            && state
                .components
                .due(state.ctx.settings.component_check_every),
    ) {
        let timeout = state.ctx.settings.host_call_timeout;
        let host = state.ctx.host.clone();
        components::start(myself, host, scope, timeout, &mut state.components);
    }
    if !state.ctx.leadership.is_leader() {
        state.registered = false;
        state.member_access = None;
        return;
    }
    let wanted = member_access::wanted(&state.instance);
    if state.member_access != Some(wanted) && state.observed.lifecycle.connected() {
        if let Some(client) = state.client.clone() {
            let (timeout, me) = (state.ctx.settings.instance_call_timeout, myself.clone());
            state.member_access = Some(wanted); // one attempt in flight; a failure clears it
            state.member_access_task = Some(spawn_here(async move {
                if let Err(e) = member_access::ensure(&client, wanted, timeout).await {
                    let _ = me.send_message(InstanceMsg::MemberAccessFailed(e));
                }
            }));
        }
    }
    if !state.registered && state.observed.lifecycle.connected() {
        let (ctx, instance, endpoint, me) = (
            state.ctx.clone(),
            state.instance.clone(),
            state.observed.endpoint.clone(),
            myself.clone(),
        );
        state.registered = true; // one attempt in flight; the reply may clear it
        spawn_here(async move {
            let r = registration::ensure(&ctx, &instance, endpoint).await;
            if r.is_err() {
                let _ = me.send_message(InstanceMsg::Registered(r));
            }
        });
    }
    register_with_clusterpedia(myself, state);
    let every = match renewal::recently_renewed(&state.instance, jiff::Timestamp::now()) {
        true => renewal::RECHECK_EVERY.min(state.ctx.settings.certificate_check_every),
        false => state.ctx.settings.certificate_check_every,
    };
    if state.certificates.due(every) {
        certificates::start(myself, state.ctx.host.clone(), &mut state.certificates);
    }
    renew_before_expiry(myself, state);
    back_up_on_schedule(myself, state);
    sync_status(myself, state);
}

/// Starts the instance's scheduled backup when it is due (leader only, with Kairship's
/// own credentials, one check at a time).
fn back_up_on_schedule(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    // The latest Instance: a schedule change does not restart the actor.
    let latest = state
        .ctx
        .instances
        .store()
        .get(&kube::runtime::reflector::ObjectRef::new(&state.name));
    let schedule = latest.and_then(|i| i.spec.backup_schedule.clone());
    if schedule.is_none() {
        state.observed.backups = None;
    }
    let (Some(schedule), Some(client), true) = (
        schedule,
        state.client.clone(),
        state.observed.lifecycle.connected(),
    ) else {
        return;
    };
    let settings = &state.ctx.settings;
    let req = crate::backups::take::Request {
        instance: state.name.clone(),
        karmada_version: state.observed.karmada_version.clone().unwrap_or_default(),
        requested_by: crate::backups::schedule::REQUESTED_BY.into(),
        scheduled: true,
        keep: Some(schedule.keep()),
    };
    let check = state.backups.check(
        settings.backup_check_every,
        settings.backup_store(&state.ctx.host),
        client,
        schedule,
        req,
        settings.instance_call_timeout,
    );
    if let Some(check) = check {
        let me = myself.clone();
        state.backup_check = Some(spawn_here(async move {
            let _ = me.send_message(InstanceMsg::Backups(check.await));
        }));
    }
}

/// Makes the PediaCluster what it should be, at most every `clusterpedia_every` (a third
/// of it until Clusterpedia reports the instance Ready) and one attempt at a time, once
/// the instance is connected (its kubeconfig is known to work).
fn register_with_clusterpedia(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    let (Some(namespace), Some(source), Some(client)) = (
        state.ctx.settings.clusterpedia.clone(),
        state.kubeconfig_source.clone(),
        state.client.clone(),
    ) else {
        return;
    };
    let every = match &state.observed.clusterpedia {
        Some(r) if r.ready == Some(true) => state.ctx.settings.clusterpedia_every,
        _ => state.ctx.settings.clusterpedia_every / 3,
    };
    if !state.clusterpedia_round.due(every) || !state.observed.lifecycle.connected() {
        return;
    }
    state.clusterpedia_round = clusterpedia::Round::InFlight;
    let (ctx, instance, me) = (state.ctx.clone(), state.instance.clone(), myself.clone());
    spawn_here(async move {
        let r = clusterpedia::ensure(&ctx, &instance, &source, &client, &namespace).await;
        let _ = me.send_message(InstanceMsg::Clusterpedia(r));
    });
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

/// Renews a managed instance's leaf certificates once the first is within
/// `--certificate-auto-renew-days` of expiry (leader only, one attempt at a time).
fn renew_before_expiry(myself: &ActorRef<InstanceMsg>, state: &mut InstanceState) {
    let settings = &state.ctx.settings;
    let (Some(window), Some((ns, _))) = (
        settings.certificate_auto_renew,
        state
            .certificates
            .inputs
            .as_ref()
            .and_then(|i| i.operator.clone()),
    ) else {
        return;
    };
    let now = jiff::Timestamp::now();
    if !state.renewal.allows(state.certificates.last)
        || !renewal::due(&state.observed.certificates, &state.name, window, now)
    {
        return;
    }
    state.renewal.in_flight = true;
    let (host, name, timeout, me) = (
        state.ctx.host.clone(),
        state.name.clone(),
        settings.host_call_timeout,
        myself.clone(),
    );
    tracing::info!("a leaf certificate expires within {window:?}: renewing");
    spawn_here(async move {
        let r = renewal::renew(&host, &ns, &name, timeout)
            .await
            .map_err(|e| e.to_string());
        let _ = me.send_message(InstanceMsg::Renewed(r));
    });
}
