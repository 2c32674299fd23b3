//! `kubectl get` served from the cache prints what the instance prints: for a built-in kind
//! (Deployments, Namespaces) and Karmada's CRDs (PropagationPolicies, ResourceBindings), the
//! Table from Kairship's cache has the instance's columns and cells (ages aside: they move).
//! Run through the proxy against the simulated fleet and the real one.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::Value;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// The Table at `path` and who answered it (`cache` or `instance`).
async fn table(client: &kube::Client, path: &str, force_instance: bool) -> (Value, String) {
    let mut req = http::Request::get(path).header(http::header::ACCEPT, TABLE);
    if force_instance {
        req = req.header("x-kairship-source", "instance");
    }
    let resp = client
        .send(req.body(kube::client::Body::empty()).expect("request"))
        .await
        .expect("GET answers");
    let source = resp
        .headers()
        .get("x-kairship-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(
        status.is_success(),
        "{path}: {status} {}",
        String::from_utf8_lossy(&body)
    );
    (serde_json::from_slice(&body).expect("a Table"), source)
}

/// Columns as (name, type, priority), and the cells of non-date columns per row name.
type Columns = Vec<(String, String, i64)>;
type Rows = Vec<(String, Vec<Value>)>;

fn shape(t: &Value) -> (Columns, Rows) {
    let cols: Columns = t["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_uppercase(),
                c["type"].as_str().unwrap_or_default().to_string(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let age = |i: usize| cols.get(i).is_some_and(|c| c.0 == "AGE" || c.1 == "date");
    let rows = t["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let name = r["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let cells = r["cells"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(i, _)| !age(*i))
                .map(|(_, c)| c.clone())
                .collect();
            (name, cells)
        })
        .collect();
    (cols, rows)
}

pub async fn tables_match(client: &kube::Client, within: Duration) {
    for path in [
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/deployments/nginx",
        "/api/v1/namespaces",
        "/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies",
        "/apis/work.karmada.io/v1alpha2/namespaces/default/resourcebindings",
    ] {
        // The cache and the instance see the same objects once status settles.
        let same = crate::poll(within, crate::POLL, || async move {
            let (cached, source) = table(client, path, false).await;
            assert_eq!(source, "cache", "{path} served from the cache");
            let (direct, source) = table(client, path, true).await;
            assert_eq!(source, "instance", "{path} forced to the instance");
            let (a, b) = (shape(&cached), shape(&direct));
            assert_eq!(a.0, b.0, "{path}: columns");
            if !a.1.is_empty() && a.1 == b.1 {
                Ok(())
            } else {
                Err((a.1, b.1))
            }
        })
        .await;
        if let Err((a, b)) = same {
            panic!("{path}: no rows, or cells differ\ncache:    {a:?}\ninstance: {b:?}");
        }
    }
}
