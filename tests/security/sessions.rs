//! Day-two doors (issue 41) tried as an attacker would: an exec upgrade by a viewer, and by
//! another instance's admin, refused before anything reaches the instance, and audited as
//! the `create pods/exec` it is; pod logs of an instance one has no role on, and a
//! component restart by a viewer, refused by the chain.

use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use tokio::io::AsyncWriteExt;

use crate::denial::{read_for, tls};
use crate::{with, Demo};

const EXEC: &str = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy/api/v1/namespaces/default/pods/nginx/exec?command=id&stdout=true";

/// A WebSocket exec upgrade (as kubectl >= 1.31 sends it) on `instance` as `token`: the
/// answer's head.
async fn exec_upgrade(demo: &Demo, instance: &str, token: &str) -> String {
    let mut s = tls(demo).await;
    let head = format!(
        "GET /apis/kairship.io/v1alpha1/instances/{instance}/proxy{EXEC} HTTP/1.1\r\n\
         Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nConnection: Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n\
         Impersonate-User: admin\r\nImpersonate-Group: system:masters\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.expect("write");
    read_for(&mut s, Duration::from_secs(10)).await
}

pub async fn exec_and_logs_need_their_roles(demo: &Demo) {
    // vera views karmada-1: an exec is `create`, which needs edit; her own Impersonate-*
    // headers change nothing.
    let vera = demo.token("vera", &[]);
    let answer = exec_upgrade(demo, "karmada-1", &vera).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(!answer.contains("101 Switching"), "{answer}");
    // mallory administers karmada-2, not karmada-1.
    let mallory = demo.token("mallory", &[]);
    let answer = exec_upgrade(demo, "karmada-1", &mallory).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");

    // A pod's log on an instance she has no role on, over gRPC.
    let mut w = WorkloadServiceClient::new(demo.grpc().await);
    let refused = w
        .get_pod_logs(with(
            &mallory,
            GetPodLogsRequest {
                instance: "karmada-1".into(),
                cluster: "member1".into(),
                namespace: "default".into(),
                pod: "nginx".into(),
                ..Default::default()
            },
        ))
        .await
        .expect_err("mallory's log read on karmada-1");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    // A viewer restarts no component (and karmada-1's are not Kairship's to restart).
    let mut i = InstanceServiceClient::new(demo.grpc().await);
    let refused = i
        .restart_component(with(
            &vera,
            RestartComponentRequest {
                name: "karmada-1".into(),
                component: "karmada-apiserver".into(),
            },
        ))
        .await
        .expect_err("vera's restart");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("admin"), "{refused:?}");
    // Nor renews its certificates: that rewrites the control plane's keys' certificates.
    let refused = i
        .renew_certificates(with(
            &vera,
            RenewCertificatesRequest {
                name: "karmada-1".into(),
            },
        ))
        .await
        .expect_err("vera's renewal");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");

    // Each refusal left its event, the exec as the create on pods/exec it is.
    let events = demo.audit_events();
    let exec = |user: &str| {
        events.iter().any(|e| {
            e["user"]["username"] == user
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == "pods"
                && e["objectRef"]["subresource"] == "exec"
                && e["responseStatus"]["code"] == 403
        })
    };
    assert!(
        exec("vera") && exec("mallory"),
        "no audit event of the refused execs"
    );
    assert!(
        events.iter().any(|e| e["user"]["username"] == "vera"
            && e["verb"] == "restart"
            && e["responseStatus"]["code"] == 403),
        "no audit event of vera's refused restart"
    );
    assert!(
        events.iter().any(|e| e["user"]["username"] == "vera"
            && e["verb"] == "renew"
            && e["responseStatus"]["code"] == 403),
        "no audit event of vera's refused renewal"
    );
    println!("exec upgrades by a viewer and another instance's admin, a log read, a component restart and a certificate renewal without the role: refused and audited");
}
