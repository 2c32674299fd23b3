//! The HMAC-signed global-management webhook: events verified, applied once, and taking
//! effect on every surface.

use super::*;

async fn send(c: &kube::Client, ts: i64, sig: &str, body: &str) -> (u16, Value) {
    let req = http::Request::post(format!("{P}/webhooks/global-management"))
        .header("content-type", "application/json")
        .header("x-kairship-timestamp", ts.to_string())
        .header("x-kairship-signature", sig)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("request");
    let resp = c.send(req).await.expect("answer");
    let code = resp.status().as_u16();
    use http_body_util::BodyExt;
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_events_are_verified_applied_once_and_take_effect() {
    use kairship::auth::webhook::sign;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let c = api.https_client("").await;
    let bindings: Api<InstanceRoleBinding> = Api::all(api.env.host.clone());
    let from_webhook = || async {
        let lp = ListParams::default().labels(&format!("{SOURCE_LABEL}=global-management"));
        let mut names: Vec<_> = bindings
            .list(&lp)
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|b| (b.metadata.name.unwrap_or_default(), b.spec))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        names
    };
    let inst = InstanceServiceClient::new(api.channel.clone());
    let dave_reads = || {
        let mut inst = inst.clone();
        async move {
            inst.get_instance(with(
                DAVE,
                GetInstanceRequest {
                    name: "karmada-2".into(),
                },
            ))
            .await
            .is_ok()
        }
    };
    assert!(!dave_reads().await);
    let bind = json!({"id": "evt-1", "type": "bind", "instance": "karmada-2", "role": "view",
        "subject": {"kind": "User", "name": "dave"}})
    .to_string();
    let secret = SECRET.as_bytes();

    // Refused, leaving no trace: bad signature, other secret, stale, future, missing headers.
    let t = now();
    let mut bad_sig = sign(secret, t, bind.as_bytes());
    bad_sig.replace_range(
        bad_sig.len() - 2..,
        if bad_sig.ends_with("00") { "11" } else { "00" },
    );
    let refusals = [
        (t, bad_sig, 401),
        (t, sign(b"some-other-secret-value", t, bind.as_bytes()), 401),
        (t - 3600, sign(secret, t - 3600, bind.as_bytes()), 401),
        (t + 3600, sign(secret, t + 3600, bind.as_bytes()), 401),
        (t, String::new(), 401),
        (t, sign(secret, t, b"{\"id\": \"x\"}"), 401),
    ];
    for (ts, sig, want) in refusals {
        let (code, body) = send(&c, ts, &sig, &bind).await;
        assert_eq!(code, want, "{sig}: {body}");
    }
    let bad_event = json!({"id": "evt-0", "type": "bind", "instance": "Not_A_Name", "role": "view", "subject": {"kind": "User", "name": "x"}}).to_string();
    let (code, body) = send(&c, t, &sign(secret, t, bad_event.as_bytes()), &bad_event).await;
    assert_eq!(code, 400, "{body}");
    assert!(
        from_webhook().await.is_empty(),
        "refused events left no binding"
    );

    // A good event: applied, and in effect for dave.
    let sig = sign(secret, t, bind.as_bytes());
    let (code, body) = send(&c, t, &sig, &bind).await;
    assert_eq!(
        (code, body["changed"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    // The same signed request again: a replay, refused.
    let (code, body) = send(&c, t, &sig, &bind).await;
    assert_eq!(code, 409, "{body}");
    // The IAM retrying with a fresh signature: accepted, nothing changes (applied once).
    let t2 = now() + 1;
    let (code, body) = send(&c, t2, &sign(secret, t2, bind.as_bytes()), &bind).await;
    assert_eq!(
        (code, body["changed"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
    let made = from_webhook().await;
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].1.subjects[0].name, "dave");
    let stored = bindings.get(&made[0].0).await.expect("binding");
    let notes = stored.metadata.annotations.unwrap_or_default();
    assert_eq!(
        notes.get("kairship.io/event-id").map(String::as_str),
        Some("evt-1")
    );
    assert_eq!(
        notes.get("kairship.io/applied-by").map(String::as_str),
        Some("kairship-test-operator")
    );
    eventually(
        Duration::from_secs(10),
        "dave may view karmada-2",
        || async { dave_reads().await.then_some(()) },
    )
    .await;

    // Unbind: the binding goes, and so does dave's access.
    let unbind = bind
        .replace("\"bind\"", "\"unbind\"")
        .replace("evt-1", "evt-2");
    let t3 = now();
    let (code, body) = send(&c, t3, &sign(secret, t3, unbind.as_bytes()), &unbind).await;
    assert_eq!(
        (code, body["changed"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert!(from_webhook().await.is_empty());
    eventually(
        Duration::from_secs(10),
        "dave no longer views karmada-2",
        || async { (!dave_reads().await).then_some(()) },
    )
    .await;
    api.stop().await;
}
