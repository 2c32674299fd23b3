//! Reading an instance through Kairship's cache: the Deployments the benches seed, and
//! waiting until the cache serves them.

use std::time::{Duration, Instant};

use serde_json::json;

pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
pub const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
pub const DEPLOY_KIND: (&str, &str, &str) = ("apps", "v1", "deployments");

/// Deployments `web-NNNNNN` of `range`, spread over 100 `shard` label values.
pub fn deployments(range: std::ops::Range<usize>) -> impl Iterator<Item = serde_json::Value> {
    range.map(|i| {
        super::deployment(
            &format!("web-{i:06}"),
            json!({"app": "web", "shard": (i % 100).to_string()}),
        )
    })
}

/// How many objects a LIST of `path` returns from the cache (`None`: not from the cache,
/// or refused, as while the instance is paused or still syncing).
pub async fn cached_count(c: &kube::Client, path: &str) -> Option<usize> {
    let req = http::Request::get(format!("{path}?limit=1"))
        .body(Vec::new())
        .expect("request");
    let resp = c.send(req.map(Into::into)).await.ok()?;
    let from_cache = resp
        .headers()
        .get("x-kairship-source")
        .is_some_and(|v| v == "cache");
    if !resp.status().is_success() || !from_cache {
        return None;
    }
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .ok()?
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
    let items = v["items"].as_array()?.len();
    Some(items + v["metadata"]["remainingItemCount"].as_u64().unwrap_or(0) as usize)
}

/// Until the cache serves `n` objects at `path`, saying so every 10 s; fails after 15
/// minutes.
pub async fn wait_synced(c: &kube::Client, path: &str, n: usize) {
    let start = Instant::now();
    let mut said = Instant::now();
    loop {
        let count = cached_count(c, path).await;
        if count == Some(n) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "{n} objects not served from the cache at {path} after 15 minutes ({count:?})"
        );
        if said.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "  waiting for {n} objects from the cache at {path}: {count:?} after {:.0?}",
                start.elapsed()
            );
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pauses (the instance's actor and its caches are dropped) or resumes an instance.
pub async fn set_paused(host: &kube::Client, name: &str, paused: bool) {
    let api: kube::Api<kairship::crd::Instance> = kube::Api::all(host.clone());
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"paused": paused}})),
    )
    .await
    .expect("pause");
}

/// The body of a GET of `path` as `accept`; `pass_through` asks the instance, not the cache.
pub async fn get_as(c: &kube::Client, path: &str, pass_through: bool, accept: &str) -> Duration {
    let mut req = http::Request::get(path).header("accept", accept);
    if pass_through {
        req = req.header("x-kairship-source", "instance");
    }
    let t = Instant::now();
    let body = c
        .request_text(req.body(Vec::new()).expect("request"))
        .await
        .expect("answer");
    assert!(!body.is_empty());
    t.elapsed()
}

/// The JSON size of one object, as served.
pub async fn json_size(c: &kube::Client, path: &str) -> usize {
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    c.request_text(req).await.expect("object").len()
}
