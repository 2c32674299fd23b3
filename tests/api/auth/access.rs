//! What callers learn about themselves (AccessService.GetCaller, `GET /caller`) and who may
//! read the chaos report.

use serde_json::json;
use tonic::Code;

use kairship::proto::access_service_client::AccessServiceClient;
use kairship::proto::{Caller, GetCallerRequest};

use super::{signer, start, with, ADMIN, EDITOR, NOBODY, VIEWER};
use crate::rest::{call, P};

fn roles(c: &Caller) -> Vec<(String, String)> {
    c.roles
        .iter()
        .map(|r| (r.instance.clone(), r.role.clone()))
        .collect()
}

fn pair(i: &str, r: &str) -> (String, String) {
    (i.to_string(), r.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_learns_their_own_roles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let mut access = AccessServiceClient::new(api.channel.clone());
    let ask = |token: &'static str| {
        let mut access = access.clone();
        async move {
            access
                .get_caller(with(token, GetCallerRequest {}))
                .await
                .map(|r| r.into_inner())
        }
    };

    let admin = ask(ADMIN).await.expect("admin");
    assert_eq!(
        (admin.name.as_str(), admin.fleet_role.as_str()),
        ("alice", "admin")
    );
    // As kube-apiserver, every authenticated user is also in system:authenticated.
    assert_eq!(admin.groups, vec!["ops", "system:authenticated"]);
    assert_eq!(
        roles(&admin),
        vec![pair("karmada-1", "admin"), pair("karmada-2", "admin")]
    );

    let viewer = ask(VIEWER).await.expect("viewer");
    assert_eq!(
        (viewer.name.as_str(), viewer.fleet_role.as_str()),
        ("victor", "")
    );
    assert_eq!(roles(&viewer), vec![pair("karmada-1", "view")]);

    let editor = ask(EDITOR).await.expect("editor");
    assert_eq!(
        editor.groups,
        vec!["team-a", "misc", "system:authenticated"]
    );
    assert_eq!(roles(&editor), vec![pair("karmada-1", "edit")]);

    let nobody = ask(NOBODY)
        .await
        .expect("a caller without roles may still ask");
    assert!(nobody.roles.is_empty() && nobody.fleet_role.is_empty());

    let anon = access.get_caller(GetCallerRequest {}).await;
    assert_eq!(anon.expect_err("refused").code(), Code::Unauthenticated);

    // REST: the same answer as proto3 JSON.
    let editor = api.https_client(EDITOR).await;
    let (code, body) = call(&editor, "GET", &format!("{P}/caller"), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["name"], "erin", "{body}");
    assert_eq!(
        body["roles"],
        json!([{"instance": "karmada-1", "role": "edit"}]),
        "{body}"
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chaos_report_is_served_to_those_who_see_every_instance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = signer("k1");
    let api = start(dir.path(), &json!({"keys": [key.jwk]})).await;
    let (admin, viewer) = (
        api.https_client(ADMIN).await,
        api.https_client(VIEWER).await,
    );
    let report = format!("{P}/chaos/report.json");

    let (code, body) = call(&admin, "GET", &report, None).await;
    assert_eq!(code, 404, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no chaos report yet"),
        "{body}"
    );

    let chaos = api.chaos_dir();
    std::fs::create_dir_all(&chaos).expect("chaos dir");
    let written =
        json!({"profile": "short", "passed": true, "experiments": [{"name": "instance-down"}]});
    std::fs::write(chaos.join("report.json"), written.to_string()).expect("report");
    let (code, body) = call(&admin, "GET", &report, None).await;
    assert_eq!((code, &body), (200, &written));

    // It names every instance: a viewer of one is refused, as is an unknown file.
    let (code, body) = call(&viewer, "GET", &report, None).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("may not get chaosreports: it covers every instance"),
        "{body}"
    );
    let (code, body) = call(
        &admin,
        "GET",
        &format!("{P}/chaos/..%2Fkairship-host.kubeconfig"),
        None,
    )
    .await;
    // Refused at the edge: an encoded `/` is never decoded into a path.
    assert_eq!(code, 400, "{body}");
    api.stop().await;
}
