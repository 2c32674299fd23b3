//! The API's read path, side by side in one process: JSON LIST, Table LIST (what
//! `kubectl get` asks for), label-selected LIST, GET and a watch start over 10,000
//! Deployments through Kairship's cache vs passed through to the instance, the memory the
//! cache keeps per object, and a healthy instance's p99 while another instance has 2 s of
//! latency injected. Prints figures only.
//! Run: `cargo bench --bench api_cache` (DEPLOYMENTS=n to change the count).

use std::time::{Duration, Instant};

use kairship::actors::context::Settings;
use kairship::actors::tree::Election;
use kairship::server::{self, ServerConfig};
use kairship_wire::kubeconfig;
use serde_json::json;

mod common;
use common::{client, deployment, BenchFleet};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

fn deployments() -> usize {
    std::env::var("DEPLOYMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

async fn get(c: &kube::Client, path: &str, pass_through: bool) -> Duration {
    get_as(c, path, pass_through, "application/json").await
}

async fn get_as(c: &kube::Client, path: &str, pass_through: bool, accept: &str) -> Duration {
    let mut req = http::Request::get(path).header("accept", accept);
    if pass_through {
        req = req.header("x-kairship-source", "instance");
    }
    let t = Instant::now();
    let body = c
        .request_text(req.body(Vec::new()).expect("request"))
        .await
        .expect("answer");
    assert!(!body.is_empty());
    t.elapsed()
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

impl Stats {
    /// From the latencies of requests made one after another over `total`.
    fn of(mut v: Vec<Duration>, total: Duration) -> Self {
        v.sort();
        let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
        Stats {
            p50: at(0.5),
            p99: at(0.99),
            per_sec: v.len() as f64 / total.as_secs_f64(),
        }
    }
}

async fn measure(c: &kube::Client, path: &str, pass_through: bool, n: usize) -> Stats {
    measure_as(c, path, pass_through, n, "application/json").await
}

async fn measure_as(
    c: &kube::Client,
    path: &str,
    pass_through: bool,
    n: usize,
    accept: &str,
) -> Stats {
    let start = Instant::now();
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(get_as(c, path, pass_through, accept).await);
    }
    Stats::of(v, start.elapsed())
}

/// The same request from the cache and passed through, alternating, so a shared
/// machine's drift hits both alike: (cache, passed through).
async fn measure_both(c: &kube::Client, path: &str, n: usize, accept: &str) -> (Stats, Stats) {
    let (mut cached, mut passed) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut cached_total, mut passed_total) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..n {
        let t = get_as(c, path, false, accept).await;
        cached_total += t;
        cached.push(t);
        let t = get_as(c, path, true, accept).await;
        passed_total += t;
        passed.push(t);
    }
    (
        Stats::of(cached, cached_total),
        Stats::of(passed, passed_total),
    )
}

/// Time to the response headers of a request whose body is not awaited (a watch).
async fn measure_start(c: &kube::Client, path: &str, pass_through: bool, n: usize) -> Stats {
    let start = Instant::now();
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let mut req = http::Request::get(path);
        if pass_through {
            req = req.header("x-kairship-source", "instance");
        }
        let t = Instant::now();
        let resp = c
            .send(req.body(Vec::new()).expect("request").map(Into::into))
            .await
            .expect("watch");
        v.push(t.elapsed());
        assert!(resp.status().is_success(), "{}", resp.status());
        drop(resp);
    }
    Stats::of(v, start.elapsed())
}

fn row(what: &str, s: &Stats) {
    println!(
        "  {what:<34} p50 {:>9.2?}  p99 {:>9.2?}  {:>8.1} req/s",
        s.p50, s.p99, s.per_sec
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    #[allow(non_snake_case)]
    let DEPLOYMENTS = deployments();
    let bench = BenchFleet::start(2).await;
    bench.seed_deployments(
        "karmada-1",
        (0..DEPLOYMENTS).map(|i| {
            deployment(
                &format!("web-{i:05}"),
                json!({"app": "web", "shard": (i % 10).to_string()}),
            )
        }),
    );
    let (dir, fleet, host) = (&bench.dir, &bench.fleet, bench.host.clone());
    let rss_before = rss_kib();
    let cert = kairship_wire::tls::generate("kairship").expect("cert");
    let running = server::start(ServerConfig {
        host: host.clone(),
        identity: "bench".into(),
        election: Election::Always,
        settings: Settings::default(),
        grpc_addr: "127.0.0.1:0".parse().expect("addr"),
        http_addr: "127.0.0.1:0".parse().expect("addr"),
        probes_addr: None,
        tls: cert.server_config.clone(),
        auth: kairship::auth::Auth::disabled(),
        chaos_reports: None,
        shutdown_delay: std::time::Duration::ZERO,
    })
    .await
    .expect("server");
    bench.wait_running(2).await;
    let proxy = |name: &str| {
        let server = format!(
            "https://{}/apis/kairship.io/v1alpha1/instances/{name}/proxy",
            running.http_addr
        );
        let path = dir.path().join(format!("proxy-{name}.kubeconfig"));
        kubeconfig::write(
            &path,
            &kubeconfig::build(name, &server, &cert.ca_pem, "bench"),
        )
        .expect("write");
        path
    };
    let one = client(&proxy("karmada-1")).await;
    let two = client(&proxy("karmada-2")).await;
    // Warm up connections on both paths.
    get(
        &one,
        "/apis/apps/v1/namespaces/default/deployments?limit=1",
        false,
    )
    .await;
    get(
        &one,
        "/apis/apps/v1/namespaces/default/deployments?limit=1",
        true,
    )
    .await;

    println!("kairship API read path: {DEPLOYMENTS} Deployments in one instance, through the HTTPS proxy, 2-core machine, one process");
    let list = "/apis/apps/v1/namespaces/default/deployments";
    // The first cached LIST serializes every object once (then reused until it changes).
    let cold = get(&one, list, false).await;
    println!("  first LIST from cache (cold, fills the JSON memo): {cold:.2?}");
    // Both instances' caches (karmada-2's are nearly empty) and the JSON memo, against
    // the simulator's own copy of the same objects, which was there before.
    println!(
        "  memory kept by Kairship per cached Deployment (reflector object + JSON memo): ~{:.1} KiB",
        rss_kib().saturating_sub(rss_before) as f64 / DEPLOYMENTS as f64
    );
    get(&one, list, true).await;
    // p99 of 100 samples is the second slowest, not the single slowest.
    let (cached_list, passed_list) = measure_both(&one, list, 100, "application/json").await;
    row("LIST all, from cache", &cached_list);
    row("LIST all, passed through", &passed_list);
    println!(
        "  -> cached LIST is {:.1}x faster at p50 ({:.1}x in throughput)",
        passed_list.p50.as_secs_f64() / cached_list.p50.as_secs_f64(),
        cached_list.per_sec / passed_list.per_sec
    );
    let cold = get_as(&one, list, false, TABLE).await;
    println!("  first Table LIST from cache (cold, prints every row once): {cold:.2?}");
    let (cached_table, passed_table) = measure_both(&one, list, 30, TABLE).await;
    row("Table LIST all, from cache", &cached_table);
    row("Table LIST all, passed through", &passed_table);
    println!(
        "  -> cached Table LIST is {:.1}x faster at p50",
        passed_table.p50.as_secs_f64() / cached_table.p50.as_secs_f64()
    );
    let sel = format!("{list}?labelSelector=shard%3D3");
    let label = format!("LIST label selector ({})", DEPLOYMENTS / 10);
    let (cached_sel, passed_sel) = measure_both(&one, &sel, 50, "application/json").await;
    row(&format!("{label}, cache"), &cached_sel);
    row(&format!("{label}, through"), &passed_sel);
    // A watch start: the request until its answer's headers (the stream then stays open).
    let watch = format!("{list}?watch=1&resourceVersion=0&timeoutSeconds=1");
    row(
        "watch start (headers), cache",
        &measure_start(&one, &watch, false, 20).await,
    );
    row(
        "watch start (headers), through",
        &measure_start(&one, &watch, true, 20).await,
    );
    let item = format!("{list}/web-02500");
    let cached_get = measure(&one, &item, false, 500).await;
    let passed_get = measure(&one, &item, true, 500).await;
    row("GET one, from cache", &cached_get);
    row("GET one, passed through", &passed_get);

    // Isolation: a slow instance under load must not slow a healthy one. Baseline and
    // loaded windows alternate, so drift on a shared machine hits both alike.
    let probe_path = "/apis/apps/v1/namespaces/default/deployments/web-00042";
    let url = format!("{}/faults/karmada-2", fleet.admin_url());
    kairship_wire::fault_client::call(
        "POST",
        &url,
        Some(json!({"mode": "latency", "latency_ms": 2000})),
    )
    .await
    .expect("fault");
    let (mut before, mut during) = (Vec::new(), Vec::new());
    for _round in 0..3 {
        before.push(measure(&one, probe_path, false, 1000).await);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut load = Vec::new();
        for _ in 0..16 {
            let (two, stop) = (two.clone(), stop.clone());
            load.push(tokio::spawn(async move {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
                        .body(Vec::new())
                        .expect("request");
                    let _ = two.request_text(req).await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        during.push(measure(&one, probe_path, false, 1000).await);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for l in load {
            l.abort();
        }
    }
    let median_p99 = |v: &mut Vec<Stats>| {
        v.sort_by_key(|s| s.p99);
        Stats {
            p50: v[1].p50,
            p99: v[1].p99,
            per_sec: v[1].per_sec,
        }
    };
    let (b, d) = (median_p99(&mut before), median_p99(&mut during));
    println!("isolation: karmada-2 with 2 s latency and 16 clients waiting on it; GET on healthy karmada-1 (3 alternating rounds of 1000, median p99):");
    row("without the slow load", &b);
    row("while karmada-2 is slow", &d);
    println!(
        "  -> healthy p99 changed by {:+.1}%",
        (d.p99.as_secs_f64() / b.p99.as_secs_f64() - 1.0) * 100.0
    );
    running.shutdown().await;
    bench.fleet.shutdown();
}
