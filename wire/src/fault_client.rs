//! The client side of the fault API pinned in ../shared/DESIGN.md (`POST {sim_admin}/faults/{instance}`
//! with `{"mode": ...}`, `DELETE` to clear), which the simulator and the real fleet both
//! serve over plain HTTP on loopback.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

/// A call that got no answer (the server's own refusals come back as a status code).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CallError(String);

/// Sends `method` to `url` with an optional JSON body; the answer's status and body (JSON,
/// or the text as a JSON string), within 10 s.
pub async fn call(method: &str, url: &str, body: Option<Value>) -> Result<(u16, Value), CallError> {
    use http_body_util::{BodyExt, Full};
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(payload))
        .map_err(|e| CallError(format!("building request to {url}: {e}")))?;
    let fut = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| CallError(format!("calling {url}: {e}")))?;
        let code = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| CallError(format!("reading answer from {url}: {e}")))?
            .to_bytes();
        let v = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok((code, v))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| CallError(format!("calling {url}: timed out after 10s")))?
}
