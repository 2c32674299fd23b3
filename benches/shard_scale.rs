//! Kairship scaled out (`kairship run --shards`), each side in its own process: one
//! `kairship sim` fleet, 1, 2 and 3 replicas with PER_REPLICA instances each. Prints, side
//! by side in one run:
//! - per replica: resident memory, sockets, instances owned (the spread), and the time
//!   until every instance is Running;
//! - fleet search p50/p99 through one replica (gathered from every owner);
//! - with 2 or more replicas, the forwarding hop: a cached GET and LIST through the proxy,
//!   asking the owner vs asking another replica, interleaved one by one;
//! - with the most replicas, a handoff: one replica SIGKILLed under a steady read load
//!   through another, how long until its instances answer from their new owners and how
//!   many reads failed.
//!
//! Figures only; nothing is asserted about speed. Run: `cargo bench --bench shard_scale`
//! (PER_REPLICA=n, REPLICAS=1,2,3, CLUSTERS=n, HOP_CALLS=n, SEARCH_CALLS=n, LEASE_SECS=n, the
//! chart's 15 s by default, READ_RATE=n reads a second during the handoff, 100 by default,
//! to change; STARTS=64,256 runs it for each `--instances-starting-at-once`, side by side;
//! KEEP=1 keeps every process's log). 10,000 instances over 5 replicas:
//! `PER_REPLICA=2000 REPLICAS=5`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::search_service_client::SearchServiceClient;
use kairship::proto::{GetInstanceRequest, SearchRequest};
use kube::api::{Api, ListParams};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

#[allow(dead_code)]
mod common;
use common::procs::{free_port, grant_ops_admin, kairship, usage, Proc, ServingFiles, SimFleet};

const TOKEN: &str = "shard-bench-token";
const NS: &str = "kairship-system";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Replica {
    name: String,
    proc: Proc,
    https: String,
    grpc: Channel,
}

/// What every replica is started with.
struct Shared {
    dir: PathBuf,
    host_kubeconfig: PathBuf,
    files: ServingFiles,
    lease: u64,
    /// `--instances-starting-at-once` (`None`: the default).
    starts: Option<usize>,
}

async fn replica(shared: &Shared, name: &str) -> Replica {
    let (grpc, https, probes) = (free_port(), free_port(), free_port());
    let lease = shared.lease.to_string();
    let renew = (shared.lease * 2 / 3).max(1).to_string();
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let args: Vec<String> = [
        "run",
        "--kubeconfig",
        &path(&shared.host_kubeconfig),
        "--identity",
        name,
        "--namespace",
        NS,
        "--leader-elect-namespace",
        NS,
        "--leader-elect-lease-duration-secs",
        &lease,
        "--leader-elect-renew-deadline-secs",
        &renew,
        "--leader-elect-retry-period-secs",
        "2",
        "--token-auth-file",
        &path(&shared.files.tokens),
        "--shards",
        "--peer-ca-file",
        &path(&shared.files.ca),
        "--peer-server-name",
        "localhost",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(shared.files.listen_args(grpc, https, probes))
    .chain(
        shared
            .starts
            .map(|n| format!("--instances-starting-at-once={n}")),
    )
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let proc = kairship(&args, &shared.dir.join(format!("{name}.log")));
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&shared.files.ca_pem))
        .domain_name("localhost");
    let grpc = Channel::from_shared(format!("https://127.0.0.1:{grpc}"))
        .expect("uri")
        .tls_config(tls)
        .expect("tls")
        .timeout(Duration::from_secs(30))
        .connect_lazy();
    Replica {
        name: name.to_string(),
        proc,
        https: format!("https://127.0.0.1:{https}"),
        grpc,
    }
}

/// Each instance's recorded owner.
async fn owners(host: &kube::Client) -> BTreeMap<String, String> {
    let api: Api<kairship::crd::Instance> = Api::all(host.clone());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return BTreeMap::new();
    };
    list.items
        .into_iter()
        .filter_map(|i| {
            let owner = i
                .metadata
                .annotations?
                .get("kairship.io/owner")?
                .to_string();
            Some((i.metadata.name?, owner))
        })
        .filter(|(_, o)| !o.is_empty())
        .collect()
}

fn bearer<T>(mut req: tonic::Request<T>) -> tonic::Request<T> {
    if let Ok(v) = format!("Bearer {TOKEN}").parse() {
        req.metadata_mut().insert("authorization", v);
    }
    req
}

async fn https_client(shared: &Shared, r: &Replica) -> kube::Client {
    let kc = kairship_wire::kubeconfig::build("bench", &r.https, &shared.files.ca_pem, TOKEN);
    let path = shared.dir.join(format!("{}.kubeconfig", r.name));
    kairship_wire::kubeconfig::write(&path, &kc).expect("kubeconfig");
    common::client(&path).await
}

/// p50 and p99 of `samples`, in ms.
fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    (at(0.50), at(0.99))
}

async fn timed_get(client: &kube::Client, path: &str) -> Duration {
    let t = Instant::now();
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    client
        .request_text(req)
        .await
        .expect("a GET through the proxy");
    t.elapsed()
}

struct Row {
    replicas: usize,
    instances: usize,
    running_after: Duration,
    rss_mib: Vec<f64>,
    sockets: Vec<usize>,
    owned: Vec<usize>,
    search: (f64, f64),
}

async fn search_percentiles(r: &Replica, calls: usize) -> (f64, f64) {
    let mut search = SearchServiceClient::new(r.grpc.clone());
    let mut samples = Vec::with_capacity(calls);
    let mut failed = Vec::new();
    for _ in 0..calls {
        let t = Instant::now();
        let got = search
            .search(bearer(tonic::Request::new(SearchRequest {
                kinds: vec!["Namespace".into()],
                name: "default".into(),
                ..Default::default()
            })))
            .await;
        match got {
            Ok(a) if a.get_ref().unavailable_instances.is_empty() => samples.push(t.elapsed()),
            Ok(a) => failed.push(format!(
                "{} instances unavailable",
                a.get_ref().unavailable_instances.len()
            )),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if !failed.is_empty() {
        println!(
            "  search through {}: {} of {calls} calls incomplete or failed, e.g. {:?}",
            r.name,
            failed.len(),
            failed.first()
        );
    }
    percentiles(&mut samples)
}

/// The cached GET and LIST of one instance's namespaces, asking its owner and asking
/// another replica, interleaved call by call.
async fn hop(
    shared: &Shared,
    replicas: &[Replica],
    owners: &BTreeMap<String, String>,
    calls: usize,
) {
    let Some((instance, owner)) = owners.iter().next() else {
        return;
    };
    let Some(at_owner) = replicas.iter().find(|r| &r.name == owner) else {
        return;
    };
    let Some(elsewhere) = replicas.iter().find(|r| &r.name != owner) else {
        return;
    };
    let (direct, via) = (
        https_client(shared, at_owner).await,
        https_client(shared, elsewhere).await,
    );
    let base = format!("/apis/kairship.io/v1alpha1/instances/{instance}/proxy/api/v1/namespaces");
    for (what, path) in [("GET", format!("{base}/default")), ("LIST", base.clone())] {
        // Warm: connections and the peer's pooled connection.
        for _ in 0..20 {
            timed_get(&direct, &path).await;
            timed_get(&via, &path).await;
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..calls {
            a.push(timed_get(&direct, &path).await);
            b.push(timed_get(&via, &path).await);
        }
        let ((a50, a99), (b50, b99)) = (percentiles(&mut a), percentiles(&mut b));
        println!(
            "  cached {what:<4} of {instance}'s namespaces, {calls} calls each: the owner p50 {a50:.2} ms p99 {a99:.2} ms; another replica p50 {b50:.2} ms p99 {b99:.2} ms (the hop: +{:.2} ms p50, +{:.2} ms p99)",
            b50 - a50,
            b99 - a99
        );
    }
}

/// SIGKILLs the last replica under readers through the first; prints how long its
/// instances took to answer from their new owners and how many reads failed.
async fn handoff(host: &kube::Client, replicas: &mut [Replica], lease: u64) {
    let Some((first, rest)) = replicas.split_first_mut() else {
        return;
    };
    let Some(victim) = rest.last_mut() else {
        return;
    };
    let before = owners(host).await;
    let theirs: Vec<String> = before
        .iter()
        .filter(|(_, o)| **o == victim.name)
        .map(|(i, _)| i.clone())
        .collect();
    let names: Vec<String> = before.keys().cloned().collect();
    let n = names.len();
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let slowest = Arc::new(AtomicU64::new(0));
    let errors: Arc<parking_lot::Mutex<Vec<String>>> = Default::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut readers = Vec::new();
    // READ_RATE reads a second in all (0: as fast as 4 readers go).
    let rate: u64 = env_or("READ_RATE", 100);
    for k in 0..4 {
        let (ok, failed, slowest, stopped, errors) = (
            ok.clone(),
            failed.clone(),
            slowest.clone(),
            stopped.clone(),
            errors.clone(),
        );
        let mut client = InstanceServiceClient::new(first.grpc.clone());
        let names = names.clone();
        readers.push(tokio::spawn(async move {
            let mut i = k;
            let mut pace =
                (rate > 0).then(|| tokio::time::interval(Duration::from_micros(4_000_000 / rate)));
            while !*stopped.borrow() {
                if let Some(p) = pace.as_mut() {
                    p.tick().await;
                }
                let name = names[i % names.len()].clone();
                i += 1;
                let t = Instant::now();
                let got = client
                    .get_instance(bearer(tonic::Request::new(GetInstanceRequest { name })))
                    .await;
                slowest.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                match got {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        let mut seen = errors.lock();
                        if seen.len() < 3 {
                            seen.push(format!(
                                "{:?} after {} ms: {}",
                                e.code(),
                                t.elapsed().as_millis(),
                                e.message()
                            ));
                        }
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed = Instant::now();
    victim.proc.kill();
    let victim_name = victim.name.clone();
    loop {
        let now = owners(host).await;
        if theirs
            .iter()
            .all(|i| now.get(i).is_some_and(|o| *o != victim_name))
        {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(lease * 4 + 30),
            "{victim_name}'s instances were not taken over"
        );
        tokio::time::sleep(common::procs::poll_every(n).min(Duration::from_secs(1)) / 2).await;
    }
    let moved = killed.elapsed();
    let mut client = InstanceServiceClient::new(first.grpc.clone());
    for i in &theirs {
        client
            .get_instance(bearer(tonic::Request::new(GetInstanceRequest {
                name: i.clone(),
            })))
            .await
            .expect("answered by the new owner");
    }
    let answered = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.send_replace(true);
    for r in readers {
        let _ = r.await;
    }
    println!(
        "  handoff: {victim_name} SIGKILLed (a {lease} s Lease), its {} instances recorded for live replicas after {:.1} s and answering from them after {:.1} s (goal: the Lease plus one probe); reads through {}: {} answered, {} failed (goal: 0), the slowest {} ms",
        theirs.len(),
        moved.as_secs_f64(),
        answered.as_secs_f64(),
        first.name,
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        slowest.load(Ordering::Relaxed)
    );
    for e in errors.lock().iter() {
        println!("    failed: {e}");
    }
}

async fn measure(
    replicas_n: usize,
    per_replica: usize,
    clusters: usize,
    starts: Option<usize>,
    last: bool,
) -> Row {
    let n = replicas_n * per_replica;
    let dir = tempfile::tempdir().expect("tempdir");
    if std::env::var_os("KEEP").is_some() {
        println!("  (logs kept in {})", dir.path().display());
    }
    let fleet = SimFleet::start(dir.path(), n, clusters, 0).await;
    let shared = Shared {
        dir: dir.path().to_path_buf(),
        host_kubeconfig: fleet.host_kubeconfig(),
        files: ServingFiles::write(dir.path(), TOKEN),
        lease: env_or("LEASE_SECS", 15),
        starts,
    };
    grant_ops_admin(&fleet.host).await;
    let start = Instant::now();
    let mut replicas = Vec::new();
    for i in 1..=replicas_n {
        replicas.push(replica(&shared, &format!("replica-{i}")).await);
    }
    fleet
        .all_running(
            n,
            start,
            Duration::from_secs(900),
            &shared.dir.join("replica-1.log"),
        )
        .await;
    let running_after = start.elapsed();
    loop {
        if owners(&fleet.host).await.len() == n {
            break;
        }
        tokio::time::sleep(common::procs::poll_every(n)).await;
    }
    // Settle: the first stats and status writes after Running.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let owned = owners(&fleet.host).await;
    let mut row = Row {
        replicas: replicas_n,
        instances: n,
        running_after,
        rss_mib: Vec::new(),
        sockets: Vec::new(),
        owned: Vec::new(),
        search: search_percentiles(&replicas[0], env_or("SEARCH_CALLS", 200)).await,
    };
    for r in &replicas {
        let (rss, _, sockets) = usage(r.proc.0.id());
        row.rss_mib.push(rss as f64 / 1024.0);
        row.sockets.push(sockets);
        row.owned
            .push(owned.values().filter(|o| **o == r.name).count());
    }
    print_row(&row);
    let (sim_rss, _, sim_files) = usage(fleet.proc.0.id());
    println!(
        "  the simulator: {:.0} MiB resident ({:.0} KiB per instance), {sim_files} open sockets",
        sim_rss as f64 / 1024.0,
        sim_rss as f64 / n as f64
    );
    if replicas_n > 1 {
        hop(&shared, &replicas, &owned, env_or("HOP_CALLS", 1000)).await;
    }
    if last && replicas_n > 1 {
        handoff(&fleet.host, &mut replicas, shared.lease).await;
    }
    drop(replicas);
    drop(fleet);
    if std::env::var_os("KEEP").is_some() {
        let _ = dir.keep();
    }
    row
}

fn print_row(r: &Row) {
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join("/")
    };
    let max = r.owned.iter().copied().max().unwrap_or(0) as f64;
    let mean = r.instances as f64 / r.replicas as f64;
    let per_instance: Vec<f64> = r
        .rss_mib
        .iter()
        .zip(&r.owned)
        .map(|(m, o)| m * 1024.0 / (*o).max(1) as f64)
        .collect();
    println!(
        "{:>8} {:>9} {:>11.1}s {:>16} {:>16} {:>12} {:>10} {:>9.2} {:>16}",
        r.replicas,
        r.instances,
        r.running_after.as_secs_f64(),
        list(&r.rss_mib),
        list(&per_instance),
        r.sockets
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        r.owned
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("/"),
        max / mean,
        format!("{:.1}/{:.1} ms", r.search.0, r.search.1),
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let per_replica: usize = env_or("PER_REPLICA", 100);
    let clusters: usize = env_or("CLUSTERS", 5);
    let replicas: Vec<usize> = std::env::var("REPLICAS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 3]);
    println!(
        "kairship run --shards (all roles, TLS, token auth) x R against one kairship sim of R x {per_replica} instances, {clusters} member clusters each, every process on its own"
    );
    println!(
        "{:>8} {:>9} {:>12} {:>16} {:>16} {:>12} {:>10} {:>9} {:>16}",
        "REPLICAS",
        "INSTANCES",
        "ALL RUNNING",
        "RSS MiB (each)",
        "KiB/OWNED",
        "SOCKETS",
        "OWNED",
        "MAX/MEAN",
        "SEARCH p50/p99"
    );
    // Several values side by side: each a group of rows, the handoff measured in each.
    let starts: Vec<Option<usize>> = match std::env::var("STARTS") {
        Ok(v) => v.split(',').map(|s| s.trim().parse().ok()).collect(),
        Err(_) => vec![None],
    };
    let most = replicas.iter().copied().max().unwrap_or(1);
    for s in starts {
        if let Some(n) = s {
            println!("--instances-starting-at-once={n}");
        }
        let mut rows = Vec::new();
        for (k, r) in replicas.iter().enumerate() {
            let last = *r == most && !replicas[k + 1..].contains(&most);
            rows.push(measure(*r, per_replica, clusters, s, last).await);
        }
        compare_to_single(&rows);
    }
}

fn compare_to_single(rows: &[Row]) {
    if let Some(single) = rows.iter().find(|r| r.replicas == 1) {
        let base = single.rss_mib.first().copied().unwrap_or(0.0);
        for r in rows.iter().filter(|r| r.replicas > 1) {
            let worst = r.rss_mib.iter().copied().fold(0.0, f64::max);
            println!(
                "{} replicas with {}x the instances: the largest replica holds {:.2}x the single replica's memory (goal: at most 1.10x, 1/N of one replica holding them all plus 10%)",
                r.replicas,
                r.replicas,
                worst / base.max(1.0)
            );
        }
    }
}
