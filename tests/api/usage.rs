//! What an instance costs and is used for: a managed instance's class asks components
//! for resources, the (simulated) karmada-operator gives the pods those requests, and the
//! Instance's status, the API and `/metrics` show what the control plane's pods request;
//! a request through the proxy shows as the instance's last request.

use std::time::Duration;

use kairship::crd::InstanceClassSpec;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::{ControlPlaneUsage, CreateInstanceRequest};
use serde_json::json;

use crate::common::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_shows_its_control_planes_requests_and_its_last_request() {
    let api = crate::server::Api::start(1).await;
    crate::server::create_class(
        &api.env.host,
        "sized",
        InstanceClassSpec {
            karmada_spec: Some(json!({"components": {
                "etcd": {"local": {"resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}},
                "karmadaAPIServer": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                "karmadaScheduler": {"replicas": 2,
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
            }})),
            ..Default::default()
        },
    )
    .await;
    let c = InstanceServiceClient::new(api.channel.clone());
    c.clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(crate::server::managed_instance_of("team-cost", "sized")),
        })
        .await
        .expect("created");
    // Seven pods (the scheduler's two among them); the aggregated apiserver, controller
    // manager and webhook ask for nothing, so they are named as left out.
    let want = ControlPlaneUsage {
        pods: 7,
        cpu_requests: "950m".into(),
        memory_requests: "1792Mi".into(),
        containers_without_requests: 3,
    };
    let seen = eventually(
        Duration::from_secs(60),
        "the control plane's requests in the status",
        || async {
            let status = crate::server::status_of(&c, "team-cost").await?;
            status.control_plane.filter(|u| *u == want)
        },
    )
    .await;
    assert_eq!(seen, want);

    // karmada-1 has had no request through Kairship; one GET through the proxy is its last.
    let last = |name: &'static str| {
        let c = c.clone();
        async move {
            crate::server::status_of(&c, name)
                .await
                .map(|s| s.last_request_time)
        }
    };
    assert_eq!(last("karmada-1").await.as_deref(), Some(""));

    let client = api.metrics_client("usage").await;
    let started = jiff::Timestamp::now().as_second();
    let proxy = http::Request::get(
        "/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces",
    )
    .body(Vec::new())
    .expect("request");
    client.request_text(proxy).await.expect("proxy answers");
    let at = eventually(
        Duration::from_secs(30),
        "the last request in the status",
        || async { last("karmada-1").await.filter(|t| !t.is_empty()) },
    )
    .await;
    let at = at.parse::<jiff::Timestamp>().expect("RFC 3339").as_second();
    assert!(
        (started..=jiff::Timestamp::now().as_second()).contains(&at),
        "last request at {at}, sent at {started} or after"
    );
    assert_eq!(
        last("team-cost").await.as_deref(),
        Some(""),
        "no request reached it"
    );
    let text = crate::server::scrape(&client).await;
    for line in [
        r#"kairship_instance_control_plane_requests{karmada_instance="team-cost",resource="cpu"} 0.95"#,
        r#"kairship_instance_control_plane_requests{karmada_instance="team-cost",resource="memory"} 1879048192.0"#,
        r#"kairship_instance_control_plane_requests{karmada_instance="team-cost",resource="pods"} 7.0"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    api.stop().await;
}
