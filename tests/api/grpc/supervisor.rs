//! The supervisor service, health and reflection (also from Python's grpcio), and restarts
//! that reach every replica.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervisor_health_and_reflection() {
    let api = Api::start(1).await;
    let mut s = SupervisorServiceClient::new(api.channel.clone());
    let actors = s
        .list_actors(ListActorsRequest {})
        .await
        .expect("actors")
        .into_inner()
        .actors;
    let names: Vec<&str> = actors.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["root", "instance-manager", "instance/karmada-1"]
    );
    let restarted = s
        .restart_instance(RestartInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("restart")
        .into_inner();
    assert_eq!(restarted.actor.expect("actor").state, "Running");
    assert_code(
        s.restart_instance(RestartInstanceRequest {
            name: "nope".into(),
        })
        .await,
        Code::NotFound,
        "nope",
    );
    let leader = s
        .get_leader(GetLeaderRequest {})
        .await
        .expect("leader")
        .into_inner();
    assert!(leader.is_self);

    // The instance's controllers: every one of the table, each run here (this replica
    // leads), and those with work to do at once have done it.
    let controllers = eventually(
        Duration::from_secs(10),
        "registration and member access done",
        || async {
            let r = s
                .clone()
                .list_controllers(ListControllersRequest {
                    name: "karmada-1".into(),
                })
                .await
                .ok()?
                .into_inner();
            let done = |n: &str| {
                r.controllers
                    .iter()
                    .any(|c| c.name == n && !c.last_succeeded.is_empty())
            };
            (done("registration") && done("member-access")).then_some(r)
        },
    )
    .await;
    let names: Vec<&str> = controllers
        .controllers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        kairship::controllers::TABLE
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
    );
    assert!(
        controllers
            .controllers
            .iter()
            .all(|c| c.enabled && c.active && c.failures == 0),
        "{controllers:?}"
    );
    assert_code(
        s.list_controllers(ListControllersRequest {
            name: "nope".into(),
        })
        .await,
        Code::NotFound,
        "nope",
    );

    let mut health = tonic_health::pb::health_client::HealthClient::new(api.channel.clone());
    let st = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "kairship.v1alpha1.InstanceService".into(),
        })
        .await
        .expect("health")
        .into_inner();
    assert_eq!(
        st.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let mut refl = ServerReflectionClient::new(api.channel.clone());
    let req = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = refl
        .server_reflection_info(futures::stream::iter(vec![req]))
        .await
        .expect("reflection")
        .into_inner();
    let resp = stream.message().await.expect("answer").expect("message");
    let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else {
        panic!("unexpected reflection answer")
    };
    let services: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for svc in [
        "InstanceService",
        "ClusterService",
        "WorkloadService",
        "PolicyService",
        "SupervisorService",
    ] {
        assert!(
            services.contains(&format!("kairship.v1alpha1.{svc}")),
            "{svc} missing from {services:?}"
        );
    }
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_with_server_reflection() {
    let api = Api::start(1).await;
    crate::common::run_python(
        "grpc_client.py",
        vec![api.grpc_addr.to_string(), "karmada-1".into()],
    )
    .await;
    api.stop().await;
}

/// RestartInstance restarts the instance's actor on every replica (through the Instance's
/// restart annotation), and ListActors says which replica each actor runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reaches_every_replica() {
    let api = Api::start(1).await;
    // A second replica on the same host.
    let other = api.env.start_tree(None, "replica-b").await;
    let uptime = |tree: &kairship::actors::tree::Tree| {
        let tree = tree.handle();
        async move {
            tree.actors()
                .await
                .ok()?
                .into_iter()
                .find(|a| {
                    a.instance.as_deref() == Some("karmada-1") && a.state.as_str() == "Running"
                })
                .map(|a| a.uptime)
        }
    };
    let before = crate::common::eventually(
        Duration::from_secs(30),
        "replica-b's actor up a while",
        || async {
            uptime(&other)
                .await
                .filter(|u| *u >= Duration::from_secs(2))
        },
    )
    .await;
    let mut s = SupervisorServiceClient::new(api.channel.clone());
    let actors = s
        .list_actors(ListActorsRequest {})
        .await
        .expect("actors")
        .into_inner()
        .actors;
    assert!(
        actors.iter().all(|a| a.replica == "kairship-test"),
        "{actors:?}"
    );
    s.restart_instance(RestartInstanceRequest {
        name: "karmada-1".into(),
    })
    .await
    .expect("restart");
    crate::common::eventually(
        Duration::from_secs(20),
        "replica-b restarted its actor too",
        || async { uptime(&other).await.filter(|u| *u < before) },
    )
    .await;
    other.shutdown().await;
    api.stop().await;
}
