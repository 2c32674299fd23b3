//! What a replica's memory limit sees of Kairship's caches: the resident memory a fresh
//! `kairship run` process (its own heap, nothing cached before) grows by per cached
//! Deployment, filled two ways side by side:
//! - by the initial list: the instance already holds the objects when the child resumes it;
//! - by watch events: the objects are created while the child watches, in steps it keeps
//!   up with, then churned (every object updated twice and a tenth deleted and recreated,
//!   per round), as a replica that has run for hours holds them.
//!
//! Each row prints the resident growth (`VmRSS`) and the allocator's own count of the
//! bytes it handed out (`kairship_heap_allocated_bytes`), so the gap between what is kept
//! and what is resident is visible. The list-filled child's read path is timed too (a
//! label-selected and a whole LIST), with its own page faults per request: a setting
//! that saves memory by giving pages back pays for them in faults on the next request.
//! The simulated fleet runs in this process, so the child's memory is Kairship's alone.
//! Each allocator setting is a fresh child per way of filling, against its own instance,
//! printed side by side in one run.
//!
//! Figures only; nothing is asserted about memory. Run: `cargo bench --bench
//! cache_resident` (OBJECTS=n, default 100000; CHURN=rounds, default 3; ALLOCATORS=all
//! runs every allocator setting, or rows of `SETTINGS` by number, `0,3`; KEEP=1 keeps the
//! children's logs).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

#[allow(dead_code)]
mod common;
use common::cache::{
    cached_count, deployments, get_as, json_size, set_paused, wait_synced, DEPLOYS, DEPLOY_KIND,
    TABLE,
};
use common::procs::{
    free_port, grant_ops_admin, kairship_with_env, minor_faults, scrape_gauge, settle_process,
    usage, Proc, ServingFiles,
};
use common::BenchFleet;
use kairship_sim::patch::PatchKind;
use kairship_sim::store::DeleteWith;

const TOKEN: &str = "cache-resident-token";
/// The instance filled before the child resumes it (the list rows).
const LISTED: &str = "karmada-1";
/// Objects created per step of a watch fill, the child catching up before the next.
const STEP: usize = 2_000;

type Setting = (&'static str, &'static [(&'static str, &'static str)]);

/// The child's environment for each row: the allocator settings compared. As built,
/// Kairship fixes glibc's mmap threshold at 128 KiB and its trim threshold at 1 MiB
/// (`kairship_heap::configure`); other rows hold the mmap threshold where glibc's own
/// sliding one ends up, 32 MiB, or trim at glibc's default (128 KiB) or 4 MiB.
/// (On 2026-11-27 jemalloc 5.3, preloaded, kept 1.0-1.05x what glibc's malloc kept here.)
const SETTINGS: &[Setting] = &[
    ("glibc malloc (as built)", &[]),
    ("MALLOC_ARENA_MAX=2", &[("MALLOC_ARENA_MAX", "2")]),
    (
        "mmap threshold 32 MiB",
        &[("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=33554432")],
    ),
    (
        "trim threshold 128 KiB",
        &[(
            "GLIBC_TUNABLES",
            "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072",
        )],
    ),
    (
        "trim threshold 4 MiB",
        &[(
            "GLIBC_TUNABLES",
            "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=4194304",
        )],
    ),
];

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn objects() -> usize {
    env_or("OBJECTS", 100_000)
}

/// Deployment `i` as seeded, with the annotation churn rewrites (same length each round,
/// so a churned object is the size of a fresh one).
fn deployment(i: usize) -> serde_json::Value {
    let mut d = deployments(i..i + 1).next().expect("one deployment");
    d["metadata"]["annotations"] = json!({"churn": "round-00"});
    d
}

fn name(i: usize) -> String {
    format!("web-{i:06}")
}

/// One measurement of the child: resident and allocated KiB.
#[derive(Clone, Copy)]
struct Sample {
    rss: u64,
    heap: u64,
}

/// A `kairship run` child caching one instance, and a client of its proxy.
struct Child {
    _proc: Proc,
    pid: u32,
    probes: u16,
    proxy: kube::Client,
}

impl Child {
    async fn start(
        bench: &BenchFleet,
        dir: &Path,
        files: &ServingFiles,
        row: &str,
        env: &[(&str, &str)],
        instance: &str,
    ) -> Self {
        let (https, probes) = (free_port(), free_port());
        let host_kubeconfig = bench.dir.path().join("kubeconfigs/host.kubeconfig");
        let path = |p: &Path| p.to_str().expect("utf-8 path").to_string();
        let args: Vec<String> = [
            "run",
            "--kubeconfig",
            &path(&host_kubeconfig),
            "--identity",
            &format!("bench-{row}"),
            "--namespace",
            "kairship-system",
            "--leader-elect-namespace",
            "kairship-system",
            "--token-auth-file",
            &path(&files.tokens),
            // One replica: every instance is its own.
            "--shards=false",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(files.listen_args(free_port(), https, probes))
        .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let proc = kairship_with_env(&args, env, &dir.join(format!("run-{row}.log")));
        let pid = proc.0.id();
        let server = format!(
            "https://127.0.0.1:{https}/apis/kairship.io/v1alpha1/instances/{instance}/proxy"
        );
        let kubeconfig = dir.join(format!("proxy-{row}.kubeconfig"));
        kairship_wire::kubeconfig::write(
            &kubeconfig,
            &kairship_wire::kubeconfig::build(instance, &server, &files.ca_pem, TOKEN),
        )
        .expect("kubeconfig");
        let proxy = common::client(&kubeconfig).await;
        // Up, leading, the paused instance seen: then quiet.
        tokio::time::sleep(Duration::from_secs(3)).await;
        Self {
            _proc: proc,
            pid,
            probes,
            proxy,
        }
    }

    /// Once the child is quiet.
    async fn sample(&self) -> Sample {
        settle_process(self.pid).await;
        let heap = scrape_gauge(self.probes, "kairship_heap_allocated_bytes")
            .await
            .unwrap_or(0.0);
        Sample {
            rss: usage(self.pid).0,
            heap: (heap / 1024.0) as u64,
        }
    }

    /// Kairship's own read path, apart from the client's: `calls` GETs of `path`, the
    /// p50 and the child's minor page faults per request (buffers mapped afresh, or pages
    /// given back to the system and touched again).
    async fn reads(&self, path: &str, calls: usize) -> (Duration, f64) {
        let faults = minor_faults(self.pid);
        let mut times: Vec<Duration> = Vec::with_capacity(calls);
        for _ in 0..calls {
            times.push(get_as(&self.proxy, path, false, "application/json").await);
        }
        let faults = minor_faults(self.pid).saturating_sub(faults);
        times.sort();
        (times[times.len() / 2], faults as f64 / calls.max(1) as f64)
    }

    /// A JSON and a Table LIST of every Deployment, through the proxy.
    async fn list_both(&self) {
        get_as(&self.proxy, DEPLOYS, false, "application/json").await;
        get_as(&self.proxy, DEPLOYS, false, TABLE).await;
    }
}

/// Until the cached copy of Deployment `name` carries churn annotation `value`.
async fn wait_annotated(c: &kube::Client, name: &str, value: &str) {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::default_namespaced_with(
        c.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "apps",
            "v1",
            "Deployment",
        )),
    );
    let start = Instant::now();
    loop {
        if let Ok(d) = api.get(name).await {
            if d.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("churn"))
                .map(String::as_str)
                == Some(value)
            {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "{name} not at {value} after 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Until the cache serves exactly `n` Deployments.
async fn wait_count(c: &kube::Client, n: usize) {
    let start = Instant::now();
    while cached_count(c, DEPLOYS).await != Some(n) {
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "{n} Deployments not cached after 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes to one instance's store of Deployments, as its own clients would.
struct Writer {
    instance: std::sync::Arc<kairship_sim::fleet::Instance>,
    def: std::sync::Arc<kairship_wire::resource::ResourceDef>,
}

impl Writer {
    fn of(bench: &BenchFleet, instance: &str) -> Self {
        let instance = bench.fleet.instance(instance).expect("instance");
        let (group, version, plural) = DEPLOY_KIND;
        let def = instance
            .server
            .store
            .lookup(group, version, plural)
            .expect("kind served");
        Self { instance, def }
    }

    fn store(&self) -> &kairship_sim::store::Store {
        &self.instance.server.store
    }

    fn create(&self, i: usize) {
        self.store()
            .create(&self.def, Some("default"), deployment(i))
            .expect("create");
    }

    fn annotate(&self, i: usize, value: &str) {
        let body = json!({"metadata": {"annotations": {"churn": value}}}).to_string();
        self.store()
            .patch(
                &self.def,
                Some("default"),
                &name(i),
                PatchKind::Merge,
                body.as_bytes(),
                false,
            )
            .expect("patch");
    }

    fn delete(&self, i: usize) {
        self.store()
            .delete(&self.def, Some("default"), &name(i), DeleteWith::default())
            .expect("delete");
    }
}

/// Fills an empty instance by watch events: created in steps the child keeps up with.
async fn fill_by_watch(child: &Child, w: &Writer, n: usize) {
    for start in (0..n).step_by(STEP) {
        let end = (start + STEP).min(n);
        (start..end).for_each(|i| w.create(i));
        wait_count(&child.proxy, end).await;
    }
}

/// One round of churn: every object updated twice, then a tenth deleted and recreated.
async fn churn(child: &Child, w: &Writer, n: usize, round: usize) {
    for pass in 0..2 {
        let value = format!("round-{:02}", (round * 2 + pass + 1) % 100);
        for start in (0..n).step_by(STEP) {
            let end = (start + STEP).min(n);
            (start..end).for_each(|i| w.annotate(i, &value));
            wait_annotated(&child.proxy, &name(end - 1), &value).await;
        }
    }
    let tenth: Vec<usize> = (round % 10..n).step_by(10).collect();
    for chunk in tenth.chunks(STEP) {
        chunk.iter().for_each(|&i| w.delete(i));
        wait_count(&child.proxy, n - chunk.len()).await;
        chunk.iter().for_each(|&i| w.create(i));
        wait_count(&child.proxy, n).await;
    }
}

fn per_object(from: u64, to: u64, n: usize) -> f64 {
    to.saturating_sub(from) as f64 * 1024.0 / n as f64
}

fn print_row(setting: &str, way: &str, before: Sample, after: &[(&str, Sample)], n: usize) {
    let cells: Vec<String> = after
        .iter()
        .map(|(_, s)| {
            format!(
                "{:>7.0} ({:>5.0})",
                per_object(before.rss, s.rss, n),
                per_object(before.heap, s.heap, n)
            )
        })
        .collect();
    println!(
        "  {:<24} {:<14} {:>6} MiB {}",
        setting,
        way,
        before.rss / 1024,
        cells.join(" ")
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = objects();
    let rounds = env_or("CHURN", 3);
    let settings: Vec<Setting> = match std::env::var("ALLOCATORS").as_deref() {
        Ok("all") => SETTINGS.to_vec(),
        // Rows of SETTINGS by number (0 is as built).
        Ok(rows) => rows
            .split(',')
            .filter_map(|r| SETTINGS.get(r.trim().parse::<usize>().ok()?).copied())
            .collect(),
        Err(_) => SETTINGS[..1].to_vec(),
    };
    // One instance filled before resuming, and an empty one per setting for the watch.
    let bench = BenchFleet::start(1 + settings.len()).await;
    for i in 1..=1 + settings.len() {
        set_paused(&bench.host, &format!("karmada-{i}"), true).await;
    }
    let listed = Writer::of(&bench, LISTED);
    (0..n).for_each(|i| listed.create(i));
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = if std::env::var_os("KEEP").is_some() {
        let dir = temp.keep();
        println!("  (logs kept in {})", dir.display());
        dir
    } else {
        temp.path().to_path_buf()
    };
    let files = ServingFiles::write(&dir, TOKEN);
    grant_ops_admin(&bench.host).await;
    for i in 1..=1 + settings.len() {
        // Each instance decides what the caller may read, as a real one does.
        kairship::bootstrap::apply_instance_rbac(
            &bench.fleet_client(&format!("karmada-{i}")).await,
        )
        .await
        .expect("instance RBAC applies");
    }
    println!(
        "kairship run (a fresh process, TLS, token auth) caching one instance of {n} Deployments served by a simulator in the bench's process; growth of the kairship process per Deployment, resident (allocated by the allocator's count) in B (goal: resident <= 1536 B both ways)"
    );
    println!(
        "  {:<24} {:<14} {:>10} {:>15} {:>15}   churned ({rounds} rounds of every object updated twice, a tenth deleted and recreated)",
        "ALLOCATOR", "FILLED BY", "RSS BEFORE", "SYNCED", "AFTER LISTS"
    );
    let mut reads = Vec::new();
    for (row, &(label, env)) in settings.iter().enumerate() {
        // Filled by the initial list.
        let child = Child::start(&bench, &dir, &files, &format!("list-{row}"), env, LISTED).await;
        let list_before = child.sample().await;
        set_paused(&bench.host, LISTED, false).await;
        wait_synced(&child.proxy, DEPLOYS, n).await;
        if row == 0 {
            let json = json_size(&child.proxy, &format!("{DEPLOYS}/{}", name(42))).await;
            println!("  (each Deployment is {json} B of JSON as served)");
        }
        let synced = child.sample().await;
        child.list_both().await;
        let fresh = child.sample().await;
        let selected = child
            .reads(&format!("{DEPLOYS}?labelSelector=shard%3D3"), 50)
            .await;
        let all = child.reads(DEPLOYS, 5).await;
        let read = child.sample().await;
        set_paused(&bench.host, LISTED, true).await;
        drop(child);
        print_row(
            label,
            "initial list",
            list_before,
            &[("synced", synced), ("listed", fresh)],
            n,
        );
        reads.push((
            label,
            selected,
            all,
            per_object(list_before.rss, read.rss, n),
        ));
        let fresh_growth = fresh.rss.saturating_sub(list_before.rss).max(1);

        // Filled by watch events, then churned.
        let instance = format!("karmada-{}", row + 2);
        let child = Child::start(
            &bench,
            &dir,
            &files,
            &format!("watch-{row}"),
            env,
            &instance,
        )
        .await;
        set_paused(&bench.host, &instance, false).await;
        wait_synced(&child.proxy, DEPLOYS, 0).await;
        let before = child.sample().await;
        let writer = Writer::of(&bench, &instance);
        let started = Instant::now();
        fill_by_watch(&child, &writer, n).await;
        let took = started.elapsed();
        let synced = child.sample().await;
        child.list_both().await;
        let listed_after = child.sample().await;
        print_row(
            label,
            "watch events",
            before,
            &[("synced", synced), ("listed", listed_after)],
            n,
        );
        eprintln!("  ({label}: {n} created while watched in {took:.0?})");
        for round in 0..rounds {
            let started = Instant::now();
            churn(&child, &writer, n, round).await;
            child.list_both().await;
            let s = child.sample().await;
            println!(
                "  {:<24} {:<14} after round {}: {:.0} B ({:.0}) per object, {:.2}x the fresh list-filled child after its LISTs ({:.0?})",
                label,
                "churn",
                round + 1,
                per_object(before.rss, s.rss, n),
                per_object(before.heap, s.heap, n),
                s.rss.saturating_sub(before.rss) as f64 / fresh_growth as f64,
                started.elapsed(),
            );
        }
        set_paused(&bench.host, &instance, true).await;
        drop(child);
    }
    println!(
        "read path of the list-filled child (kairship's own page faults; p50 includes the client in the bench's process):"
    );
    for (label, selected, all, resident) in reads {
        println!(
            "  {label:<24} label-selected LIST ({}) p50 {:>7.2?}, {:>5.0} faults/req; LIST all p50 {:>7.0?}, {:>6.0} faults/req; then {resident:.0} B resident per object",
            n / 100,
            selected.0,
            selected.1,
            all.0,
            all.1,
        );
    }
}
