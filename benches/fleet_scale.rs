//! Kairship at fleet scale, each side in its own process: `kairship sim` serves N
//! instances x 5 member clusters, `kairship run` (all roles) attaches them all. For each
//! fleet size it prints the time until every instance is Running, Kairship's resident
//! memory (and per instance), its open sockets, and its CPU while idle for a minute after
//! settling. Figures only; nothing about speed is asserted.
//! Run: `cargo bench --bench fleet_scale` (SIZES=100,250, IDLE_SECS=n and
//! CLUSTER_TICK_SECS=n, members' status changing every n s, to change).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kairship::bootstrap;

const CLUSTERS: usize = 5;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kairship(args: &[&str], log: &Path) -> Proc {
    let out = std::fs::File::create(log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::from(out.try_clone().expect("log file")))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("starting kairship");
    Proc(child)
}

/// (resident KiB, CPU ticks used so far, open sockets) of a process, from /proc.
fn usage(pid: u32) -> (u64, u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0);
    (rss, ticks, sockets)
}

async fn host_client(dir: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(dir.join("kubeconfigs/host.kubeconfig"))
        .expect("host kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("host config");
    kube::Client::try_from(config).expect("host client")
}

async fn wait_for(path: &Path, what: &str, limit: Duration) {
    let t = Instant::now();
    while !path.exists() {
        assert!(t.elapsed() < limit, "{what} did not appear in {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Figures {
    n: usize,
    running_after: Duration,
    rss_mib: f64,
    sockets: usize,
    idle_cpu: f64,
}

async fn measure(n: usize, idle: Duration, tick: u64) -> Figures {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim_dir: PathBuf = dir.path().join("sim");
    let _sim = kairship(
        &[
            "sim",
            "--state-dir",
            sim_dir.to_str().expect("utf-8 path"),
            "--instances",
            &n.to_string(),
            "--clusters",
            &CLUSTERS.to_string(),
            "--cluster-tick-secs",
            &tick.to_string(),
            // kube-apiserver sends a watch bookmark about once a minute; the simulator's
            // default of 10 s would be 11,000 watches x 6 per minute here.
            "--bookmark-secs",
            "60",
        ],
        &dir.path().join("sim.log"),
    );
    wait_for(
        &sim_dir.join("endpoints.json"),
        "the simulator's endpoints.json",
        Duration::from_secs(300),
    )
    .await;
    let host = host_client(&sim_dir).await;
    bootstrap::install_crds(&host).await.expect("crds");
    bootstrap::ensure_namespace(&host, "kairship-system")
        .await
        .expect("namespace");
    for i in 1..=n {
        let name = format!("karmada-{i}");
        let config = std::fs::read(sim_dir.join(format!("kubeconfigs/{name}.kubeconfig")))
            .expect("instance kubeconfig");
        bootstrap::attach_external(&host, "kairship-system", &name, config)
            .await
            .expect("attach");
    }
    let host_kubeconfig = sim_dir.join("kubeconfigs/host.kubeconfig");
    let start = Instant::now();
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
        &dir.path().join("run.log"),
    );
    loop {
        if bootstrap::running_instances(&host)
            .await
            .map(|c| c.0)
            .unwrap_or(0)
            == n
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "{n} instances not all Running after 10 minutes (see {})",
            dir.path().join("run.log").display()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
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
    Figures {
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
        "{:>9} {:>12} {:>10} {:>14} {:>8} {:>16}",
        "INSTANCES", "ALL RUNNING", "RSS MiB", "KiB/INSTANCE", "SOCKETS", "IDLE CPU (core)"
    );
    for n in sizes {
        let f = measure(n, idle, tick).await;
        println!(
            "{:>9} {:>11.1}s {:>10.1} {:>14.0} {:>8} {:>15.1}%",
            f.n,
            f.running_after.as_secs_f64(),
            f.rss_mib,
            f.rss_mib * 1024.0 / f.n as f64,
            f.sockets,
            f.idle_cpu * 100.0
        );
    }
}
