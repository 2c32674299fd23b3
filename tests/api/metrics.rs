//! `/metrics` on the HTTPS address: instance gauges, leadership and request metrics.

use crate::server::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_instances_leadership_and_requests() {
    let api = Api::start(1).await;
    let kc = kairship_sim::kubeconfig::build("m", &api.https, &api.ca_pem, "metrics-test");
    let path = api.env.sim.dir.path().join("metrics.kubeconfig");
    kairship_sim::kubeconfig::write(&path, &kc).expect("write");
    let client = crate::common::client_from(&path).await;
    // One proxied request, so the request metrics have something to show.
    let proxy = http::Request::get("/apis/kairship.io/v1alpha1/instances/karmada-1/proxy/apis/cluster.karmada.io/v1alpha1/clusters").body(Vec::new()).expect("request");
    client.request_text(proxy).await.expect("proxy answers");
    let text = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("metrics");
    for line in [
        r#"kairship_instance_phase{karmada_instance="karmada-1",phase="Running"} 1"#,
        r#"kairship_instance_phase{karmada_instance="karmada-1",phase="Unreachable"} 0"#,
        r#"kairship_instance_clusters{karmada_instance="karmada-1",state="total"} 2"#,
        r#"kairship_instance_cached_objects{karmada_instance="karmada-1",kind="Cluster"} 2"#,
        r#"kairship_actor_restarts{karmada_instance="karmada-1"} 0"#,
        r#"leader_election_master_status{name="kairship-controller-manager"} 1"#,
        r#"kairship_api_requests_total{surface="proxy",method="GET",code="200"} 1"#,
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
    api.stop().await;
}
