//! Fleet search: 100 instances x 1,000 Deployments, a label selector matching 1% of them,
//! over gRPC with authorization on (every instance reviewed for the caller). Prints p50
//! and p99, and what the search keeps in memory (nothing of its own: it reads the caches
//! and their label index).
//!
//! `cargo bench --bench search` (INSTANCES and PER_INSTANCE override the sizes).

#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::{deployment, rss_kib, BenchFleet, BenchServer};
use kairship::proto::search_service_client::SearchServiceClient;
use kairship::proto::SearchRequest;
use serde_json::json;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let instances = env("INSTANCES", 100);
    let per_instance = env("PER_INSTANCE", 1000);
    let started = Instant::now();
    let bench = BenchFleet::start(instances).await;
    for i in 1..=instances {
        bench.seed_deployments(
            &format!("karmada-{i}"),
            (0..per_instance).map(|d| {
                // One in a hundred belongs to `payments`.
                let app = if d % 100 == 0 { "payments" } else { "web" };
                deployment(
                    &format!("svc-{d:05}"),
                    json!({"app": app, "shard": (d % 10).to_string()}),
                )
            }),
        );
    }
    let server = BenchServer::start(&bench).await;
    bench.wait_running(instances).await;
    println!(
        "{instances} instances x {per_instance} Deployments Running and cached in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", server.running.grpc_addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
    let mut client = SearchServiceClient::new(channel);
    let query = || SearchRequest {
        kinds: vec!["Deployment".into()],
        label_selector: "app=payments".into(),
        page_size: 1000,
        ..Default::default()
    };
    let want = instances * per_instance.div_ceil(100);
    // Every cache listed before measuring.
    loop {
        let r = client.search(query()).await.expect("search").into_inner();
        if r.hits.len() == want && r.unavailable_instances.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let rss_before = rss_kib();
    let mut v = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let r = client.search(query()).await.expect("search").into_inner();
        v.push(t.elapsed());
        assert_eq!(r.hits.len(), want);
    }
    let rss_after = rss_kib();
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "search app=payments across {instances} x {per_instance} ({want} hits, placement and policies for each): p50 {:.1?} p99 {:.1?} (goal: p50 under 50 ms)",
        at(0.5),
        at(0.99)
    );
    println!(
        "memory added by searching: {} KiB resident over 50 searches (search keeps nothing of its own: it reads the caches and their label index)",
        rss_after.saturating_sub(rss_before)
    );
    server.running.shutdown().await;
}
