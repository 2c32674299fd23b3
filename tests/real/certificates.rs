//! The certificates of a real instance: the kubeconfig's CA and the karmada-apiserver's
//! serving certificate as its TLS handshake presents it, with their expiry, and the metric.

use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::GetInstanceRequest;

use crate::{eventually, Demo};

pub async fn listed(demo: &Demo) {
    let c = InstanceServiceClient::new(demo.channel().await);
    let certs = eventually(Duration::from_secs(60), "karmada-1's certificates", || {
        let req = demo.request(GetInstanceRequest {
            name: "karmada-1".into(),
        });
        let mut c = c.clone();
        async move {
            let status = c.get_instance(req).await.ok()?.into_inner().status?;
            let serving = status
                .certificates
                .iter()
                .any(|c| c.name == "karmada-apiserver serving");
            serving.then_some(status.certificates)
        }
    })
    .await;
    let serving = certs
        .iter()
        .find(|c| c.name == "karmada-apiserver serving")
        .expect("serving");
    // The real fleet's kube-apiserver serves a certificate named after the instance.
    assert!(serving.subject.contains("karmada-1"), "{serving:?}");
    assert!(
        certs
            .iter()
            .any(|c| c.name == "kubeconfig CA" && c.subject.contains("karmada-1-ca")),
        "{certs:?}"
    );
    let mut sorted = certs.clone();
    sorted.sort_by(|a, b| a.not_after.cmp(&b.not_after));
    assert_eq!(sorted, certs, "listed first to expire first");
    println!(
        "certificates: karmada-1 lists {} (serving {} until {})",
        certs.len(),
        serving.subject,
        serving.not_after
    );
}
