//! The attack on forwarding: a "replica" an attacker names gets no caller's credentials.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kairship::host::shards::handoff::OWNER_ANNOTATION;
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
    let renewer = forge(env, stays, "forged", &format!("https://{addr}")).await;
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

/// A Lease for a "replica" named `name` at `address`, renewed as a live replica's until
/// the handle is aborted, and karmada-1 recorded for it once `stays` counts it live.
async fn forge(
    env: &Env,
    stays: &Replica,
    name: &str,
    address: &str,
) -> tokio::task::JoinHandle<()> {
    let leases: Api<Lease> = Api::namespaced(env.host.clone(), NS);
    let lease_name = format!("kairship-shard-{name}");
    let holder = format!("{name}_1");
    let renew = move |l: &mut Lease| {
        l.spec = Some(LeaseSpec {
            holder_identity: Some(holder.clone()),
            lease_duration_seconds: Some(3),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..Default::default()
        });
    };
    let mut lease = Lease::default();
    lease.metadata.name = Some(lease_name.clone());
    lease.metadata.annotations =
        Some([("kairship.io/address".to_string(), address.to_string())].into());
    renew(&mut lease);
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("the forged Lease");
    let renewer = {
        let (leases, renew) = (leases.clone(), renew.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if let Ok(mut l) = leases.get(&lease_name).await {
                    renew(&mut l);
                    let _ = leases
                        .replace(&lease_name, &PostParams::default(), &l)
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
                .is_some_and(|s| s.live().contains(name))
                .then_some(())
        },
    )
    .await;
    let patch = serde_json::json!({"metadata": {"annotations": {OWNER_ANNOTATION: name}}});
    env.instances()
        .patch("karmada-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("record karmada-1 for the forged replica");
    renewer
}

/// The same forgery with an `http://` address: callers' tokens would go in clear. The
/// replica refuses the address where it reads it (and where it would dial it): nothing
/// connects to it, and the caller gets 503.
pub(super) async fn a_forged_http_peer_is_never_dialled(env: &Env, stays: &Replica) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let dialled = Arc::new(AtomicUsize::new(0));
    let server = {
        let dialled = dialled.clone();
        tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                dialled.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let renewer = forge(env, stays, "plaintext", &format!("http://{addr}")).await;
    let refused = eventually(Duration::from_secs(15), "a refusal", || {
        let mut grpc = stays.grpc(ADMIN);
        async move {
            grpc.get_instance(GetInstanceRequest {
                name: "karmada-1".into(),
            })
            .await
            .err()
        }
    })
    .await;
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert_eq!(
        dialled.load(Ordering::Relaxed),
        0,
        "a replica dialled a peer's http:// address"
    );
    renewer.abort();
    server.abort();
}
