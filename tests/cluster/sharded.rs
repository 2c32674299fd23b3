//! The chart switched to its default, sharded (the demo installs it with
//! `sharding.enabled=false` so that the leader-loss tests see every pod run every
//! instance): each instance is run by the
//! one pod recorded as its owner; clients of both instances keep reading, writing and
//! watching through the Service (whichever pod it picks passes each request to the owner)
//! while the pods are rolled by `helm upgrade` and while an owner is force-deleted.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::ha::{name, print_tallies, ready, ClusterDemo, NS};
use crate::readers::{Readers, Tally};
use crate::{helm, repo};

/// Each Instance's recorded owner (a pod name), if any.
fn owners(demo: &ClusterDemo) -> BTreeMap<String, String> {
    let list = demo.json(&["get", "instances", "-o", "json"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let owner = i["metadata"]["annotations"]["kairship.io/owner"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (
                i["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                owner,
            )
        })
        .collect()
}

/// Every instance recorded for a Ready pod of the current ones.
async fn owned_by_live_pods(demo: &ClusterDemo, within: Duration) -> BTreeMap<String, String> {
    demo.until("every instance owned by a Ready pod", within, || {
        let live: Vec<String> = demo.pods().iter().filter(|p| ready(p)).map(name).collect();
        let o = owners(demo);
        !o.is_empty() && o.values().all(|p| live.contains(p))
    })
    .await;
    owners(demo)
}

/// Readers on every instance the demo made.
async fn readers(demo: &ClusterDemo) -> Vec<Readers> {
    let n = demo.endpoints["instances"].as_array().map_or(0, Vec::len);
    let mut out = Vec::new();
    for i in 0..n {
        out.push(Readers::start_on(&demo.endpoints, i).await);
    }
    out
}

async fn stop(readers: Vec<Readers>) -> Vec<Tally> {
    let mut out = Vec::new();
    for r in readers {
        out.extend(r.stop().await);
    }
    out
}

async fn upgrade(demo: &ClusterDemo, sets: &[String]) {
    let chart = repo().join("deploy/chart/kairship").display().to_string();
    let mut args = vec![
        "upgrade",
        "kairship",
        &chart,
        "--namespace",
        NS,
        "--reuse-values",
        "--wait",
        "--timeout=10m",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    helm(Some(&demo.host), &args);
}

async fn new_pods_only(demo: &ClusterDemo, before: &[String]) {
    demo.until("only new pods left", Duration::from_secs(180), || {
        let pods = demo.pods();
        pods.len() == 3 && pods.iter().all(|p| !before.contains(&name(p)) && ready(p))
    })
    .await;
}

pub async fn sharded(demo: &ClusterDemo) {
    let before: Vec<String> = demo.pods().iter().map(name).collect();
    upgrade(demo, &["sharding.enabled=true".into()]).await;
    new_pods_only(demo, &before).await;
    let owned = owned_by_live_pods(demo, Duration::from_secs(120)).await;
    println!("sharding on: owners {owned:?}");

    // The pods rolled to a new tag under clients of every instance.
    let next = demo.tag_image("sharded");
    let before: Vec<String> = demo.pods().iter().map(name).collect();
    let clients = readers(demo).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    upgrade(demo, &[format!("image.tag={next}")]).await;
    new_pods_only(demo, &before).await;
    let owned = owned_by_live_pods(demo, Duration::from_secs(60)).await;
    let rolled = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tallies = stop(clients).await;
    println!(
        "sharded rolling upgrade: {:.0}s for three pods, owners now {owned:?}",
        rolled.as_secs_f64()
    );
    print_tallies(
        "  clients of every instance through the Service (goal: 0 failed)",
        &tallies,
    );
    for t in &tallies {
        assert!(t.ok > 0, "{} never succeeded: {t}", t.what);
    }
    let failed: u64 = tallies.iter().map(|t| t.failed).sum();
    assert_eq!(failed, 0, "requests failed while sharded pods were rolled");

    // An owner force-deleted: its instances move once its Lease lapses (15 s); requests
    // for them wait for the new owner (up to the Lease plus 2 s) instead of failing.
    let (instance, victim) = owned
        .iter()
        .next()
        .map(|(i, p)| (i.clone(), p.clone()))
        .expect("an owner");
    let clients = readers(demo).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = Instant::now();
    demo.kubectl(&[
        "-n",
        NS,
        "delete",
        "pod",
        &victim,
        "--grace-period=0",
        "--force",
        "--wait=false",
    ]);
    demo.until(
        &format!("{instance} owned by another pod"),
        Duration::from_secs(90),
        || {
            owners(demo)
                .get(&instance)
                .is_some_and(|o| !o.is_empty() && o != &victim)
        },
    )
    .await;
    let moved = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let tallies = stop(clients).await;
    println!(
        "sharded owner force-deleted: {instance} answered by its new owner after {:.1}s (goal: the 15 s Lease plus a probe)",
        moved.as_secs_f64()
    );
    print_tallies("  clients of every instance through the Service", &tallies);
    for t in &tallies {
        assert!(t.ok > 0, "{} never succeeded: {t}", t.what);
    }
}
