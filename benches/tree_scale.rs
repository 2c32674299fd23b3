//! The supervision tree at fleet scale: 200 instances with 5 member clusters each on
//! this machine. Reports the time until every instance is Running, resident memory per
//! instance actor, and how long an instance actor takes to be restarted and have its
//! caches synced again. Prints figures; asserts nothing about speed.
//! Run: `cargo bench --bench tree_scale` (INSTANCES=n to change the fleet size).

use std::time::{Duration, Instant};

#[allow(dead_code)]
mod common;
use common::rss_kib;
use kairship::actors::instance::InstanceMsg;
use kairship::actors::tree::Tree;
use kairship::bootstrap;
use kairship::context::Settings;
use kairship::crd::{Instance, Phase};
use kairship_sim::{Fleet, FleetConfig};
use kube::api::{Api, ListParams};

async fn running(api: &Api<Instance>) -> usize {
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|i| i.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
                .count()
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("INSTANCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("tempdir");
    let t = Instant::now();
    let fleet = Fleet::start(FleetConfig {
        instances: n,
        clusters: 5,
        state_dir: Some(dir.path().to_path_buf()),
        cluster_tick: Duration::from_secs(10),
        ..Default::default()
    })
    .await
    .expect("fleet");
    println!("kairship supervision tree at scale: {n} instances x 5 member clusters, 2-core machine (simulator in the same process)");
    println!("simulated fleet started in {:.1?}", t.elapsed());
    let kc = kube::config::Kubeconfig::read_from(dir.path().join("kubeconfigs/host.kubeconfig"))
        .expect("kubeconfig");
    let host = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config"),
    )
    .expect("client");
    bootstrap::install_crds(&host).await.expect("crds");
    bootstrap::ensure_namespace(&host, "kairship-system")
        .await
        .expect("ns");
    for i in fleet.instances() {
        let config = std::fs::read(
            dir.path()
                .join(format!("kubeconfigs/{}.kubeconfig", i.name)),
        )
        .expect("kubeconfig");
        bootstrap::attach_external(&host, "kairship-system", &i.name, config)
            .await
            .expect("attach");
    }
    let rss_before = rss_kib();

    let settings = Settings {
        tick: Duration::from_secs(2),
        ..Settings::default()
    };
    let start = Instant::now();
    let tree = Tree::start(host.clone(), None, "bench", settings)
        .await
        .expect("tree");
    let api: Api<Instance> = Api::all(host.clone());
    let mut last = 0;
    loop {
        let r = running(&api).await;
        if r != last {
            last = r;
        }
        if r == n {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "only {r}/{n} Running after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_running = start.elapsed();
    println!(
        "all {n} instances Running after {all_running:.2?} ({:.1} ms per instance)",
        all_running.as_secs_f64() * 1000.0 / n as f64
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after = rss_kib();
    println!(
        "resident memory: {} MiB before the tree, {} MiB with it -> {:.0} KiB per instance actor (its client, 11 reflector caches, tasks; includes the simulator's side of those 11 watches)",
        rss_before / 1024,
        rss_after / 1024,
        (rss_after.saturating_sub(rss_before)) as f64 / n as f64
    );

    let mut restarts = Vec::new();
    for round in 0..10 {
        let name = format!("karmada-{}", 1 + round * (n / 10).max(1));
        let t = Instant::now();
        tree.restart_instance(&name).await.expect("restart");
        loop {
            let actor = tree.instance(&name).await.expect("lookup");
            let synced = match actor {
                Some(a) => ractor::call_t!(a, InstanceMsg::View, 2000)
                    .map(|v| {
                        v.status
                            .conditions
                            .iter()
                            .any(|c| c.type_ == "Synced" && c.status == "True")
                    })
                    .unwrap_or(false),
                None => false,
            };
            if synced {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{name} never resynced"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        restarts.push(t.elapsed());
    }
    restarts.sort();
    println!("restart + caches synced again: p50 {:.1?}, max {:.1?} (10 restarts while {} other instances run)", percentile(&restarts, 0.5), percentile(&restarts, 1.0), n - 1);
    tree.shutdown().await;
    fleet.shutdown();
}
