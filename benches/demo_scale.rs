//! `kairship demo --instances 1000` as a user starts it: how long until its endpoints are
//! written and until every instance is Running, and its resident memory (the simulated
//! fleet and Kairship in one process). Then the same fleet split in two processes, a
//! `kairship sim` and a `kairship run`, so the simulator's and Kairship's memory per
//! instance print apart. Figures only; nothing about speed is asserted.
//! Run: `cargo bench --bench demo_scale` (INSTANCES=n, CLUSTERS=n to change).

use std::path::Path;
use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;
use common::procs::{
    free_port, kairship, settle_process, usage, wait_for, Proc, ServingFiles, SimFleet,
};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn running(host: &kube::Client) -> usize {
    kairship::bootstrap::running_instances(host)
        .await
        .map(|c| c.0)
        .unwrap_or(0)
}

async fn until_running(
    host: &kube::Client,
    n: usize,
    since: Instant,
    log: &Path,
    proc: &mut Proc,
) -> Duration {
    loop {
        if running(host).await == n {
            return since.elapsed();
        }
        if let Ok(Some(status)) = proc.0.try_wait() {
            let said = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = said.lines().rev().take(5).collect();
            panic!("it exited ({status}) before {n} instances were Running: {tail:?}");
        }
        assert!(
            since.elapsed() < Duration::from_secs(600),
            "{n} instances not all Running after 600 s; see {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = env_or("INSTANCES", 1000);
    let clusters: usize = env_or("CLUSTERS", 3);
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("demo");
    let log = dir.path().join("demo.log");
    let (count, members) = (n.to_string(), clusters.to_string());
    let start = Instant::now();
    let mut demo = kairship(
        &[
            "demo",
            "--instances",
            &count,
            "--clusters",
            &members,
            "--state-dir",
            state.to_str().expect("utf-8 path"),
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--probes-addr",
            "127.0.0.1:0",
        ],
        &log,
    );
    wait_for(
        &mut demo,
        &log,
        &state.join("endpoints.json"),
        "the demo's endpoints.json",
        Duration::from_secs(300),
    )
    .await;
    let endpoints_after = start.elapsed();
    let endpoints: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("endpoints.json")).expect("endpoints.json"),
    )
    .expect("endpoints.json parses");
    let host_kubeconfig = endpoints["host_kubeconfig"]
        .as_str()
        .expect("endpoints.json names the host kubeconfig");
    let host = common::client(Path::new(host_kubeconfig)).await;
    let running_after = until_running(&host, n, start, &log, &mut demo).await;
    settle_process(demo.0.id()).await;
    let (demo_rss, _, _) = usage(demo.0.id());
    drop(demo);

    let per = |kib: u64| kib as f64 / n as f64;
    println!(
        "kairship demo --instances {n} --clusters {clusters} (one process), then the same fleet as kairship sim + kairship run (two processes); members' status moving every 5 s"
    );
    println!(
        "  demo: endpoints.json after {:.1} s, all {n} Running after {:.1} s (goal: 60 s); {:.0} MiB resident, {:.0} KiB per instance",
        endpoints_after.as_secs_f64(),
        running_after.as_secs_f64(),
        mib(demo_rss),
        per(demo_rss)
    );

    // The same fleet in two processes, for each side's memory.
    let split = dir.path().join("split");
    std::fs::create_dir_all(&split).expect("split dir");
    let fleet = SimFleet::start(&split, n, clusters, 5).await;
    let run_log = split.join("run.log");
    let host_kubeconfig = fleet.host_kubeconfig();
    let split_start = Instant::now();
    // As a user runs it: TLS and token auth (the apiserver serves HTTPS only).
    let files = ServingFiles::write(&split, "demo-scale-token");
    let args: Vec<String> = [
        "run",
        "--kubeconfig",
        host_kubeconfig.to_str().expect("utf-8 path"),
        "--token-auth-file",
        files.tokens.to_str().expect("utf-8 path"),
        "--shards=false",
        "--leader-elect-namespace",
        "kairship-system",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(files.listen_args(free_port(), free_port(), free_port()))
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = kairship(&args, &run_log);
    let split_running = until_running(&fleet.host, n, split_start, &run_log, &mut run).await;
    settle_process(run.0.id()).await;
    let (run_rss, _, _) = usage(run.0.id());
    let (sim_rss, _, _) = usage(fleet.proc.0.id());

    println!(
        "  split: all Running {:.1} s after kairship run started; Kairship {:.0} MiB ({:.0} KiB per instance), the simulator {:.0} MiB ({:.0} KiB per instance)",
        split_running.as_secs_f64(),
        mib(run_rss),
        per(run_rss),
        mib(sim_rss),
        per(sim_rss)
    );
}
