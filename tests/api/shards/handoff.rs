//! Instances changing hands under readers: a replica that stops gracefully hands its
//! instances over while it still serves, and one that dies is waited out (until its Lease
//! expires); either way no read that reached a live replica fails.

use std::time::{Duration, Instant};

use kairship::auth::AuthConfig;
use kairship::host::shards::ring;
use kairship::proto::GetInstanceRequest;

use super::{owner, replica, Authed, Replica, ADMIN};
use crate::common::eventually;
use crate::harness::Env;

/// Reads every instance through one replica, over and over, until stopped.
struct Readers {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Read>,
}

#[derive(Debug, Default)]
struct Read {
    answered: usize,
    failed: Vec<String>,
    slowest: Duration,
}

impl Readers {
    fn start(grpc: Authed, names: &[String]) -> Self {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let names = names.to_vec();
        let task = tokio::spawn(async move {
            let mut read = Read::default();
            while !*stopped.borrow() {
                for n in &names {
                    let started = Instant::now();
                    let got = grpc
                        .clone()
                        .get_instance(GetInstanceRequest { name: n.clone() })
                        .await;
                    read.slowest = read.slowest.max(started.elapsed());
                    match got {
                        Ok(_) => read.answered += 1,
                        Err(e) => read.failed.push(format!("{n}: {e:?}")),
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            read
        });
        Self { stop, task }
    }

    async fn stop(self) -> Read {
        self.stop.send_replace(true);
        self.task.await.expect("the readers")
    }
}

fn assert_none_failed(read: &Read, what: &str) {
    assert!(read.answered > 0, "{what}: nothing was read");
    assert!(
        read.failed.is_empty(),
        "{what}: {} of {} reads failed: {:?}",
        read.failed.len(),
        read.answered + read.failed.len(),
        read.failed
    );
    eprintln!(
        "{what}: {} reads, none failed, the slowest {:?}",
        read.answered, read.slowest
    );
}

async fn all_owned_by(env: &Env, names: &[String], by: &str) {
    for n in names {
        eventually(
            Duration::from_secs(15),
            &format!("{n} owned by {by}"),
            || async { (owner(env, n).await.as_deref() == Some(by)).then_some(()) },
        )
        .await;
    }
}

/// `leaves` stops as a SIGTERM stops it, then a third replica joins and is killed, all
/// under readers; `stays` answers throughout. Returns `stays`.
pub(super) async fn leave_then_die(
    env: &Env,
    (cert, auth): (&kairship_wire::tls::ServingCert, &AuthConfig),
    stays: Replica,
    mut leaves: Replica,
    names: &[String],
) -> Replica {
    // Graceful: the Lease is released while both still serve; the instances move; only
    // then do the listeners close.
    let through_stays = Readers::start(stays.grpc(ADMIN), names);
    let through_leaves = Readers::start(leaves.grpc(ADMIN), names);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    leaves.tree.hand_over(Duration::from_secs(15)).await;
    let handed = started.elapsed();
    all_owned_by(env, names, stays.name).await;
    assert_none_failed(
        &through_leaves.stop().await,
        "through the replica handing over",
    );
    leaves.stop().await;
    assert_none_failed(&through_stays.stop().await, "through the replica staying");
    eprintln!("handed over in {handed:?}");

    // A crash: a replica that owns some instances dies with its Lease held. Reads of its
    // instances through the other wait for the Lease to expire and the takeover.
    let others = [stays.name];
    let dies = ["replica-c", "replica-d", "replica-e"]
        .into_iter()
        .find(|c| {
            names
                .iter()
                .any(|n| ring::owner(n, &[others[0], c]) == Some(*c))
        })
        .expect("a name the ring gives some instance");
    let dying = replica(env, dies, cert, auth).await;
    let theirs: Vec<String> = names
        .iter()
        .filter(|n| ring::owner(n, &[others[0], dies]) == Some(dies))
        .cloned()
        .collect();
    all_owned_by(env, &theirs, dies).await;
    let through_stays = Readers::start(stays.grpc(ADMIN), names);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let died = Instant::now();
    let Replica { tree, served, .. } = dying;
    served.serving.abort();
    tree.kill();
    all_owned_by(env, names, stays.name).await;
    let taken = died.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_none_failed(
        &through_stays.stop().await,
        "through a live replica while another died",
    );
    eprintln!("a dead replica's instances taken over in {taken:?}");
    stays
}
