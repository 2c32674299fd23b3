//! The attack on forwarding: a "replica" an attacker names gets no caller's credentials.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kairship::actors::shards::handoff::OWNER_ANNOTATION;
use kairship::proto::GetInstanceRequest;
use kube::api::{Api, Patch, PatchParams, PostParams};

use super::{Replica, ADMIN};
use crate::common::eventually;
use crate::harness::{Env, NS};

/// Whoever may write Leases and Instances in Kairship's namespace can name a "replica" of
/// their own and record an instance for it. Kairship still hands it no caller's
/// credentials: a peer must present a certificate of the serving CA for the Service's
/// name, so the handshake fails before any request is sent, and the caller gets 503.
pub(super) async fn a_forged_peer_gets_no_credentials(env: &Env, stays: &Replica) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    let forged = kairship_wire::tls::generate("kairship").expect("another CA's certificate");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tokio_rustls::TlsAcceptor::from(forged.server_config.clone());
    let (dialled, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let server = {
        let (dialled, requests) = (dialled.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                dialled.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut tls) = acceptor.accept(sock).await {
                    let mut buf = [0u8; 1024];
                    if tls.read(&mut buf).await.is_ok_and(|n| n > 0) {
                        requests.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
    };
    // Its Lease, renewed as a live replica's, with its address.
    let leases: Api<Lease> = Api::namespaced(env.host.clone(), NS);
    let renew = |l: &mut Lease| {
        l.spec = Some(LeaseSpec {
            holder_identity: Some("forged_1".into()),
            lease_duration_seconds: Some(3),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..Default::default()
        });
    };
    let mut lease = Lease::default();
    lease.metadata.name = Some("kairship-shard-forged".into());
    lease.metadata.annotations =
        Some([("kairship.io/address".to_string(), format!("https://{addr}"))].into());
    renew(&mut lease);
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("the forged Lease");
    let renewer = {
        let leases = leases.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if let Ok(mut l) = leases.get("kairship-shard-forged").await {
                    renew(&mut l);
                    let _ = leases
                        .replace("kairship-shard-forged", &PostParams::default(), &l)
                        .await;
                }
            }
        })
    };
    // Recorded only once the replica counts the forged one live: before that it would
    // take the instance back, as it does from a replica that left.
    eventually(
        Duration::from_secs(10),
        "the forged replica counted live",
        || async {
            stays
                .tree
                .shards()
                .is_some_and(|s| s.live().contains("forged"))
                .then_some(())
        },
    )
    .await;
    let patch = serde_json::json!({"metadata": {"annotations": {OWNER_ANNOTATION: "forged"}}});
    env.instances()
        .patch("karmada-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("record karmada-1 for the forged replica");
    // gRPC, which does not retry a 503 on its own as kube's HTTP client does.
    let refused = eventually(Duration::from_secs(10), "a refusal naming the peer", || {
        let mut grpc = stays.grpc(ADMIN);
        async move {
            let e = grpc
                .get_instance(GetInstanceRequest {
                    name: "karmada-1".into(),
                })
                .await
                .err()?;
            e.message().contains("forged").then_some(e)
        }
    })
    .await;
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        dialled.load(Ordering::Relaxed) > 0,
        "the forged address was dialled"
    );
    assert_eq!(
        requests.load(Ordering::Relaxed),
        0,
        "a request (and the caller's token) reached a peer without the serving CA's certificate"
    );
    renewer.abort();
    server.abort();
}
