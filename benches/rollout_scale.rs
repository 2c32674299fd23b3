//! A fleet rollout at scale (issue 55): 500 managed simulated instances moved to a new
//! release in 10 waves. Prints the time to plan it (PlanRollout over gRPC), the time to
//! roll it to Completed, what it adds per instance (the rollout's own status, CPU of both
//! processes during the roll), and the API's latency for other callers
//! (a cached gRPC GetInstance and a proxied LIST on an external instance) measured with no
//! rollout and then during it, side by side in one run. Figures only; asserts nothing
//! about speed. `kairship sim` and `kairship run` each run in their own process, as
//! `fleet_scale`'s do. Run: `cargo bench --bench rollout_scale` (INSTANCES=n, WAVES=n).

use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;
use std::path::Path;

use common::procs::{free_port, kairship, settle_process, usage, Proc, ServingFiles, SimFleet};
use kairship::crd::InstanceMode as Mode;
use kairship::crd::{FleetRollout, Instance, Phase};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::rollout_service_client::RolloutServiceClient;
use kairship::proto::{
    CreateInstanceRequest, GetInstanceRequest, InstanceMode, InstanceSpec, ObjectMeta,
    PlanRolloutRequest, RolloutOptions, RolloutSpec, StartRolloutRequest,
};
const NS: &str = "kairship-system";
use tonic::transport::Channel;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    match sorted.len() {
        0 => Duration::ZERO,
        n => sorted[((n as f64 - 1.0) * p).round() as usize],
    }
}

/// External instances Running.
async fn external_running(api: &kube::Api<Instance>) -> usize {
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|i| i.spec.mode == Mode::External)
                .filter(|i| i.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
                .count()
        })
        .unwrap_or(0)
}

/// Instances Running at `version`.
async fn at(api: &kube::Api<Instance>, version: &str) -> usize {
    api.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|i| {
                    i.status.as_ref().is_some_and(|s| {
                        s.phase == Phase::Running && s.karmada_version.as_deref() == Some(version)
                    })
                })
                .count()
        })
        .unwrap_or(0)
}

/// Other callers for `within`: a cached gRPC read and a proxied LIST, one after the
/// other; the latency of each, sorted, and the failures.
async fn callers(
    channel: Channel,
    proxy: kube::Client,
    within: Duration,
) -> (Vec<Duration>, Vec<Duration>, usize) {
    let mut c = InstanceServiceClient::new(channel);
    let (mut grpc, mut listed, mut failed) = (Vec::new(), Vec::new(), 0);
    let end = Instant::now() + within;
    while Instant::now() < end {
        let t = Instant::now();
        let got = c
            .get_instance(GetInstanceRequest {
                name: "karmada-1".into(),
            })
            .await;
        grpc.push(t.elapsed());
        failed += usize::from(got.is_err());
        let t = Instant::now();
        let path = "/apis/kairship.io/v1alpha1/instances/karmada-2/proxy/api/v1/namespaces";
        let (code, _) = kairship_test_support::http::send(&proxy, "GET", path, None).await;
        listed.push(t.elapsed());
        failed += usize::from(code != 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    grpc.sort();
    listed.sort();
    (grpc, listed, failed)
}

fn line(what: &str, grpc: &[Duration], listed: &[Duration], failed: usize) {
    println!(
        "  {what:<16} GetInstance p50 {:>8.2?} p99 {:>8.2?} | proxied LIST p50 {:>8.2?} p99 {:>8.2?} | {} calls, {failed} failed",
        percentile(grpc, 0.5),
        percentile(grpc, 0.99),
        percentile(listed, 0.5),
        percentile(listed, 0.99),
        grpc.len() + listed.len()
    );
}

/// `kairship run` (both roles, one replica) against the simulator's host: gRPC in plain
/// text on loopback, HTTPS with a generated certificate, every caller an anonymous
/// admin (the handler chain still runs).
struct Kairship {
    proc: Proc,
    channel: Channel,
    proxy: kube::Client,
}

async fn kairship_run(dir: &Path, host_kubeconfig: &Path) -> Kairship {
    let files = ServingFiles::write(dir, "unused");
    let (grpc, https) = (free_port(), free_port());
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let args: Vec<String> = [
        "run",
        "--kubeconfig",
        &path(host_kubeconfig),
        "--namespace",
        NS,
        "--leader-elect-namespace",
        NS,
        "--insecure-disable-auth",
        "--grpc-insecure",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(files.listen_args(grpc, https, free_port()))
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let log = dir.join("run.log");
    let proc = kairship(&args, &log);
    let endpoint = Channel::from_shared(format!("http://127.0.0.1:{grpc}")).expect("endpoint");
    let t = Instant::now();
    let channel = loop {
        match endpoint.connect().await {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "kairship run did not serve gRPC in a minute ({e}); see {}",
                    log.display()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let kc = kairship_wire::kubeconfig::build(
        "bench",
        &format!("https://127.0.0.1:{https}"),
        &files.ca_pem,
        "unused",
    );
    let kc_path = dir.join("bench.kubeconfig");
    kairship_wire::kubeconfig::write(&kc_path, &kc).expect("kubeconfig");
    let proxy = kairship_test_support::fleet::client_from(&kc_path).await;
    Kairship {
        proc,
        channel,
        proxy,
    }
}

/// CPU ticks (10 ms) both processes have used so far.
fn ticks(pids: [u32; 2]) -> u64 {
    pids.iter().map(|&p| usage(p).1).sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = env_or("INSTANCES", 500);
    let waves = env_or("WAVES", 10).max(1);
    println!("fleet rollout at scale: {n} managed simulated instances, {waves} waves, 2-core machine; `kairship sim` and `kairship run` each in its own process (this one only calls)");
    let dir = tempfile::tempdir().expect("tempdir");
    // Two External instances for the other callers, attached with Kairship's roles.
    let fleet = SimFleet::start(dir.path(), 2, 2, 0).await;
    let kairship = kairship_run(dir.path(), &fleet.host_kubeconfig()).await;
    let pids = [kairship.proc.0.id(), fleet.proc.0.id()];
    let instances: kube::Api<Instance> = kube::Api::all(fleet.host.clone());
    let t = Instant::now();
    while external_running(&instances).await < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the two External instances are not Running"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (channel, proxy) = (kairship.channel.clone(), kairship.proxy.clone());

    let t = Instant::now();
    let c = InstanceServiceClient::new(channel.clone());
    for i in 0..n {
        let instance = kairship::proto::Instance {
            metadata: Some(ObjectMeta {
                name: format!("team-{i:04}"),
                labels: [("rollout".to_string(), "bench".to_string())].into(),
                ..Default::default()
            }),
            spec: Some(InstanceSpec {
                mode: InstanceMode::Managed as i32,
                managed_namespace: NS.into(),
                karmada_version: "v1.12.0".into(),
                ..Default::default()
            }),
            status: None,
        };
        c.clone()
            .create_instance(CreateInstanceRequest {
                instance: Some(instance),
            })
            .await
            .expect("created");
    }
    // Every instance Running, or after 10 minutes those that are (the others named, and
    // left out of the rollout by its plan).
    let running = loop {
        let r = at(&instances, "v1.12.0").await;
        if r == n || t.elapsed() > Duration::from_secs(600) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!(
        "{n} managed instances created, {running} Running at v1.12.0 after {:.1?}",
        t.elapsed()
    );
    if running < n {
        let list = instances
            .list(&Default::default())
            .await
            .expect("instances");
        let behind: Vec<String> = list
            .items
            .iter()
            .filter(|i| i.spec.mode == Mode::Managed)
            .filter_map(|i| {
                let s = i.status.clone().unwrap_or_default();
                (s.phase != Phase::Running).then(|| {
                    let why = s
                        .conditions
                        .iter()
                        .find(|c| c.type_ == "Ready")
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    format!(
                        "{} {:?} ({why})",
                        i.metadata.name.clone().unwrap_or_default(),
                        s.phase
                    )
                })
            })
            .collect();
        println!("  not Running (left out by the plan, the rollout forced): {behind:?}");
    }
    settle_process(pids[0]).await;

    let step = 100 / waves as u32;
    let spec = RolloutSpec {
        karmada_version: "v1.13.0".into(),
        match_labels: [("rollout".to_string(), "bench".to_string())].into(),
        canary: 0,
        percentages: (1..=waves as u32)
            .map(|k| if k == waves as u32 { 100 } else { k * step })
            .collect(),
        ..Default::default()
    };
    let mut r = RolloutServiceClient::new(channel.clone());
    let mut plans = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let plan = r
            .plan_rollout(PlanRolloutRequest {
                spec: Some(spec.clone()),
            })
            .await
            .expect("a plan")
            .into_inner();
        plans.push(t.elapsed());
        assert_eq!(plan.waves.len(), waves, "{waves} waves planned");
    }
    plans.sort();
    println!(
        "plan of {n} instances in {waves} waves (PlanRollout over gRPC): p50 {:.1?}, max {:.1?} over 5",
        percentile(&plans, 0.5),
        percentile(&plans, 1.0)
    );

    println!("other callers' latency, 20 s each:");
    let (g, l, f) = callers(channel.clone(), proxy.clone(), Duration::from_secs(20)).await;
    line("no rollout", &g, &l, f);

    let rss_before = usage(pids[0]).0;
    let cpu_before = ticks(pids);
    let t = Instant::now();
    r.start_rollout(StartRolloutRequest {
        name: "bench".into(),
        spec: Some(spec),
        options: Some(RolloutOptions {
            max_unavailable: (n / waves).max(1) as u32,
            soak_seconds: 5,
            progress_deadline_seconds: 600,
            force: running < n,
            ..Default::default()
        }),
    })
    .await
    .expect("started");
    let load = tokio::spawn(callers(
        channel.clone(),
        proxy.clone(),
        Duration::from_secs(20),
    ));
    let rollouts: kube::Api<FleetRollout> = kube::Api::all(fleet.host.clone());
    let done = loop {
        let got = rollouts.get("bench").await.ok();
        let status = got
            .as_ref()
            .and_then(|r| r.status.clone())
            .unwrap_or_default();
        match status.phase.as_str() {
            "Completed" => break got,
            "Halted" | "Blocked" => panic!("the rollout stopped: {}", status.reason),
            _ => {}
        }
        assert!(
            t.elapsed() < Duration::from_secs(1800),
            "not Completed in 30 min"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let took = t.elapsed();
    let cpu = Duration::from_millis(ticks(pids).saturating_sub(cpu_before) * 10);
    let (g, l, f) = load.await.expect("callers");
    line("during rollout", &g, &l, f);
    println!(
        "rolled {running} instances in {waves} waves (each backed up, changed, 5 s soak) in {took:.1?}: {:.0} ms of wall time per instance",
        took.as_secs_f64() * 1000.0 / running as f64
    );
    let bytes = done
        .and_then(|r| serde_json::to_vec(&r).ok())
        .map_or(0, |b| b.len());
    println!(
        "added cost per instance: {:.0} B of the FleetRollout's status, {:.1} ms of CPU (kairship run and the simulator with its operator double and backups), kairship run resident {:+} KiB over the roll",
        bytes as f64 / running as f64,
        cpu.as_secs_f64() * 1000.0 / running as f64,
        (usage(pids[0]).0 as i64 - rss_before as i64) / running.max(1) as i64
    );
}
