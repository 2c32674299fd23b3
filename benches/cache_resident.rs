//! What a replica's memory limit sees of Kairship's caches: the resident memory a fresh
//! `kairship run` process (its own heap, nothing cached before) grows by per cached
//! Deployment, from before the instance is resumed to synced, and after one JSON and one
//! Table LIST through its proxy. The simulated fleet runs in this process, so the child's
//! memory is Kairship's alone. Each allocator setting is a fresh child against the same
//! instance, printed side by side in one run.
//!
//! Figures only; nothing is asserted about memory. Run: `cargo bench --bench
//! cache_resident` (OBJECTS=n, default 100000; KEEP=1 keeps the children's logs).

use std::path::Path;

#[allow(dead_code)]
mod common;
use common::cache::{
    deployments, get_as, json_size, set_paused, wait_synced, DEPLOYS, DEPLOY_KIND, TABLE,
};
use common::procs::{
    free_port, grant_ops_admin, kairship_with_env, settle_process, usage, ServingFiles,
};
use common::BenchFleet;

const TOKEN: &str = "cache-resident-token";
const INSTANCE: &str = "karmada-1";

/// The child's environment for each row: the allocator settings compared.
/// (On 2026-11-27 jemalloc 5.3, preloaded, kept 1.0-1.05x what glibc's malloc kept here.)
const SETTINGS: &[(&str, &[(&str, &str)])] = &[
    ("glibc malloc (as built)", &[]),
    ("MALLOC_ARENA_MAX=2", &[("MALLOC_ARENA_MAX", "2")]),
];

fn objects() -> usize {
    std::env::var("OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// Resident KiB of the child: before the resume, synced, after the LISTs.
async fn measure(
    bench: &BenchFleet,
    dir: &Path,
    files: &ServingFiles,
    row: usize,
    (label, env): (&str, &[(&str, &str)]),
) -> [u64; 3] {
    let https = free_port();
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
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(files.listen_args(free_port(), https, free_port()))
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = kairship_with_env(&args, env, &dir.join(format!("run-{row}.log")));
    let pid = child.0.id();
    let server =
        format!("https://127.0.0.1:{https}/apis/kairship.io/v1alpha1/instances/{INSTANCE}/proxy");
    let kubeconfig = dir.join(format!("proxy-{row}.kubeconfig"));
    kairship_wire::kubeconfig::write(
        &kubeconfig,
        &kairship_wire::kubeconfig::build(INSTANCE, &server, &files.ca_pem, TOKEN),
    )
    .expect("kubeconfig");
    let proxy = common::client(&kubeconfig).await;
    // Up, leading, the paused instance seen: then quiet.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    settle_process(pid).await;
    let before = usage(pid).0;
    set_paused(&bench.host, INSTANCE, false).await;
    wait_synced(&proxy, DEPLOYS, objects()).await;
    if row == 0 {
        let json = json_size(&proxy, &format!("{DEPLOYS}/web-000042")).await;
        println!("  (each Deployment is {json} B of JSON as served)");
    }
    settle_process(pid).await;
    let synced = usage(pid).0;
    get_as(&proxy, DEPLOYS, false, "application/json").await;
    get_as(&proxy, DEPLOYS, false, TABLE).await;
    settle_process(pid).await;
    let listed = usage(pid).0;
    set_paused(&bench.host, INSTANCE, true).await;
    child.kill();
    eprintln!("  ({label}: done)");
    [before, synced, listed]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n = objects();
    let bench = BenchFleet::start(1).await;
    set_paused(&bench.host, INSTANCE, true).await;
    bench.seed(INSTANCE, DEPLOY_KIND, deployments(0..n));
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
    // The instance decides what the caller may read, as a real one does.
    kairship::bootstrap::apply_instance_rbac(&bench.fleet_client(INSTANCE).await)
        .await
        .expect("instance RBAC applies");
    println!(
        "kairship run (a fresh process, TLS, token auth) caching one instance of {n} Deployments served by a simulator in the bench's process; resident growth of the kairship process per Deployment (goal <= 1536 B)"
    );
    println!(
        "  {:<24} {:>12} {:>16} {:>18}",
        "ALLOCATOR", "RSS BEFORE", "SYNCED B/OBJ", "AFTER LISTS B/OBJ"
    );
    for (row, &setting) in SETTINGS.iter().enumerate() {
        let [before, synced, listed] = measure(&bench, &dir, &files, row, setting).await;
        let per = |kib: u64| kib.saturating_sub(before) as f64 * 1024.0 / n as f64;
        println!(
            "  {:<24} {:>9} MiB {:>16.0} {:>18.0}",
            setting.0,
            before / 1024,
            per(synced),
            per(listed)
        );
    }
}
