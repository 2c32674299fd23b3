//! The chart-installed Kairship's pods as a user checks them (Ready, one Lease holder,
//! nonroot, logs, metrics), and every surface through its Service, as a client on the
//! machine reaches it: kubectl through the proxy, gRPC, REST, the console and metrics.

use std::process::Command;

use serde_json::Value;

use crate::ha::{
    container_pid, http_get, metric, name, pod_metrics, ready, service_ip, ClusterDemo, NS,
};
use crate::readers;
use crate::{run, stdout};

pub async fn every_surface_answers_through_the_service(demo: &ClusterDemo) {
    let e = &demo.endpoints;
    // kubectl through the proxy, with the kubeconfig the demo wrote.
    let kubeconfig = e["instances"][0]["kubeconfig"]
        .as_str()
        .expect("kubeconfig");
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let clusters = stdout(&run(Command::new(&kubectl).args([
        "--kubeconfig",
        kubeconfig,
        "get",
        "clusters",
        "-o",
        "name",
    ])));
    assert!(
        clusters.contains("member1") && clusters.contains("member2"),
        "{clusters}"
    );
    // gRPC: health and a real call.
    let channel = kairship::cli::ctl::grpc_endpoint(
        &format!("https://{}", e["grpc"].as_str().expect("grpc")),
        Some(&std::fs::read_to_string(e["ca"].as_str().expect("ca")).expect("the CA")),
    )
    .expect("address")
    .connect()
    .await
    .expect("gRPC through the Service");
    let health = tonic_health::pb::health_client::HealthClient::new(channel.clone())
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health");
    assert_eq!(
        health.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    let mut req = tonic::Request::new(kairship::proto::ListInstancesRequest::default());
    let token = e["tokens"]["admin"].as_str().expect("token");
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("metadata"),
    );
    let list = kairship::proto::instance_service_client::InstanceServiceClient::new(channel)
        .list_instances(req)
        .await
        .expect("ListInstances")
        .into_inner();
    assert_eq!(list.instances.len(), 2);
    // REST and the console, over HTTPS with the demo's CA.
    let ca = std::fs::read_to_string(e["ca"].as_str().expect("ca")).expect("ca");
    let https = e["http"].as_str().expect("http");
    let kc = kairship_wire::kubeconfig::build("root", https, &ca, token);
    let path = demo.dir.path().join("root.kubeconfig");
    std::fs::write(&path, kc.to_string()).expect("write");
    let root = readers::client_from_path(&path.display().to_string()).await;
    let rest = root
        .request_text(
            http::Request::get("/apis/kairship.io/v1alpha1/instances")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("REST through the Service");
    let v: Value = serde_json::from_str(&rest).expect("REST answers JSON");
    assert_eq!(v["instances"].as_array().map(Vec::len), Some(2), "{v}");
    let page = root
        .request_text(
            http::Request::get("/ui/")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("the console through the Service");
    assert!(
        page.contains("<html") || page.contains("<!doctype html"),
        "{page}"
    );
    println!(
        "kubectl, gRPC (health, ListInstances), REST and the console answer through the Service"
    );
}

pub async fn pods_are_ready_nonroot_and_one_leads(demo: &ClusterDemo) {
    let pods = demo.pods();
    assert_eq!(pods.len(), 3, "three replicas");
    assert!(
        pods.iter().all(ready),
        "every pod Ready through its own probe"
    );
    let holder = demo
        .leader_pod()
        .map(|p| name(&p))
        .unwrap_or_else(|| panic!("the Lease is held by a pod: {}", demo.holder()));
    let mut leaders = 0;
    for pod in &pods {
        let m = pod_metrics(pod)
            .await
            .unwrap_or_else(|| panic!("/metrics of {}", name(pod)));
        assert!(m.contains("kairship_instance_phase"), "{m}");
        if metric(&m, "leader_election_master_status") == Some(1.0) {
            leaders += 1;
            assert_eq!(
                name(pod),
                holder,
                "the pod that says it leads holds the Lease"
            );
        }
        // What runs, not what the spec asks: the container's process on the host.
        let (_, pid) = container_pid(demo, pod);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let uid = status.lines().find(|l| l.starts_with("Uid:")).expect("Uid");
        assert!(
            uid.split_whitespace().skip(1).all(|u| u == "65532"),
            "{}: {uid}",
            name(pod)
        );
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).expect("mountinfo");
        let root = mounts
            .lines()
            .find(|l| l.split(' ').nth(4) == Some("/"))
            .expect("root mount");
        let opts = root.split(' ').nth(5).unwrap_or_default();
        assert!(
            opts.split(',').any(|o| o == "ro"),
            "{}: root mounted {opts}",
            name(pod)
        );
        // Logs: one JSON object per line (kubectl logs reaches the kubelet on the node).
        let logs = demo.kubectl(&["-n", NS, "logs", &name(pod), "--tail=20"]);
        assert!(!logs.trim().is_empty(), "{} logged nothing", name(pod));
        for line in logs.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(
                v["level"].is_string() && v["timestamp"].is_string(),
                "{line}"
            );
        }
    }
    assert_eq!(leaders, 1, "exactly one replica leads");
    let service_metrics =
        http_get(&format!("{}:8080", service_ip(&demo.endpoints)), "/metrics").await;
    assert!(
        service_metrics.is_some_and(|m| m.contains("kairship_instance_phase")),
        "/metrics through the Service"
    );
    println!("3 pods Ready, {holder} leads, UID 65532 on read-only roots, JSON logs");
}
