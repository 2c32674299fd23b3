//! Two replicas against one host: exactly one leads, only the leader writes status, and
//! killing it hands leadership over within the lease duration.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kairship::actors::leader::LeaderConfig;
use kairship::crd::Phase;

use crate::common::eventually;
use crate::harness::Env;

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
    let took = killed_at.elapsed();
    assert!(
        took <= Duration::from_secs(3) + Duration::from_secs(2),
        "handover within the lease duration (plus a retry): {took:?}"
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
    leases
        .get_opt("kairship-controller-manager")
        .await
        .ok()??
        .spec?
        .holder_identity
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
    let took = killed_at.elapsed();
    assert!(
        took <= Duration::from_secs(3 + 1 + 2),
        "{next} took over after {took:?}; the lease is 3 s, retry 1 s"
    );
    // The new leader writes status.
    let seen = env.status("karmada-1").await.and_then(|s| s.last_sync_time);
    eventually(
        Duration::from_secs(15),
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
