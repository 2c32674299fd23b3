//! One experiment from start to report: wait for a healthy fleet, steady load, a
//! baseline, the fault, clearing it, recovery, then the ledger and the goals.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::info;

use super::faults::Injector;
use super::load::{Endpoints, Load, REQUEST_TIMEOUT};
use super::report::{ExperimentReport, Measured};
use super::spec::{Experiment, Profile};
use crate::proto;

/// The gRPC calls the runner itself makes (phases, actors, restarts), as the admin.
#[derive(Clone)]
pub struct Control {
    channel: tonic::transport::Channel,
    token: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
}

impl Control {
    pub fn new(endpoints: &Endpoints) -> Result<Self, String> {
        let channel = tonic::transport::Channel::from_shared(format!("http://{}", endpoints.grpc))
            .map_err(|e| e.to_string())?
            .connect_timeout(REQUEST_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .connect_lazy();
        let token = format!("Bearer {}", endpoints.admin_token)
            .parse()
            .map_err(|_| "the admin token is not a valid header".to_string())?;
        Ok(Self { channel, token })
    }

    fn req<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.metadata_mut().insert("authorization", self.token.clone());
        r
    }

    pub async fn phase(&self, name: &str) -> Option<String> {
        let mut c =
            proto::instance_service_client::InstanceServiceClient::new(self.channel.clone());
        let i = c
            .get_instance(self.req(proto::GetInstanceRequest { name: name.into() }))
            .await
            .ok()?
            .into_inner();
        i.status.map(|s| s.phase)
    }

    /// Restart counts of the instance actors, and the manager's.
    pub async fn restarts(&self) -> Option<(std::collections::BTreeMap<String, u32>, u32)> {
        let mut c =
            proto::supervisor_service_client::SupervisorServiceClient::new(self.channel.clone());
        let actors = c
            .list_actors(self.req(proto::ListActorsRequest::default()))
            .await
            .ok()?
            .into_inner()
            .actors;
        let manager = actors
            .iter()
            .find(|a| a.name == "instance-manager")
            .map_or(0, |a| u32::try_from(a.restart_count).unwrap_or(0));
        let per = actors
            .into_iter()
            .filter_map(|a| {
                let n = a.name.strip_prefix("instance/")?.to_string();
                Some((n, u32::try_from(a.restart_count).unwrap_or(0)))
            })
            .collect();
        Some((per, manager))
    }

    pub async fn restart(&self, name: &str) -> Result<(), String> {
        let mut c =
            proto::supervisor_service_client::SupervisorServiceClient::new(self.channel.clone());
        c.restart_instance(self.req(proto::RestartInstanceRequest { name: name.into() }))
            .await
            .map(|_| ())
            .map_err(|s| s.message().to_string())
    }

    /// Waits until every instance is Running; a Degraded one gets the SRE's restart.
    pub async fn settle(&self, names: &[String], within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let mut waiting = Vec::new();
            for n in names {
                match self.phase(n).await.as_deref() {
                    Some("Running") => {}
                    Some("Degraded") => {
                        let _ = self.restart(n).await;
                        waiting.push(format!("{n} (Degraded, restarted)"));
                    }
                    other => waiting.push(format!("{n} ({})", other.unwrap_or("no answer"))),
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not Running after {within:?}: {}",
                    waiting.join(", ")
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

pub async fn run_one(
    e: &Experiment,
    endpoints: &Endpoints,
    injector: &Injector,
    control: &Control,
    profile: Profile,
    run_id: &str,
) -> ExperimentReport {
    if let super::spec::Fault::Leader { signal } = &e.fault {
        return super::leader_failover::run(e, *signal, profile, run_id).await;
    }
    let timing = profile.timing();
    let mut report = ExperimentReport {
        name: e.name.clone(),
        description: e.description.clone(),
        victim: e.victim.clone(),
        ..Default::default()
    };
    if let Some(why) = injector.cannot_run(e) {
        report.skipped = Some(why);
        return report;
    }
    let names: Vec<String> = endpoints.instances.iter().map(|(n, _)| n.clone()).collect();
    if let Some(v) = &e.victim {
        if !names.contains(v) {
            report.skipped = Some(format!("the fleet has no instance {v:?}"));
            return report;
        }
    }
    if let Err(why) = control.settle(&names, Duration::from_secs(60)).await {
        report.skipped = Some(format!("the fleet is not healthy: {why}"));
        return report;
    }
    let run = format!("{run_id}-{}", e.name);
    let mut load = match Load::connect(endpoints, &run, timing.rate).await {
        Ok(l) => l,
        Err(why) => {
            report.skipped = Some(format!("load clients: {why}"));
            return report;
        }
    };
    let before = control.restarts().await.unwrap_or_default();
    load.start();
    let start = load.recorder.start;
    let ms = |i: Instant| u32::try_from(i.duration_since(start).as_millis()).unwrap_or(u32::MAX);
    let phases = Arc::new(Mutex::new(Vec::<(u32, String)>::new()));
    let sampler = e.victim.clone().map(|v| {
        let (control, phases) = (control.clone(), phases.clone());
        tokio::spawn(async move {
            loop {
                if let Some(p) = control.phase(&v).await {
                    let t = u32::try_from(start.elapsed().as_millis()).unwrap_or(u32::MAX);
                    phases.lock().push((t, p));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    });
    tokio::time::sleep(timing.baseline).await;
    info!(experiment = %e.name, "fault on");
    let fault_start = Instant::now();
    let active = match injector.apply(e, &mut load).await {
        Ok(a) => a,
        Err(why) => {
            report.skipped = Some(format!("applying the fault: {why}"));
            return report;
        }
    };
    tokio::time::sleep(timing.fault).await;
    let fault_end = Instant::now();
    if let Err(why) = injector.clear(e, active, &mut load).await {
        report
            .errors
            .insert("fault".into(), vec![format!("clearing the fault: {why}")]);
    }
    info!(experiment = %e.name, "fault cleared");
    // Recovery: until the victim is Running again (bounded), and a few seconds at least.
    let recovered_by = fault_end + timing.recovery;
    tokio::time::sleep(Duration::from_secs(3)).await;
    if let Some(v) = &e.victim {
        while Instant::now() < recovered_by && control.phase(v).await.as_deref() != Some("Running")
        {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let end = Instant::now();
    if let Some(s) = sampler {
        s.abort();
    }
    let recorder = load.recorder.clone();
    load.end_burst();
    // Requests in flight finish (or time out) before the figures are taken; then the load
    // stops, so the ledger's reads do not queue behind it.
    tokio::time::sleep(REQUEST_TIMEOUT.min(Duration::from_secs(2))).await;
    load.stop();
    let ledger = load.check_ledger().await;
    drop(load);
    let after = control.restarts().await.unwrap_or_default();
    let victim_index = e
        .victim
        .as_ref()
        .and_then(|v| names.iter().position(|n| n == v))
        .and_then(|i| u16::try_from(i).ok());
    let samples: Vec<_> = recorder
        .samples()
        .into_iter()
        .filter(|s| s.t_ms <= ms(end))
        .collect();
    let phases = phases.lock().clone();
    let measured = Measured {
        samples: &samples,
        victim: victim_index,
        fault_ms: (ms(fault_start), ms(fault_end)),
        end_ms: ms(end),
        phases: &phases,
        expected_phase: e.expect.victim_phase.as_deref(),
    };
    report.healthy_watch_breaks = names
        .iter()
        .enumerate()
        .filter(|(i, _)| u16::try_from(*i).ok() != victim_index)
        .map(|(i, _)| recorder.watch_breaks[i].load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    for (acked, lost) in ledger.values() {
        report.writes_acknowledged += acked;
        report.writes_lost += lost.len();
    }
    let diff = |n: &String| {
        after
            .0
            .get(n)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.0.get(n).copied().unwrap_or(0))
    };
    report.healthy_actor_restarts = names
        .iter()
        .filter(|n| Some(*n) != e.victim.as_ref())
        .map(diff)
        .sum();
    report.victim_actor_restarts = e.victim.as_ref().map_or(0, diff);
    report.manager_restarts = after.1.saturating_sub(before.1);
    report.requests_shed = recorder.shed.load(std::sync::atomic::Ordering::Relaxed);
    for (k, v) in recorder.errors() {
        report.errors.entry(k).or_default().extend(v);
    }
    report.measure(&measured, &timing);
    report
}
