//! Every REST write of the OpenAPI document that names an instance gets the same answer
//! from a replica that does not own the instance (which forwards it, body and all) as from
//! the owner itself.

use std::collections::BTreeMap;

use super::{pair, Pair, ADMIN, INSTANCES};
use crate::harness::Env;

/// A value for each path parameter other than the instance.
fn parameter(name: &str, before: &str, after: &str) -> &'static str {
    match (name, before) {
        // Removing a member is tried on another than the one the others change.
        ("name", "clusters") if after.ends_with(":remove") => "member2",
        ("cluster", _) | ("name", "clusters") => "member1",
        ("component", _) => "karmada-scheduler",
        ("backup", _) => "absent-backup",
        ("namespace", _) => "default",
        ("kind", "policies") => "PropagationPolicy",
        ("kind", _) => "Deployment",
        _ => "absent",
    }
}

/// A body whose content the owner must act on, for the writes that take one; `{}` for the
/// others.
fn body(op: &str, instance: &str) -> String {
    if op.starts_with("post ") && op.ends_with("/workloads") {
        let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "forwarded-body", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "fb"}}, "template": {
                "metadata": {"labels": {"app": "fb"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        return serde_json::json!({"instance": instance, "objectJson": deployment.to_string()})
            .to_string();
    }
    if op.ends_with("/taints") {
        return r#"{"taints": [{"key": "forwarded", "value": "body", "effect": "NoSchedule"}]}"#
            .into();
    }
    "{}".into()
}

/// `template` with `instance` and test values for its parameters.
fn fill(template: &str, instance: &str) -> String {
    let mut out = Vec::new();
    let mut before = "";
    let mut after_instances = false;
    for seg in template.split('/') {
        let filled = match seg.split_once('}') {
            Some((param, tail)) if seg.starts_with('{') => {
                let param = &param[1..];
                let value = match after_instances {
                    true => instance,
                    false => parameter(param, before, tail),
                };
                format!("{value}{tail}")
            }
            _ => seg.to_string(),
        };
        after_instances = seg == "instances";
        before = seg;
        out.push(filled);
    }
    out.join("/")
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> (u16, String) {
    let body = body.map(|b| ("application/json", b.to_vec()));
    kairship_test_support::http::send(client, method, path, body).await
}

/// What may differ between two instances' answers: the instance's name, and what a
/// success makes up (names, tokens, times).
fn comparable((code, body): &(u16, String), instance: &str) -> (u16, String) {
    let message = match code {
        200..=299 => String::new(),
        _ => kairship_test_support::http::message(body).replace(instance, "<instance>"),
    };
    (*code, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_writes_get_the_owners_answer_through_either_replica() {
    let env = Env::start(INSTANCES).await;
    let Pair {
        a,
        b,
        cert,
        names,
        owners,
        _dir,
        ..
    } = pair(&env).await;
    let owned_by = |r: &str| {
        names
            .iter()
            .zip(&owners)
            .find(|(_, o)| o.as_str() == r)
            .map(|(n, _)| n.clone())
            .expect("an instance of each replica")
    };
    // Both sent to b: `far` is a's (b forwards it), `near` is b's own.
    let (far, near) = (owned_by("replica-a"), owned_by("replica-b"));
    let client = b.https(&env, &cert.ca_pem, ADMIN).await;
    let (code, doc) = send(&client, "GET", "/openapi.json", None).await;
    assert_eq!(code, 200, "{doc}");
    let doc: serde_json::Value = serde_json::from_str(&doc).expect("the OpenAPI document");
    // Writes on one instance, those that restart or delete it last.
    let mut writes: BTreeMap<(u8, String), (String, bool)> = BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        if !path.contains("/instances/{") {
            continue;
        }
        for (method, op) in ops.as_object().expect("operations") {
            if !matches!(method.as_str(), "post" | "put" | "patch" | "delete") {
                continue;
            }
            let last = match (method.as_str(), path.ends_with(":restart")) {
                ("delete", _) if path.ends_with("/instances/{name}") => 2,
                (_, true) if !path.contains("/components/") => 1,
                _ => 0,
            };
            let body = op.get("requestBody").is_some();
            writes.insert((last, format!("{method} {path}")), (method.clone(), body));
        }
    }
    assert!(
        writes.len() >= 15,
        "the REST writes on an instance: {writes:?}"
    );
    let mut differ = Vec::new();
    for ((_, op), (method, has_body)) in &writes {
        let path = op.split_once(' ').map(|(_, p)| p).unwrap_or_default();
        let method = method.to_uppercase();
        let (far_body, near_body) = (body(op, &far), body(op, &near));
        let with = |b: &String| has_body.then(|| b.as_bytes().to_vec());
        let forwarded = send(
            &client,
            &method,
            &fill(path, &far),
            with(&far_body).as_deref(),
        )
        .await;
        let local = send(
            &client,
            &method,
            &fill(path, &near),
            with(&near_body).as_deref(),
        )
        .await;
        // What the owner did with the body it was forwarded.
        if op.starts_with("post ") && op.ends_with("/workloads") {
            let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
                kube::Api::namespaced(env.sim.client(&far).await, "default");
            assert!(
                deployments
                    .get_opt("forwarded-body")
                    .await
                    .ok()
                    .flatten()
                    .is_some(),
                "{op}: the forwarded body's Deployment is not on {far}: {forwarded:?}"
            );
        }
        if op.ends_with("/taints") {
            let clusters: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
                env.sim.client(&far).await,
                &kairship_test_support::fleet::cluster_resource(),
            );
            let member = clusters.get("member1").await.expect("member1");
            assert_eq!(
                member.data["spec"]["taints"][0]["key"], "forwarded",
                "{op}: the forwarded body's taint is not on {far}'s member1: {forwarded:?}"
            );
        }
        let (f, l) = (comparable(&forwarded, &far), comparable(&local, &near));
        if f != l {
            differ.push(format!(
                "{op}: forwarded {} {:?}, at the owner {} {:?}",
                forwarded.0, forwarded.1, local.0, local.1
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "forwarded REST writes answered otherwise than the owner did:\n{}",
        differ.join("\n")
    );
    a.stop().await;
    b.stop().await;
}
