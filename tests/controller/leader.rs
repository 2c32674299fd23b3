//! Two replicas against one host: exactly one leads, only the leader writes status, and
//! killing it hands leadership over within the lease duration.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kairship::crd::Phase;
use kairship::host::leader::LeaderConfig;

use crate::common::eventually;
use crate::harness::Env;
use crate::partition::Partition;

fn lease(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
        ..LeaderConfig::new("kube-system", "kairship-controller-manager", identity)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_writes_and_a_killed_leader_hands_over() {
    let env = Env::start(1).await;
    env.create_external("karmada-1").await;
    let a = env.start_tree(Some(lease("replica-a")), "replica-a").await;
    let b = env.start_tree(Some(lease("replica-b")), "replica-b").await;
    eventually(Duration::from_secs(10), "exactly one leader", || async {
        (a.leadership().is_leader() ^ b.leadership().is_leader()).then_some(())
    })
    .await;
    let (leader, follower) = if a.leadership().is_leader() {
        (a, b)
    } else {
        (b, a)
    };
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    // Give the follower time to (wrongly) write, then compare.
    let seen = env.status("karmada-1").await.and_then(|s| s.last_sync_time);
    eventually(Duration::from_secs(10), "more status writes", || async {
        env.status("karmada-1")
            .await
            .filter(|s| s.last_sync_time != seen)
    })
    .await;
    assert!(
        leader.counters().status_writes.load(Ordering::Relaxed) > 0,
        "the leader writes status"
    );
    assert_eq!(
        follower.counters().status_writes.load(Ordering::Relaxed),
        0,
        "the follower never writes"
    );
    assert!(!follower.leadership().is_leader());

    let killed_at = Instant::now();
    leader.kill();
    eventually(
        Duration::from_secs(10),
        "the follower to take over",
        || async { follower.leadership().is_leader().then_some(()) },
    )
    .await;
    // A figure, not an assertion: this machine is shared (the bound is the lease, 3 s).
    eprintln!(
        "handover after the leader was killed: {:?}",
        killed_at.elapsed()
    );
    eventually(
        Duration::from_secs(10),
        "the new leader to write status",
        || async { (follower.counters().status_writes.load(Ordering::Relaxed) > 0).then_some(()) },
    )
    .await;
    follower.shutdown().await;
}

/// A `kairship run` child process, killed (SIGKILL) when dropped so no test leaves one.
struct Replica(std::process::Child);

impl Replica {
    fn start(env: &Env, identity: &str) -> Self {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_kairship"))
            .args(["run", "--role", "controller-manager", "--kubeconfig"])
            .arg(env.sim.kubeconfig("host"))
            .args([
                "--identity",
                identity,
                "--leader-elect-lease-duration-secs",
                "3",
                "--leader-elect-renew-deadline-secs",
                "2",
                "--leader-elect-retry-period-secs",
                "1",
                "--probes-addr",
                "127.0.0.1:0",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("kairship run starts");
        Self(child)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn holder(env: &Env) -> Option<String> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(env.host.clone(), "kube-system");
    let holder = leases
        .get_opt("kairship-controller-manager")
        .await
        .ok()??
        .spec?
        .holder_identity?;
    // The replica, not its process.
    Some(kairship::host::leader::replica_of(&holder).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_elect_one_leader_and_sigkill_hands_over() {
    let env = Env::start(1).await;
    env.create_external("karmada-1").await;
    let mut a = Some(Replica::start(&env, "process-a"));
    let mut b = Some(Replica::start(&env, "process-b"));
    let first = eventually(Duration::from_secs(20), "a lease holder", || async {
        holder(&env).await
    })
    .await;
    assert!(first == "process-a" || first == "process-b", "{first}");
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    // The holder stays put while both run.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        holder(&env).await.as_deref(),
        Some(first.as_str()),
        "leadership is stable"
    );

    let killed_at = Instant::now();
    if first == "process-a" {
        a.take()
    } else {
        b.take()
    };
    let next = eventually(
        Duration::from_secs(15),
        "the other process to take the lease",
        || async { holder(&env).await.filter(|h| *h != first) },
    )
    .await;
    // A figure, not an assertion: this machine is shared (the bound is the lease, 3 s,
    // plus the 1 s retry; the wait above fails after 15 s).
    eprintln!(
        "{next} took over {:?} after the leader was killed",
        killed_at.elapsed()
    );
    // The new leader writes status: at once when it differs, else at the next refresh of
    // lastSyncTime (`status_refresh`, 30 s in `kairship run`), so the wait covers one.
    let seen = env.status("karmada-1").await.and_then(|s| s.last_sync_time);
    eventually(
        Duration::from_secs(45),
        "status written by the new leader",
        || async {
            env.status("karmada-1")
                .await
                .filter(|s| s.last_sync_time != seen)
        },
    )
    .await;
    drop((a, b));
}

/// The leader cut off from the host while its process lives (a network partition): it
/// stops leading within the renew deadline, the other replica takes over, and the status
/// write the old leader had sent into the partition, delivered late after the heal, is
/// refused by its resourceVersion precondition: the Instance's lastSyncTime never goes
/// back to the old leader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leaders_late_write_does_not_land() {
    use futures::StreamExt;

    let env = Env::start(1).await;
    env.create_external("karmada-1").await;
    let partition = Partition::start(env.host.clone()).await;
    let cut_host = partition.client();

    let a = kairship::actors::tree::Tree::start(
        cut_host,
        Some(lease("replica-a")),
        "replica-a",
        crate::harness::fast_settings(),
    )
    .await
    .expect("tree starts");
    eventually(Duration::from_secs(10), "replica-a leads", || async {
        a.leadership().is_leader().then_some(())
    })
    .await;
    let b = env.start_tree(Some(lease("replica-b")), "replica-b").await;
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    eventually(
        Duration::from_secs(10),
        "replica-a writes status",
        || async { (a.counters().status_writes.load(Ordering::Relaxed) > 0).then_some(()) },
    )
    .await;

    // Every lastSyncTime the host stores, in order, seen by a watch from outside.
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let recorder = {
        let seen = seen.clone();
        let stream = kube::runtime::watcher(
            env.instances(),
            kube::runtime::watcher::Config::default().fields("metadata.name=karmada-1"),
        );
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(stream));
            while let Some(Ok(i)) = stream.next().await {
                if let Some(t) = i.status.and_then(|s| s.last_sync_time) {
                    seen.lock().push(t);
                }
            }
        })
    };

    partition.hold();
    eventually(Duration::from_secs(10), "replica-a steps down", || async {
        (!a.leadership().is_leader()).then_some(())
    })
    .await;
    eventually(Duration::from_secs(10), "replica-b takes over", || async {
        b.leadership().is_leader().then_some(())
    })
    .await;
    let b_writes = b.counters().status_writes.load(Ordering::Relaxed);
    eventually(
        Duration::from_secs(10),
        "replica-b writes status",
        || async { (b.counters().status_writes.load(Ordering::Relaxed) > b_writes).then_some(()) },
    )
    .await;

    partition.heal();
    eventually(
        Duration::from_secs(10),
        "held requests delivered",
        || async { (partition.delivered_late() > 0).then_some(()) },
    )
    .await;
    // Two more of replica-b's writes: anything delivered late has been acted on by then.
    let b_writes = b.counters().status_writes.load(Ordering::Relaxed);
    eventually(
        Duration::from_secs(15),
        "replica-b writes twice more",
        || async {
            (b.counters().status_writes.load(Ordering::Relaxed) >= b_writes + 2).then_some(())
        },
    )
    .await;
    recorder.abort();
    let seen = seen.lock().clone();
    eprintln!(
        "delivered late: {}, lastSyncTime seen: {seen:?}",
        partition.delivered_late()
    );
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "lastSyncTime went back: a deposed leader's write landed: {seen:?}"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// The elector is supervised: a panic inside it is caught and it restarts with back-off
/// (not leading meanwhile), leadership comes back, and the actor tree reports the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_elector_is_restarted_and_reported() {
    let env = Env::start(1).await;
    let tree = env.start_tree(Some(lease("replica-a")), "replica-a").await;
    eventually(Duration::from_secs(10), "replica-a leads", || async {
        tree.leadership().is_leader().then_some(())
    })
    .await;
    tree.leadership().inject_elector_panic();
    let row = eventually(
        Duration::from_secs(10),
        "the elector's restart reported",
        || async {
            tree.handle()
                .actors()
                .await
                .ok()?
                .into_iter()
                .find(|a| a.name == "leader-elector" && a.restart_count == 1)
        },
    )
    .await;
    // A task of the process beside the root, with its own run time since the restart.
    assert_eq!(row.parent, "");
    let root = tree
        .handle()
        .actors()
        .await
        .expect("actors")
        .into_iter()
        .find(|a| a.name == "root")
        .expect("root");
    assert!(row.uptime < root.uptime, "{row:?} vs {root:?}");
    assert!(
        row.last_error
            .as_deref()
            .is_some_and(|e| e.contains("chaos")),
        "{row:?}"
    );
    eventually(Duration::from_secs(10), "leading again", || async {
        tree.leadership().is_leader().then_some(())
    })
    .await;
    tree.shutdown().await;
}
