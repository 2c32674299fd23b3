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
