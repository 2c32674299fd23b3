//! The webhook's replay memory lives in the host: a request accepted by one replica is
//! refused as a replay by another, so an old `bind` replayed after its `unbind` grants
//! nothing wherever it lands.

use kairship::auth::webhook::{sign, Webhook};
use kairship::crd::InstanceRoleBinding;
use kube::api::Api;

const SECRET: &[u8] = b"replicas-share-this-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_refused_by_every_replica() {
    let env = crate::harness::Env::start(0).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).expect("secret");
    let replica = |name: &str| {
        Webhook::new(&secret, env.host.clone(), name.into(), crate::harness::NS).expect("webhook")
    };
    let (a, b) = (replica("replica-a"), replica("replica-b"));
    let event = |kind: &str| {
        serde_json::json!({"id": kind, "type": kind, "instance": "karmada-1", "role": "admin",
            "subject": {"kind": "User", "name": "mallory"}})
        .to_string()
    };
    let now = jiff::Timestamp::now().as_second();
    let bind = event("bind");
    let bind_sig = sign(SECRET, now, bind.as_bytes());
    let ts = now.to_string();
    a.receive(Some(&ts), Some(&bind_sig), bind.as_bytes(), now)
        .await
        .expect("bind applied");
    let unbind = event("unbind");
    let unbind_sig = sign(SECRET, now + 1, unbind.as_bytes());
    let ts1 = (now + 1).to_string();
    b.receive(Some(&ts1), Some(&unbind_sig), unbind.as_bytes(), now + 1)
        .await
        .expect("unbind applied");
    // The old bind, replayed to the other replica within the window: refused, nothing granted.
    let replay = b
        .receive(Some(&ts), Some(&bind_sig), bind.as_bytes(), now + 2)
        .await;
    let err = replay.expect_err("a replay is refused");
    assert!(err.to_string().contains("replay"), "{err}");
    let bindings: Api<InstanceRoleBinding> = Api::all(env.host.clone());
    let left = bindings.list(&Default::default()).await.expect("list");
    assert!(
        left.items.is_empty(),
        "the replayed bind granted something: {:?}",
        left.items
    );
}
