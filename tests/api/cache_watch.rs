//! Watches through the proxy served from the instance's cache: from a cached LIST's
//! version or from now, with selectors (an object leaving the selection is DELETED for
//! that watcher) and bookmarks; other starts passed through; the `kube` crate's watcher
//! working unchanged.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::{json, Value};

use crate::server::Api as KairshipApi;

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// An open watch: its source header and a reader of its JSON lines.
struct Watch {
    source: String,
    lines: futures::stream::BoxStream<'static, Value>,
}

async fn open(client: &kube::Client, query: &str) -> Watch {
    open_as(client, query, "application/json", false).await
}

/// kubectl's Accept header for `kubectl get -w`.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn open_as(client: &kube::Client, query: &str, accept: &str, from_instance: bool) -> Watch {
    let mut req =
        http::Request::get(format!("{DEPLOYS}?watch=true&{query}")).header("accept", accept);
    if from_instance {
        req = req.header(kairship::api::proxy::SOURCE_HEADER, "instance");
    }
    let req = req.body(kube::client::Body::empty()).expect("request");
    let resp = client.send(req).await.expect("answer");
    assert!(resp.status().is_success(), "{query}: {}", resp.status());
    let source = resp
        .headers()
        .get(kairship::api::proxy::SOURCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let frames = resp
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let reader = json_lines(frames);
    Watch {
        source,
        lines: reader,
    }
}

/// Splits a byte stream into parsed JSON lines.
fn json_lines(
    frames: impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
) -> futures::stream::BoxStream<'static, Value> {
    let mut buf = Vec::new();
    frames
        .filter_map(|f| async move { f.ok() })
        .flat_map(move |chunk| {
            buf.extend_from_slice(&chunk);
            let mut out = Vec::new();
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                    out.push(v);
                }
            }
            futures::stream::iter(out)
        })
        .boxed()
}

impl Watch {
    /// The next event other than a bookmark, whole.
    async fn next_event(&mut self) -> Value {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), self.lines.next())
                .await
                .expect("an event within 10s")
                .expect("stream open");
            if ev["type"] != "BOOKMARK" {
                return ev;
            }
        }
    }

    /// The next event other than a bookmark, as (type, name, label app).
    async fn next(&mut self) -> (String, String, String) {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), self.lines.next())
                .await
                .expect("an event within 10s")
                .expect("stream open");
            let t = ev["type"].as_str().unwrap_or_default().to_string();
            if t == "BOOKMARK" {
                continue;
            }
            let o = &ev["object"]["metadata"];
            return (
                t,
                o["name"].as_str().unwrap_or_default().into(),
                o["labels"]["app"].as_str().unwrap_or_default().into(),
            );
        }
    }
}

fn deployment(name: &str, app: &str) -> Deployment {
    serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"x": "y"}},
            "template": {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    .expect("deployment")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_are_served_from_the_cache_with_selectors() {
    let api = KairshipApi::start(1).await;
    let proxy = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let direct: Api<Deployment> = Api::namespaced(api.env.sim.client("karmada-1").await, "default");
    direct
        .create(&PostParams::default(), &deployment("before", "web"))
        .await
        .expect("create");
    // The cache has it once a cached LIST shows it; that LIST's version starts the watch.
    let list: Value = crate::common::eventually(Duration::from_secs(10), "cached", || async {
        let req = http::Request::get(DEPLOYS)
            .body(Vec::new())
            .expect("request");
        let l: Value = proxy.request(req).await.ok()?;
        (l["items"].as_array()?.len() == 1).then_some(l)
    })
    .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let mut all = open(
        &proxy,
        &format!("resourceVersion={rv}&allowWatchBookmarks=true"),
    )
    .await;
    let mut web = open(
        &proxy,
        &format!("resourceVersion={rv}&labelSelector=app%3Dweb"),
    )
    .await;
    let mut now = open(&proxy, "labelSelector=app%3Dweb").await;
    assert_eq!(
        (
            all.source.as_str(),
            web.source.as_str(),
            now.source.as_str()
        ),
        ("cache", "cache", "cache")
    );
    // From now: the current objects first.
    assert_eq!(
        now.next().await,
        ("ADDED".into(), "before".into(), "web".into())
    );

    direct
        .create(&PostParams::default(), &deployment("new", "web"))
        .await
        .expect("create");
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}}));
    direct
        .patch("new", &PatchParams::default(), &relabel)
        .await
        .expect("patch");
    direct
        .delete("new", &DeleteParams::default())
        .await
        .expect("delete");
    for w in [&mut all] {
        assert_eq!(w.next().await, ("ADDED".into(), "new".into(), "web".into()));
        assert_eq!(
            w.next().await,
            ("MODIFIED".into(), "new".into(), "db".into())
        );
        assert_eq!(w.next().await.0, "DELETED");
    }
    for w in [&mut web, &mut now] {
        assert_eq!(w.next().await, ("ADDED".into(), "new".into(), "web".into()));
        // Relabelled out of the selection: deleted for this watcher, and nothing after.
        assert_eq!(
            w.next().await,
            ("DELETED".into(), "new".into(), "db".into())
        );
    }

    // A version the cache has no history for is passed through to the instance.
    let old = open(&proxy, "resourceVersion=1").await;
    assert_eq!(old.source, "instance");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kube_watcher_works_through_the_cache() {
    let api = KairshipApi::start(1).await;
    let proxy = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let through: Api<Deployment> = Api::namespaced(proxy, "default");
    let direct: Api<Deployment> = Api::namespaced(api.env.sim.client("karmada-1").await, "default");
    let mut seen = watcher(through, watcher::Config::default().any_semantic())
        .applied_objects()
        .boxed();
    direct
        .create(&PostParams::default(), &deployment("watched", "web"))
        .await
        .expect("create");
    let got = tokio::time::timeout(Duration::from_secs(15), async {
        while let Some(d) = seen.next().await {
            let d = d.expect("watch event");
            if d.metadata.name.as_deref() == Some("watched") {
                return d;
            }
        }
        panic!("watch ended")
    })
    .await
    .expect("the watcher saw the new deployment");
    assert_eq!(got.metadata.labels.unwrap_or_default()["app"], "web");
    api.stop().await;
}

/// A Table event's cells, ages (printed when sent, so a second apart at times) masked.
fn cells(ev: &Value) -> Vec<Value> {
    let is_age = |s: &str| s.ends_with('s') && s[..s.len() - 1].bytes().all(|b| b.is_ascii_digit());
    ev["object"]["rows"][0]["cells"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|c| match c.as_str() {
            Some(s) if is_age(s) => json!("<age>"),
            _ => c,
        })
        .collect()
}

/// `kubectl get -w` from the cache: one-row Tables, the first with the column definitions,
/// the same events (cells and all) as the instance sends for the same changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_watches_are_served_from_the_cache_as_the_instance_serves_them() {
    let api = KairshipApi::start(1).await;
    let proxy = crate::common::client_from(&api.proxy_kubeconfig("karmada-1")).await;
    let direct: Api<Deployment> = Api::namespaced(api.env.sim.client("karmada-1").await, "default");
    let mut cached = open_as(&proxy, "", TABLE, false).await;
    let mut passed = open_as(&proxy, "", TABLE, true).await;
    assert_eq!(
        (cached.source.as_str(), passed.source.as_str()),
        ("cache", "instance")
    );
    direct
        .create(&PostParams::default(), &deployment("tabled", "web"))
        .await
        .expect("create");
    let relabel = Patch::Merge(json!({"spec": {"replicas": 3}}));
    direct
        .patch("tabled", &PatchParams::default(), &relabel)
        .await
        .expect("patch");
    for expected in ["ADDED", "MODIFIED"] {
        let (c, p) = (cached.next_event().await, passed.next_event().await);
        for ev in [&c, &p] {
            assert_eq!(ev["type"], expected, "{ev}");
            assert_eq!(ev["object"]["kind"], "Table", "{ev}");
            assert_eq!(
                ev["object"]["rows"].as_array().map(Vec::len),
                Some(1),
                "{ev}"
            );
        }
        let columns = |ev: &Value| {
            ev["object"]["columnDefinitions"]
                .as_array()
                .map_or(0, Vec::len)
        };
        assert_eq!(columns(&c), columns(&p), "column definitions: {c} vs {p}");
        assert_eq!(
            columns(&c) > 0,
            expected == "ADDED",
            "only the first event has them: {c}"
        );
        assert_eq!(cells(&c), cells(&p));
        assert_eq!(
            c["object"]["rows"][0]["object"]["metadata"],
            p["object"]["rows"][0]["object"]["metadata"]
        );
        assert_eq!(c["object"]["metadata"], p["object"]["metadata"]);
    }
    api.stop().await;
}
