//! Simulator throughput with 10,000 objects in one instance, over real HTTPS with the
//! instance's token: create, LIST (whole and paged), watch replay and live watch.
//! Prints figures; asserts nothing about speed. Run: `cargo bench -p kairship-sim`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use http_body_util::BodyExt;
use kairship_sim::{Fleet, FleetConfig};
use serde_json::json;

const OBJECTS: usize = 10_000;
const CONCURRENCY: usize = 16;
const LIST_ROUNDS: usize = 10;

fn cm(i: usize) -> Vec<u8> {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("bench-{i:05}"), "labels": {"app": "bench", "shard": (i % 10).to_string()}},
        "data": {"payload": "x".repeat(200)}})
    .to_string()
    .into_bytes()
}

async fn get(client: &kube::Client, path: &str) -> Vec<u8> {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    client
        .request_text(req)
        .await
        .expect("request")
        .into_bytes()
}

/// Opens a watch and counts events until `want` have arrived.
async fn count_events(client: &kube::Client, path: &str, want: usize) -> (Duration, usize) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .expect("request");
    let start = Instant::now();
    let resp = client.send(req).await.expect("watch opens");
    let mut body = resp.into_body().into_data_stream();
    let (mut seen, mut bytes) = (0, 0);
    while seen < want {
        let chunk = tokio::time::timeout(Duration::from_secs(60), body.next())
            .await
            .expect("events keep coming")
            .expect("stream open")
            .expect("chunk");
        bytes += chunk.len();
        seen += chunk.iter().filter(|b| **b == b'\n').count();
    }
    (start.elapsed(), bytes)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = FleetConfig {
        instances: 1,
        clusters: 1,
        state_dir: Some(dir.path().to_path_buf()),
        cluster_tick: Duration::from_secs(3600),
        ..Default::default()
    };
    let fleet = Fleet::start(config).await.expect("fleet");
    let kc =
        kube::config::Kubeconfig::read_from(dir.path().join("kubeconfigs/karmada-1.kubeconfig"))
            .expect("kubeconfig");
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config"),
    )
    .expect("client");
    let coll = "/api/v1/namespaces/default/configmaps";
    println!("kairship-sim throughput: {OBJECTS} ConfigMaps (~330 B each) in one instance, HTTPS + bearer token, 2-core machine");

    // Live watch opened before the writes: measures fan-out while creating.
    let live_client = client.clone();
    let rv0 = fleet
        .instance("karmada-1")
        .expect("instance")
        .server
        .store
        .current_rv();
    let live = tokio::spawn(async move {
        count_events(
            &live_client,
            &format!("{coll}?watch=true&resourceVersion={rv0}"),
            OBJECTS,
        )
        .await
    });

    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..CONCURRENCY {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..OBJECTS).step_by(CONCURRENCY) {
                let req = http::Request::post(coll)
                    .header("content-type", "application/json")
                    .body(cm(i))
                    .expect("request");
                c.request_text(req).await.expect("create");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let create = start.elapsed();
    println!("create:       {OBJECTS} objects in {:>7.1?}  -> {:>8.0} creates/s ({CONCURRENCY} concurrent clients)", create, OBJECTS as f64 / create.as_secs_f64());
    let (live_time, live_bytes) = live.await.expect("live watch");
    println!("live watch:   {OBJECTS} events   in {:>7.1?}  -> {:>8.0} events/s, {:.1} MB (bounded by the writers)", live_time, OBJECTS as f64 / live_time.as_secs_f64(), live_bytes as f64 / 1e6);

    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..LIST_ROUNDS {
        let t = Instant::now();
        size = get(&client, coll).await.len();
        times.push(t.elapsed());
    }
    times.sort();
    let p50 = percentile(&times, 0.5);
    println!("LIST (all):   p50 {:>7.1?}  p99 {:>7.1?}  -> {:>8.0} objects/s, {:.1} MB per list ({LIST_ROUNDS} rounds)", p50, percentile(&times, 0.99), OBJECTS as f64 / p50.as_secs_f64(), size as f64 / 1e6);

    let t = Instant::now();
    let mut cont = String::new();
    let mut pages = 0;
    loop {
        let body = get(&client, &format!("{coll}?limit=500&continue={cont}")).await;
        pages += 1;
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        match v["metadata"]["continue"].as_str() {
            Some(c) if !c.is_empty() => cont = c.to_string(),
            _ => break,
        }
    }
    let paged = t.elapsed();
    println!(
        "LIST (paged): {pages} pages of 500 in {:>7.1?}  -> {:>8.0} objects/s",
        paged,
        OBJECTS as f64 / paged.as_secs_f64()
    );

    let t = Instant::now();
    let sel = get(&client, &format!("{coll}?labelSelector=shard%3D3")).await;
    let n = serde_json::from_slice::<serde_json::Value>(&sel).expect("json")["items"]
        .as_array()
        .map_or(0, Vec::len);
    println!(
        "LIST (label selector, {n} of {OBJECTS} match): {:>7.1?}",
        t.elapsed()
    );

    let (replay, bytes) = count_events(
        &client,
        &format!("{coll}?watch=true&resourceVersion=0"),
        OBJECTS,
    )
    .await;
    println!(
        "watch replay: {OBJECTS} events   in {:>7.1?}  -> {:>8.0} events/s, {:.1} MB",
        replay,
        OBJECTS as f64 / replay.as_secs_f64(),
        bytes as f64 / 1e6
    );
    let (hist, _) = count_events(
        &client,
        &format!("{coll}?watch=true&resourceVersion={rv0}"),
        OBJECTS,
    )
    .await;
    println!(
        "watch resume from history: {OBJECTS} events in {:>7.1?}  -> {:>8.0} events/s",
        hist,
        OBJECTS as f64 / hist.as_secs_f64()
    );
    fleet.shutdown();
}
