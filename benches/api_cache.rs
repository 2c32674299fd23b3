//! The API's read path, side by side in one process: the heap the caches keep per object
//! (Deployments and ResourceBindings, at 10,000 and at 100,000 of each in one instance,
//! counted by the allocator: the bytes freed when the instance's caches are dropped), the
//! time from attach to synced, and JSON LIST, Table LIST (what `kubectl get` asks for),
//! label-selected LIST (1%), GET and a watch start through Kairship's cache vs passed
//! through to the instance; then a healthy instance's p99 while another instance has 2 s
//! of latency injected. Prints figures only.
//! Run: `cargo bench --bench api_cache` (OBJECTS=n for the large count, default 100000).

use std::time::{Duration, Instant};

use serde_json::json;

mod common;
use common::cache::{
    cached_count, deployments, get_as, json_size, set_paused, wait_synced, DEPLOYS, DEPLOY_KIND,
    TABLE,
};
use common::live_bytes::{self, StatsAlloc, System, INSTRUMENTED_SYSTEM};
use common::{client, count, policy_for_all_deployments, rss_kib, settle, BenchFleet, BenchServer};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SMALL: usize = 10_000;

fn large() -> usize {
    std::env::var("OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

const BINDINGS: &str = "/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings";
const POLICY_KIND: (&str, &str, &str) = ("policy.karmada.io", "v1alpha1", "propagationpolicies");

/// Has the instance's Karmada bind each of `n` Deployments (a ResourceBinding each, made
/// by its controllers as Karmada makes them), waiting until they are all there. Returns
/// how many bindings the instance holds then: the fleet's own sample workload may be
/// bound too, and the cache is waited on for what the instance has.
async fn bind_all(bench: &BenchFleet, instance: &str, n: usize) -> usize {
    bench.seed(instance, POLICY_KIND, [policy_for_all_deployments()]);
    let direct = bench.fleet_client(instance).await;
    let start = Instant::now();
    // Until there are `n` and two counts in a row agree.
    let mut made = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = count(&direct, BINDINGS).await;
        if now >= n && now == made {
            break;
        }
        made = now;
    }
    eprintln!(
        "  ({instance}: Karmada made {made} ResourceBindings in {:.0?})",
        start.elapsed()
    );
    made
}

/// Heap bytes an instance's caches hold: freed when it is paused (after a JSON and a
/// Table LIST of each of `paths`, so each object's row is printed too). Leaves it paused.
async fn cache_bytes(host: &kube::Client, name: &str, c: &kube::Client, paths: &[&str]) -> i64 {
    cache_bytes_and_rss(host, name, c, paths).await.0
}

/// [`cache_bytes`], and the process's resident KiB after the LISTs, before the pause.
async fn cache_bytes_and_rss(
    host: &kube::Client,
    name: &str,
    c: &kube::Client,
    paths: &[&str],
) -> (i64, u64) {
    for p in paths {
        get(c, p, false).await;
        get_as(c, p, false, TABLE).await;
    }
    settle().await;
    let rss = rss_kib();
    let before = live_bytes::now();
    set_paused(host, name, true).await;
    while cached_count(c, paths[0]).await.is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The watch tasks end and the last readers let go.
    settle().await;
    (before - live_bytes::now(), rss)
}

async fn get(c: &kube::Client, path: &str, pass_through: bool) -> Duration {
    get_as(c, path, pass_through, "application/json").await
}

struct Stats {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
    /// The process's minor page faults per request, where counted.
    faults: Option<f64>,
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
            faults: None,
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
    // The whole process's (client, Kairship and simulator): pages mapped afresh for each
    // answer show here.
    let (mut cached_faults, mut passed_faults) = (0, 0);
    for _ in 0..n {
        let f = common::minor_faults();
        let t = get_as(c, path, false, accept).await;
        cached_faults += common::minor_faults() - f;
        cached_total += t;
        cached.push(t);
        let f = common::minor_faults();
        let t = get_as(c, path, true, accept).await;
        passed_faults += common::minor_faults() - f;
        passed_total += t;
        passed.push(t);
    }
    let per_call = |f: u64| Some(f as f64 / n.max(1) as f64);
    (
        Stats {
            faults: per_call(cached_faults),
            ..Stats::of(cached, cached_total)
        },
        Stats {
            faults: per_call(passed_faults),
            ..Stats::of(passed, passed_total)
        },
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
    let faults = s
        .faults
        .map(|f| format!("  {f:>7.0} page faults/req"))
        .unwrap_or_default();
    println!(
        "  {what:<34} p50 {:>9.2?}  p99 {:>9.2?}  {:>8.1} req/s{faults}",
        s.p50, s.p99, s.per_sec
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The allocator's options as the product sets them (GLIBC_TUNABLES overrides them).
    kairship_heap::configure();
    let large = large();
    let bench = BenchFleet::start(2).await;
    bench.seed("karmada-1", DEPLOY_KIND, deployments(0..SMALL));
    let (fleet, host) = (&bench.fleet, bench.host.clone());
    let server = BenchServer::start(&bench).await;
    bench.wait_running(2).await;
    let proxy = |name: &str| server.proxy_kubeconfig(&bench, name);
    let one = client(&proxy("karmada-1")).await;
    let two = client(&proxy("karmada-2")).await;
    wait_synced(&one, DEPLOYS, SMALL).await;

    println!("kairship cache: memory per object (heap freed when the instance's caches are dropped, after one JSON and one Table LIST), 2-core machine, one process");
    let per = |bytes: i64, n: usize| bytes as f64 / n as f64;
    let memory_row = |what: &str, n: usize, bytes: i64, json: usize| {
        println!(
            "  {what:<16} at {n:>7}: {:>6.0} B kept per object; its JSON {json} B ({:.2}x; goal <= 2x + 512 B = {} B{})",
            per(bytes, n),
            per(bytes, n) / json as f64,
            2 * json + 512,
            if what == "Deployment" { ", and <= 3 KiB" } else { "" }
        );
    };
    // Deployments alone in karmada-1, at both sizes; the bindings' share is what Karmada's
    // ResourceBindings add to the same Deployments.
    let deploy_json = json_size(&one, &format!("{DEPLOYS}/web-000042")).await;
    let d_small = cache_bytes(&host, "karmada-1", &one, &[DEPLOYS]).await;
    memory_row("Deployment", SMALL, d_small, deploy_json);
    bench.seed("karmada-1", DEPLOY_KIND, deployments(SMALL..large));
    settle().await;
    // What a replica's memory limit sees: the process's resident growth from the resume
    // (its caches empty) to synced, then after the LISTs, beside the allocator's count.
    let rss_before = rss_kib();
    set_paused(&host, "karmada-1", false).await;
    wait_synced(&one, DEPLOYS, large).await;
    settle().await;
    let rss_synced = rss_kib();
    let (d_large, rss_listed) = cache_bytes_and_rss(&host, "karmada-1", &one, &[DEPLOYS]).await;
    memory_row("Deployment", large, d_large, deploy_json);
    let resident = |kib: u64| kib.saturating_sub(rss_before) as f64 * 1024.0 / large as f64;
    println!(
        "  {:<16} at {large:>7}: {:>6.0} B resident growth per object once synced, {:.0} B after one JSON and one Table LIST (the allocator counts {:.0} B kept; goal <= 1536 B)",
        "Deployment",
        resident(rss_synced),
        resident(rss_listed),
        per(d_large, large),
    );

    bench.seed("karmada-2", DEPLOY_KIND, deployments(0..SMALL));
    let bound = bind_all(&bench, "karmada-2", SMALL).await;
    wait_synced(&two, DEPLOYS, SMALL).await;
    wait_synced(&two, BINDINGS, bound).await;
    let binding_json = json_size(&two, &format!("{BINDINGS}/web-000042-deployment")).await;
    let both_small = cache_bytes(&host, "karmada-2", &two, &[DEPLOYS, BINDINGS]).await;
    memory_row(
        "ResourceBinding",
        SMALL,
        both_small - per(d_small, SMALL) as i64 * SMALL as i64,
        binding_json,
    );
    set_paused(&host, "karmada-2", false).await;

    // The large instance: Karmada binds its Deployments, then an attach (resume) to synced.
    let bound = bind_all(&bench, "karmada-1", large).await;
    let attach = Instant::now();
    set_paused(&host, "karmada-1", false).await;
    wait_synced(&one, DEPLOYS, large).await;
    wait_synced(&one, BINDINGS, bound).await;
    let synced = attach.elapsed();
    println!(
        "  attach to synced, {large} Deployments + {large} ResourceBindings in one instance: {synced:.2?}"
    );

    println!("kairship API read path: {large} Deployments in one instance, through the HTTPS proxy, cache vs passed through (alternating)");
    settle().await;
    let list = DEPLOYS;
    let cold = get(&one, list, false).await;
    println!("  first LIST from cache: {cold:.2?}");
    get(&one, list, true).await;
    let (cached_list, passed_list) = measure_both(&one, list, 20, "application/json").await;
    row("LIST all, from cache", &cached_list);
    row("LIST all, passed through", &passed_list);
    println!(
        "  -> cached LIST {:.1}x faster at p50; cache p99/p50 {:.2} (goal: at least as fast, p99 <= 2x p50)",
        passed_list.p50.as_secs_f64() / cached_list.p50.as_secs_f64(),
        cached_list.p99.as_secs_f64() / cached_list.p50.as_secs_f64()
    );
    let cold = get_as(&one, list, false, TABLE).await;
    println!("  first Table LIST from cache (prints every row once): {cold:.2?}");
    let (cached_table, passed_table) = measure_both(&one, list, 6, TABLE).await;
    row("Table LIST all, from cache", &cached_table);
    row("Table LIST all, passed through", &passed_table);
    println!(
        "  -> cached Table LIST is {:.1}x faster at p50 (goal >= 3x)",
        passed_table.p50.as_secs_f64() / cached_table.p50.as_secs_f64()
    );
    let sel = format!("{list}?labelSelector=shard%3D3");
    let label = format!("LIST label selector ({})", large / 100);
    let (cached_sel, passed_sel) = measure_both(&one, &sel, 30, "application/json").await;
    row(&format!("{label}, cache"), &cached_sel);
    row(&format!("{label}, through"), &passed_sel);
    println!(
        "  -> cached label-selected LIST is {:.1}x faster at p50 (goal >= 10x)",
        passed_sel.p50.as_secs_f64() / cached_sel.p50.as_secs_f64()
    );
    // A watch start: the request until its answer's headers (the stream then stays open).
    let watch =
        format!("{list}?watch=1&resourceVersion=0&timeoutSeconds=1&labelSelector=shard%3D3");
    row(
        "watch start (headers), cache",
        &measure_start(&one, &watch, false, 20).await,
    );
    row(
        "watch start (headers), through",
        &measure_start(&one, &watch, true, 20).await,
    );
    let item = format!("{list}/web-002500");
    let cached_get = measure(&one, &item, false, 500).await;
    let passed_get = measure(&one, &item, true, 500).await;
    row("GET one, from cache", &cached_get);
    row("GET one, passed through", &passed_get);
    println!(
        "  -> GET from cache p99 {:.2?} (goal <= 1 ms)",
        cached_get.p99
    );

    // Isolation: a slow instance under load must not slow a healthy one. Baseline and
    // loaded windows alternate, so drift on a shared machine hits both alike.
    let probe_path = "/apis/apps/v1/namespaces/default/deployments/web-000042";
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
            faults: None,
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
    kairship_wire::fault_client::call("DELETE", &url, None)
        .await
        .ok();

    // Memory at the large size, last (it drops the caches): both kinds, less the
    // Deployments' share measured alone at the same size.
    let both_large = cache_bytes(&host, "karmada-1", &one, &[DEPLOYS, BINDINGS]).await;
    memory_row("ResourceBinding", large, both_large - d_large, binding_json);
    println!(
        "  (process RSS at the end, simulator's copies included: {} MiB)",
        rss_kib() / 1024
    );
    server.running.shutdown().await;
    bench.fleet.shutdown();
}
