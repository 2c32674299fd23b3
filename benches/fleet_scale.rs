//! Kairship at fleet scale, each side in its own process: `kairship sim` serves N
//! instances x 5 member clusters, `kairship run` (all roles) attaches them all. For each
//! fleet size it prints the time until every instance is Running, Kairship's resident
//! memory (and per instance), its open sockets, and its CPU while idle for a minute after
//! settling, and the simulator's resident memory apart. Figures only; nothing about speed
//! is asserted.
//! Run: `cargo bench --bench fleet_scale` (SIZES=100,250, IDLE_SECS=n and
//! CLUSTER_TICK_SECS=n, members' status changing every n s, to change).

use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;
use common::procs::{kairship, usage, SimFleet};

const CLUSTERS: usize = 5;

struct Figures {
    n: usize,
    running_after: Duration,
    rss_mib: f64,
    sockets: usize,
    idle_cpu: f64,
    sim_rss_mib: f64,
}

async fn measure(n: usize, idle: Duration, tick: u64) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = SimFleet::start(dir.path(), n, CLUSTERS, tick).await;
    let host_kubeconfig = fleet.host_kubeconfig();
    let start = Instant::now();
    let log = dir.path().join("run.log");
    let run = kairship(
        &[
            "run",
            "--kubeconfig",
            host_kubeconfig.to_str().expect("utf-8 path"),
            "--role",
            "controller-manager",
            "--insecure-disable-auth",
            "--leader-elect-namespace",
            "kairship-system",
            "--probes-addr",
            "127.0.0.1:0",
        ],
        &log,
    );
    fleet
        .all_running(n, start, Duration::from_secs(600), &log)
        .await;
    let running_after = start.elapsed();
    // Settle: the first stats and status writes after Running.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = run.0.id();
    let (_, before, _) = usage(pid);
    let t = Instant::now();
    tokio::time::sleep(idle).await;
    let (rss, after, sockets) = usage(pid);
    let ticks_per_sec = 100.0; // USER_HZ on Linux
    let idle_cpu = (after - before) as f64 / ticks_per_sec / t.elapsed().as_secs_f64();
    let (sim_rss, _, _) = usage(fleet.proc.0.id());
    Figures {
        sim_rss_mib: sim_rss as f64 / 1024.0,
        n,
        running_after,
        rss_mib: rss as f64 / 1024.0,
        sockets,
        idle_cpu,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<usize> = std::env::var("SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 250, 500, 1000]);
    let idle = Duration::from_secs(
        std::env::var("IDLE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    // 0: the members hold still, an idle fleet; n: every member's load changes every n s.
    let tick: u64 = std::env::var("CLUSTER_TICK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let changes = match tick {
        0 => "members holding still".to_string(),
        t => format!("every member's status changing every {t} s"),
    };
    println!(
        "kairship run (controller-manager role) against kairship sim, {CLUSTERS} member clusters per instance, each in its own process; CPU over {idle:?} after settling, {changes}"
    );
    println!(
        "{:>9} {:>12} {:>10} {:>14} {:>8} {:>16} {:>14} {:>18}",
        "INSTANCES",
        "ALL RUNNING",
        "RSS MiB",
        "KiB/INSTANCE",
        "SOCKETS",
        "IDLE CPU (core)",
        "SIM RSS MiB",
        "SIM KiB/INSTANCE"
    );
    for n in sizes {
        let f = measure(n, idle, tick).await;
        println!(
            "{:>9} {:>11.1}s {:>10.1} {:>14.0} {:>8} {:>15.1}% {:>14.1} {:>18.0}",
            f.n,
            f.running_after.as_secs_f64(),
            f.rss_mib,
            f.rss_mib * 1024.0 / f.n as f64,
            f.sockets,
            f.idle_cpu * 100.0,
            f.sim_rss_mib,
            f.sim_rss_mib * 1024.0 / f.n as f64
        );
    }
}
