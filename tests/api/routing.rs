//! Requests are routed from the readers the instance actors publish, not through any
//! actor's mailbox: while the instance manager crashes and is restarted (its children go
//! with it), every instance keeps answering, and the tree reports the manager's restart.

use std::time::{Duration, Instant};

use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::supervisor_service_client::SupervisorServiceClient;
use kairship::proto::*;

use crate::common::eventually;
use crate::server::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_keep_being_routed_while_the_manager_restarts() {
    let api = Api::start(2).await;
    let clusters = ClusterServiceClient::new(api.channel.clone());
    let list = |instance: &'static str| {
        let mut c = clusters.clone();
        async move {
            c.list_clusters(ListClustersRequest {
                instance: instance.into(),
                ..Default::default()
            })
            .await
        }
    };
    for i in ["karmada-1", "karmada-2"] {
        eventually(Duration::from_secs(20), "instance serving", || async {
            list(i).await.ok()
        })
        .await;
    }
    api.tree.handle().crash_manager().await.expect("crash");
    // Through the crash, the restart back-off and the new actors' sync: every request answers.
    let until = Instant::now() + Duration::from_secs(3);
    let mut answered = 0;
    while Instant::now() < until {
        for i in ["karmada-1", "karmada-2"] {
            let r = list(i).await;
            assert!(r.is_ok(), "{i} during the manager's restart: {r:?}");
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(answered > 10);
    let supervisor = SupervisorServiceClient::new(api.channel.clone());
    let manager = eventually(
        Duration::from_secs(10),
        "the manager's restart counted",
        || {
            let mut s = supervisor.clone();
            async move {
                s.list_actors(ListActorsRequest::default())
                    .await
                    .ok()?
                    .into_inner()
                    .actors
                    .into_iter()
                    .find(|a| a.name == "instance-manager" && a.restart_count == 1)
            }
        },
    )
    .await;
    assert!(manager.last_error.contains("crash"), "{manager:?}");
    // The new manager starts from the process's Instance watch (no watch of its own): both
    // instances have their actors again.
    eventually(Duration::from_secs(20), "both instance actors back", || {
        let mut s = supervisor.clone();
        async move {
            let actors = s
                .list_actors(ListActorsRequest::default())
                .await
                .ok()?
                .into_inner()
                .actors;
            let running = actors
                .iter()
                .filter(|a| a.parent == "instance-manager" && a.state == "Running")
                .count();
            (running == 2).then_some(())
        }
    })
    .await;
    api.stop().await;
}
