//! `/metrics` on the HTTPS address: instance gauges, leadership, watch restarts, and
//! request metrics of HTTPS and gRPC.

use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::GetInstanceRequest;

use crate::server::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_instances_leadership_and_requests() {
    let api = Api::start(1).await;
    let client = api.metrics_client("metrics").await;
    // One proxied request, so the request metrics have something to show.
    let started = jiff::Timestamp::now().as_second();
    let proxy = http::Request::get("/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/apis/cluster.karmada.io/v1alpha1/clusters").body(Vec::new()).expect("request");
    client.request_text(proxy).await.expect("proxy answers");
    // Two gRPC calls, one failing, counted by method and code.
    let mut grpc = InstanceServiceClient::new(api.channel.clone());
    grpc.get_instance(GetInstanceRequest {
        name: "karmada-1".into(),
    })
    .await
    .expect("get");
    grpc.get_instance(GetInstanceRequest {
        name: "missing".into(),
    })
    .await
    .expect_err("not found");
    // Compaction cuts the instance's watches with 410: each cache watch restarts.
    let (code, _) = api
        .env
        .sim
        .set_fault("karmada-1", serde_json::json!({"mode": "compact"}))
        .await;
    assert_eq!(code, 200);
    let scrape = || crate::server::scrape(&client);
    crate::common::eventually(
        Duration::from_secs(10),
        "watch restarts counted",
        || async {
            let text = scrape().await;
            text.lines()
                .find(|l| {
                    l.starts_with(
                        r#"kairship_instance_watch_restarts{karmada_instance="karmada-1"}"#,
                    )
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .filter(|n| *n > 0)
        },
    )
    .await;
    // Ready once the instance and binding caches have listed (the harness waited for it).
    let ready = client
        .request_text(
            http::Request::get("/readyz")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("readyz answers 200");
    assert_eq!(ready, "ok");
    let text = scrape().await;
    for line in [
        r#"kairship_instance_phase{karmada_instance="karmada-1",phase="Running"} 1"#,
        r#"kairship_instance_phase{karmada_instance="karmada-1",phase="Unreachable"} 0"#,
        r#"kairship_instance_clusters{karmada_instance="karmada-1",state="total"} 2"#,
        r#"kairship_instance_cached_objects{karmada_instance="karmada-1",kind="Cluster"} 2"#,
        r#"kairship_actor_restarts{karmada_instance="karmada-1"} 0"#,
        r#"leader_election_master_status{name="kairship-controller-manager"} 1"#,
        r#"kairship_api_requests_total{surface="proxy",method="GET",code="200"} 1"#,
        r#"kairship_api_requests_total{surface="grpc",method="/kairship.v1alpha1.InstanceService/GetInstance",code="Ok"} 1"#,
        r#"kairship_api_requests_total{surface="grpc",method="/kairship.v1alpha1.InstanceService/GetInstance",code="NotFound"} 1"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
    assert!(
        text.contains("kairship_api_request_duration_seconds_bucket"),
        "{text}"
    );
    // What the instance is used for: the proxied request, counted once however often
    // /metrics is scraped, and when it came; the capacity it schedules onto.
    let value = |text: &str, series: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
    };
    let requests = r#"kairship_instance_requests_total{karmada_instance="karmada-1"}"#;
    let errors = r#"kairship_instance_request_errors_total{karmada_instance="karmada-1"}"#;
    let last = r#"kairship_instance_last_request_timestamp_seconds{karmada_instance="karmada-1"}"#;
    let again = scrape().await;
    assert_eq!(value(&again, requests), Some(1.0), "{again}");
    assert_eq!(value(&again, errors), Some(0.0), "{again}");
    let at = value(&again, last).expect("last request time") as i64;
    assert!(
        (started..=jiff::Timestamp::now().as_second()).contains(&at),
        "last request at {at}, the test started at {started}"
    );
    let cores = value(
        &again,
        r#"kairship_instance_member_capacity{karmada_instance="karmada-1",resource="cpu",state="allocatable"}"#,
    )
    .expect("member cpu");
    assert!(cores >= 1.0, "{cores} cores allocatable on the members");
    let proxy = http::Request::get("/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/api/v1/namespaces/default/configmaps/absent").body(Vec::new()).expect("request");
    client.request_text(proxy).await.expect_err("404");
    let after = scrape().await;
    assert_eq!(value(&after, requests), Some(2.0), "{after}");
    assert_eq!(value(&after, errors), Some(0.0), "a 404 is no server error");
    // Seconds left on the instance's serving certificate (the simulator's last a year).
    let serving = r#"kairship_instance_certificate_expiry_seconds{karmada_instance="karmada-1",certificate="karmada-apiserver serving"} "#;
    let left = crate::common::eventually(
        Duration::from_secs(10),
        "certificate expiry exported",
        || async {
            let text = scrape().await;
            text.lines()
                .find_map(|l| l.strip_prefix(serving))
                .and_then(|v| v.parse::<i64>().ok())
        },
    )
    .await;
    let year = 365 * 86_400;
    assert!((year - 2 * 86_400..=year).contains(&left), "{left} s left");
    api.stop().await;
}
