//! Panics are restarted with backoff; repeated panics degrade only their instance; a down
//! instance is Unreachable while the others keep syncing, and recovers by itself.

use std::time::Duration;

use kairship::actors::supervision::ActorState;
use kairship::crd::Phase;

use crate::common::eventually;
use crate::harness::{actor, Env};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_restarted_and_the_instance_returns_to_running() {
    let (env, tree) = Env::running(1).await;
    let before = tree
        .instance("karmada-1")
        .await
        .expect("lookup")
        .expect("live actor")
        .get_id();
    assert!(tree.inject_panic("karmada-1").await.expect("chaos"));
    let restarted = eventually(Duration::from_secs(10), "a restarted actor", || async {
        actor(&tree, "karmada-1")
            .await
            .filter(|a| a.restart_count == 1 && a.state == ActorState::Running)
    })
    .await;
    assert!(
        restarted
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("chaos")),
        "{restarted:?}"
    );
    let after = tree
        .instance("karmada-1")
        .await
        .expect("lookup")
        .expect("live actor")
        .get_id();
    assert_ne!(before, after, "a fresh actor took over");
    // The new actor syncs again: status keeps being written as Running.
    let first = env
        .wait_phase("karmada-1", Phase::Running, Duration::from_secs(10))
        .await
        .last_sync_time;
    eventually(
        Duration::from_secs(10),
        "a fresh sync after the restart",
        || async {
            env.status("karmada-1")
                .await
                .filter(|s| s.phase == Phase::Running && s.last_sync_time != first)
        },
    )
    .await;
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_panics_degrade_only_that_instance() {
    let (env, tree) = Env::running(2).await;
    // The test policy allows 3 restarts a minute; the 4th failure degrades.
    for round in 1..=4u32 {
        eventually(Duration::from_secs(10), "a live actor to panic", || async {
            tree.inject_panic("karmada-1")
                .await
                .ok()
                .filter(|sent| *sent)
        })
        .await;
        eventually(
            Duration::from_secs(10),
            "the failure to be counted",
            || async {
                actor(&tree, "karmada-1")
                    .await
                    .filter(|a| a.restart_count >= round)
            },
        )
        .await;
    }
    let degraded = eventually(Duration::from_secs(10), "karmada-1 Degraded", || async {
        actor(&tree, "karmada-1")
            .await
            .filter(|a| a.state == ActorState::Degraded)
    })
    .await;
    assert!(degraded.last_error.is_some());
    let status = env
        .wait_phase("karmada-1", Phase::Degraded, Duration::from_secs(10))
        .await;
    assert!(
        status.conditions.iter().any(|c| c.type_ == "Ready"
            && c.status == "False"
            && c.message.contains("restarted too often")),
        "{status:?}"
    );
    // The other instance is untouched and keeps syncing.
    let other = actor(&tree, "karmada-2").await.expect("karmada-2");
    assert_eq!((other.state, other.restart_count), (ActorState::Running, 0));
    let seen = env
        .wait_phase("karmada-2", Phase::Running, Duration::from_secs(5))
        .await
        .last_sync_time;
    eventually(
        Duration::from_secs(10),
        "karmada-2 to keep syncing",
        || async {
            env.status("karmada-2")
                .await
                .filter(|s| s.last_sync_time != seen)
        },
    )
    .await;
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_instance_is_unreachable_while_others_keep_syncing() {
    let (env, tree) = Env::running(2).await;

    let down = env.take_down("karmada-1").await;
    assert!(down
        .conditions
        .iter()
        .any(|c| c.type_ == "Reachable" && c.status == "False"));
    let mut last = env.status("karmada-2").await.and_then(|s| s.last_sync_time);
    for _ in 0..2 {
        last = eventually(
            Duration::from_secs(10),
            "karmada-2 to keep syncing while karmada-1 is down",
            || async {
                env.status("karmada-2")
                    .await
                    .filter(|s| s.phase == Phase::Running && s.last_sync_time != last)
                    .map(|s| s.last_sync_time)
            },
        )
        .await;
    }
    assert_eq!(
        actor(&tree, "karmada-1")
            .await
            .expect("actor")
            .restart_count,
        0,
        "unreachable is not a crash"
    );

    env.sim.clear_fault("karmada-1").await;
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sre_restart_replaces_the_actor_and_resyncs() {
    let (_env, tree) = Env::running(1).await;
    let before = tree
        .instance("karmada-1")
        .await
        .expect("lookup")
        .expect("actor")
        .get_id();
    tree.restart_instance("karmada-1").await.expect("restart");
    let after = tree
        .instance("karmada-1")
        .await
        .expect("lookup")
        .expect("actor");
    assert_ne!(before, after.get_id());
    let view = eventually(
        Duration::from_secs(10),
        "caches synced in the new actor",
        || async {
            let v =
                ractor::call_t!(after, kairship::actors::instance::InstanceMsg::View, 2000).ok()?;
            v.status
                .conditions
                .iter()
                .any(|c| c.type_ == "Synced" && c.status == "True")
                .then_some(v)
        },
    )
    .await;
    assert_eq!(view.status.stats.expect("stats").clusters_total, 2);
    assert!(matches!(
        tree.restart_instance("nope").await,
        Err(kairship::actors::tree::TreeError::NotFound(_))
    ));
    let snap = actor(&tree, "karmada-1").await.expect("snapshot");
    assert_eq!(
        (snap.state, snap.restart_count, snap.requested_restarts),
        (ActorState::Running, 0, 1),
        "a requested restart is not a failure, and is counted as requested"
    );
    tree.shutdown().await;
}
