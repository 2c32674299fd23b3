//! Watch fan-out: 1,000 concurrent watchers of one cached kind (half JSON, half kubectl's
//! Table form) through the HTTPS proxy while 100 objects a second change, served from the
//! cache and then passed through to the instance, side by side. Prints the CPU of the
//! process serving them (Kairship with the simulated instances), heap per watcher, and the
//! delay of each event to its last watcher (p50, p99), with a watcher of another instance
//! (10 changes a second) measured beside: alone, and during each load.
//!
//! The watchers run in a child process (this binary again), so the figures are the
//! server's own. `cargo bench --bench watch_fanout` (WATCHERS, SECONDS override).

#[allow(dead_code)]
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::live_bytes::{self, StatsAlloc, System, INSTRUMENTED_SYSTEM};
use common::{client, cpu_time, deployment, settle, BenchFleet, BenchServer};
use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const SENT_AT: &str = "bench/sent-at";
/// Objects that change in the watched instance, and in the other one.
const CHANGING: usize = 1_000;
const OTHER: usize = 100;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn percentile(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// The child: opens the watchers, reports when all have answered, then for `SECONDS`
/// records each event's delay (now minus the sent-at annotation), and prints per stream
/// group the delay to the last watcher of each event.
async fn watchers_main(spec: &str) {
    kairship::open_files::raise_open_files();
    let mut parts = spec.split(',');
    let (one, two, n, through, seconds) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
        parts
            .next()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0),
        parts.next() == Some("through"),
        parts
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(10),
    );
    let one = client(std::path::Path::new(&one)).await;
    let two = client(std::path::Path::new(&two)).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(bool, String, u64)>();
    let mut opened: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..=n {
        // Watcher `n` is the other instance's.
        let (c, other) = match i == n {
            true => (two.clone(), true),
            false => (one.clone(), false),
        };
        let accept = if i % 2 == 0 {
            "application/json"
        } else {
            TABLE
        };
        let mut req = http::Request::get(format!("{DEPLOYS}?watch=true&resourceVersion=0"))
            .header("accept", accept);
        if through {
            req = req.header("x-kairship-source", "instance");
        }
        let req = req.body(Vec::new()).expect("request");
        let tx = tx.clone();
        let failed = failed.clone();
        if opened.len() >= 100 {
            for o in opened.drain(..) {
                o.await.expect("opened");
            }
        }
        opened.push(tokio::spawn(async move {
            let (head, body) = req.into_parts();
            // A burst of watch starts may meet the instance's request limit (429), or an
            // instance too loaded to answer its probes (503): again, a few times.
            let mut tries = 0;
            let resp = loop {
                let req = http::Request::from_parts(head.clone(), body.clone());
                let resp = c.send(req.map(Into::into)).await.expect("watch");
                let again = matches!(resp.status().as_u16(), 429 | 503);
                tries += 1;
                if !again || tries >= 10 {
                    break resp;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            if !resp.status().is_success() {
                let status = resp.status();
                let body = resp
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                eprintln!(
                    "a watch failed to open: {status}: {}",
                    String::from_utf8_lossy(&body)
                );
                failed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            let mut body = resp.into_body().into_data_stream();
            let mut buf: Vec<u8> = Vec::new();
            tokio::spawn(async move {
                let needle = format!("\"{SENT_AT}\":\"");
                while let Some(Ok(chunk)) = body.next().await {
                    buf.extend_from_slice(&chunk);
                    while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=end).collect();
                        let text = String::from_utf8_lossy(&line);
                        // Changes only: the initial ADDED events carry older stamps.
                        if !text.starts_with("{\"type\":\"MODIFIED\"") {
                            continue;
                        }
                        let Some(at) = text.find(&needle) else {
                            continue;
                        };
                        let rest = &text[at + needle.len()..];
                        let Some((sent, _)) = rest.split_once('"') else {
                            continue;
                        };
                        let Ok(sent_us) = sent.parse::<u64>() else {
                            continue;
                        };
                        let delay = micros_now().saturating_sub(sent_us);
                        // The event's identity: its sent-at stamp is unique per change.
                        let _ = tx.send((other, sent.to_string(), delay));
                    }
                }
            });
        }));
    }
    for o in opened {
        o.await.expect("opened");
    }
    drop(tx);
    println!("ready");
    let mut last: HashMap<(bool, String), (u64, usize)> = HashMap::new();
    let deadline = tokio::time::sleep(Duration::from_secs(seconds));
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some((other, id, delay)) => {
                    let e = last.entry((other, id)).or_insert((0, 0));
                    e.0 = e.0.max(delay);
                    e.1 += 1;
                }
                None => break,
            },
            _ = &mut deadline => break,
        }
    }
    let (mut mine, mut others) = (Vec::new(), Vec::new());
    let mut deliveries = 0;
    for ((other, _), (delay, count)) in last {
        match other {
            true => others.push(delay),
            false => {
                mine.push(delay);
                deliveries += count;
            }
        }
    }
    println!(
        "{}",
        json!({
            "events": mine.len(),
            "failed_to_open": failed.load(std::sync::atomic::Ordering::Relaxed),
            "deliveries": deliveries,
            "p50_us": percentile(&mut mine, 0.5),
            "p99_us": percentile(&mut mine, 0.99),
            "other_events": others.len(),
            "other_p50_us": percentile(&mut others.clone(), 0.5),
            "other_p99_us": percentile(&mut others, 0.99),
        })
    );
    std::process::exit(0);
}

/// Changes `per_second` of the first `count` Deployments of `instance` a second, stamping
/// each with the time it was sent, until `stop`.
async fn change(
    api: kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    count: usize,
    per_second: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / per_second));
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tick.tick().await;
        let name = format!("web-{:05}", i % count);
        i += 1;
        let patch = json!({"metadata": {"annotations": {SENT_AT: micros_now().to_string()}}});
        let _ = api
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await;
    }
}

struct Phase {
    name: &'static str,
    cpu: f64,
    heap_per_watcher: f64,
    report: serde_json::Value,
}

async fn phase(
    name: &'static str,
    bench: &BenchFleet,
    kubeconfigs: (&std::path::Path, &std::path::Path),
    watchers: usize,
    through: bool,
    seconds: u64,
) -> Phase {
    settle().await;
    eprintln!("  phase: {name}");
    let before = live_bytes::now();
    let spec = format!(
        "{},{},{watchers},{},{seconds}",
        kubeconfigs.0.display(),
        kubeconfigs.1.display(),
        if through { "through" } else { "cache" }
    );
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
        .env("FANOUT_WATCHERS", spec)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("watchers");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = lines.next_line().await.expect("read").unwrap_or_default();
    assert_eq!(ready, "ready", "the watchers opened");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let heap = live_bytes::now() - before;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let one = kube::Api::namespaced(bench.fleet_client("karmada-1").await, "default");
    let two = kube::Api::namespaced(bench.fleet_client("karmada-2").await, "default");
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let changers = [
        tokio::spawn(change(one, CHANGING, 100, stop.clone())),
        tokio::spawn(change(two, OTHER, 10, stop.clone())),
    ];
    let report = lines.next_line().await.expect("read").unwrap_or_default();
    let cpu = (cpu_time() - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in changers {
        let _ = c.await;
    }
    let _ = child.wait().await;
    Phase {
        name,
        cpu,
        heap_per_watcher: heap as f64 / watchers.max(1) as f64,
        report: serde_json::from_str(&report).unwrap_or_default(),
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(spec) = std::env::var("FANOUT_WATCHERS") {
        rt.block_on(watchers_main(&spec));
        return;
    }
    rt.block_on(bench());
}

async fn bench() {
    kairship::open_files::raise_open_files();
    let watchers = env("WATCHERS", 1000);
    let seconds = env("SECONDS", 20) as u64;
    let bench = BenchFleet::start(2).await;
    let objects =
        |n: usize| (0..n).map(|i| deployment(&format!("web-{i:05}"), json!({"app": "web"})));
    bench.seed_deployments("karmada-1", objects(CHANGING));
    bench.seed_deployments("karmada-2", objects(OTHER));
    let server = BenchServer::start(&bench).await;
    bench.wait_running(2).await;
    let one = server.proxy_kubeconfig(&bench, "karmada-1");
    let two = server.proxy_kubeconfig(&bench, "karmada-2");

    println!("kairship watch fan-out: {watchers} watchers of Deployments in one instance through the HTTPS proxy (half JSON, half Table), 100 changes/s among {CHANGING} objects; one watcher of another instance (10 changes/s); {seconds} s per phase, watchers in a child process; 2-core machine");
    let phases = [
        phase(
            "other instance alone",
            &bench,
            (&one, &two),
            0,
            false,
            seconds,
        )
        .await,
        phase(
            "from the cache",
            &bench,
            (&one, &two),
            watchers,
            false,
            seconds,
        )
        .await,
        phase(
            "passed through",
            &bench,
            (&one, &two),
            watchers,
            true,
            seconds,
        )
        .await,
    ];
    println!(
        "  {:<22} {:>9} {:>12} {:>8} {:>11} {:>11} {:>14}",
        "", "CPU", "heap/watcher", "events", "p50 last", "p99 last", "other p99"
    );
    let mut failures = Vec::new();
    for p in &phases {
        let us = |k: &str| Duration::from_micros(p.report[k].as_u64().unwrap_or(0));
        println!(
            "  {:<22} {:>8.0}% {:>10.1} KiB {:>8} {:>11.1?} {:>11.1?} {:>14.1?}",
            p.name,
            p.cpu * 100.0,
            p.heap_per_watcher / 1024.0,
            p.report["events"],
            us("p50_us"),
            us("p99_us"),
            us("other_p99_us"),
        );
        if p.report["failed_to_open"].as_u64().unwrap_or(0) > 0 {
            failures.push(format!(
                "{}: {} watches failed to open",
                p.name, p.report["failed_to_open"]
            ));
        }
    }
    for f in failures {
        println!("  {f}");
    }
    println!("  (CPU: the serving process, Kairship and both simulated instances, as a share of one core; events: changes delivered, each to every watcher; p50/p99 last: an event's delay to its last watcher; goal p99 < 100 ms)");
    server.running.shutdown().await;
    bench.fleet.shutdown();
}
