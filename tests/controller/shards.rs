//! Sharded replicas against one host: each instance is run by exactly the replica the
//! ring gives it to, recorded on the Instance; a replica joining takes its share, one
//! leaving hands its instances over at once, and one killed loses them within its Lease.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kairship::actors::supervision::ActorState;
use kairship::actors::tree::{Tree, TreeHandle};
use kairship::context::Settings;
use kairship::crd::Phase;
use kairship::host::leader::LeaderConfig;
use kairship::host::shards::handoff::OWNER_ANNOTATION;
use kairship::host::shards::{ring, ShardConfig};
use parking_lot::Mutex;

use crate::common::eventually;
use crate::harness::{fast_settings, Env, NS};

const INSTANCES: usize = 6;

fn sharded(replica: &str) -> (Settings, LeaderConfig) {
    let identity = format!("{replica}_1");
    let settings = Settings {
        shards: Some(ShardConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(300),
            ..ShardConfig::new(NS, replica, &identity)
        }),
        ..fast_settings()
    };
    let leader = LeaderConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(300),
        ..LeaderConfig::new(NS, "kairship-controller-manager", &identity)
    };
    (settings, leader)
}

async fn start(env: &Env, replica: &str) -> Tree {
    let (settings, leader) = sharded(replica);
    env.start_tree_with(settings, Some(leader), replica).await
}

fn names() -> Vec<String> {
    (1..=INSTANCES).map(|i| format!("karmada-{i}")).collect()
}

/// The owner recorded on each Instance.
async fn recorded(env: &Env) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for n in names() {
        let i = env.instances().get(&n).await.expect("instance");
        let owner = i
            .metadata
            .annotations
            .and_then(|a| a.get(OWNER_ANNOTATION).cloned())
            .filter(|o| !o.is_empty());
        out.insert(n, owner);
    }
    out
}

/// The instances whose actor runs in `tree`.
async fn running(tree: &TreeHandle) -> Vec<String> {
    let mut out: Vec<String> = tree
        .actors()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.state == ActorState::Running)
        .filter_map(|a| a.instance)
        .collect();
    out.sort();
    out
}

/// Samples every replica's actors until stopped and answers the instances that ever ran
/// on two replicas at once (an actor stops before its record is cleared, so: none), and
/// those whose status read Pending again once Running (a handoff keeps the verdict).
fn overlaps(
    replicas: Arc<Mutex<Vec<TreeHandle>>>,
    instances: kube::Api<kairship::crd::Instance>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<String>, Vec<String>)> {
    tokio::spawn(async move {
        let (mut twice, mut flashed) = (Vec::new(), Vec::new());
        let mut ran = std::collections::BTreeSet::new();
        while !stop.load(Ordering::Relaxed) {
            if let Ok(list) = instances.list(&Default::default()).await {
                for i in list.items {
                    let name = i.metadata.name.clone().unwrap_or_default();
                    match i.status.map(|s| s.phase) {
                        Some(Phase::Running) => {
                            ran.insert(name);
                        }
                        Some(Phase::Pending) if ran.contains(&name) => flashed.push(name),
                        _ => {}
                    }
                }
            }
            let handles = replicas.lock().clone();
            let mut seen = BTreeMap::<String, usize>::new();
            for h in &handles {
                for n in running(h).await {
                    *seen.entry(n).or_default() += 1;
                }
            }
            twice.extend(seen.into_iter().filter(|(_, k)| *k > 1).map(|(n, _)| n));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (twice, flashed)
    })
}

/// Waits until every instance is recorded for, and runs only on, the replica the ring
/// gives it to among `replicas` (named as `trees`).
async fn settled(env: &Env, trees: &[(&str, &Tree)], within: Duration) {
    let replicas: Vec<&str> = trees.iter().map(|(r, _)| *r).collect();
    let want: BTreeMap<String, Option<String>> = names()
        .into_iter()
        .map(|n| {
            let owner = ring::owner(&n, &replicas).map(str::to_string);
            (n, owner)
        })
        .collect();
    eventually(
        within,
        &format!("instances shared out over {replicas:?}"),
        || async {
            if recorded(env).await != want {
                return None;
            }
            for (replica, tree) in trees {
                let mine: Vec<String> = want
                    .iter()
                    .filter(|(_, o)| o.as_deref() == Some(replica))
                    .map(|(n, _)| n.clone())
                    .collect();
                if running(&tree.handle()).await != mine {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_runs_on_its_owner_and_moves_when_replicas_join_leave_or_die() {
    let env = Env::start(INSTANCES).await;
    let a = start(&env, "replica-a").await;
    let b = start(&env, "replica-b").await;
    let sampled = Arc::new(Mutex::new(vec![a.handle(), b.handle()]));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = overlaps(sampled.clone(), env.instances(), stop.clone());
    for n in names() {
        env.create_external(&n).await;
    }
    // Both replicas get a share of these names (the ring's spread is tested in its own
    // module); a split of one side only would test nothing here.
    let split: Vec<_> = names()
        .iter()
        .map(|n| ring::owner(n, &["replica-a", "replica-b"]).map(str::to_string))
        .collect();
    assert!(split.contains(&Some("replica-a".into())) && split.contains(&Some("replica-b".into())));
    settled(
        &env,
        &[("replica-a", &a), ("replica-b", &b)],
        Duration::from_secs(20),
    )
    .await;
    for n in names() {
        env.wait_phase(&n, Phase::Running, Duration::from_secs(20))
            .await;
    }

    // A third replica joins: it takes its share, and only from the others' shares.
    let c = start(&env, "replica-c").await;
    sampled.lock().push(c.handle());
    let joined = Instant::now();
    settled(
        &env,
        &[("replica-a", &a), ("replica-b", &b), ("replica-c", &c)],
        Duration::from_secs(20),
    )
    .await;
    eprintln!(
        "a replica joined: its share moved in {:?}",
        joined.elapsed()
    );

    // One leaves on purpose: it releases its Lease, the others take over at once.
    let left = Instant::now();
    a.shutdown().await;
    settled(
        &env,
        &[("replica-b", &b), ("replica-c", &c)],
        Duration::from_secs(20),
    )
    .await;
    eprintln!(
        "a replica left: its instances moved in {:?}",
        left.elapsed()
    );

    // One dies: nothing is released, its instances move once its Lease (3 s) lapses.
    let killed = Instant::now();
    b.kill();
    settled(&env, &[("replica-c", &c)], Duration::from_secs(20)).await;
    eprintln!(
        "a replica was killed: its instances moved in {:?}",
        killed.elapsed()
    );
    // The survivor writes every instance's status.
    for n in names() {
        let before = env.status(&n).await.and_then(|s| s.last_sync_time);
        eventually(
            Duration::from_secs(10),
            &format!("{n}'s status written by replica-c"),
            || async {
                env.status(&n)
                    .await
                    .filter(|s| s.last_sync_time != before && s.phase == Phase::Running)
            },
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    let (twice, flashed) = sampler.await.expect("sampler");
    assert!(twice.is_empty(), "ran on two replicas at once: {twice:?}");
    assert!(
        flashed.is_empty(),
        "Pending again during a handoff: {flashed:?}"
    );
    c.shutdown().await;
}
