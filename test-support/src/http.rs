//! One raw request through a `kube::Client` (Kairship's REST, its proxy, an instance),
//! answered as its status code and body text, bounded in time: the many tests that look
//! at a status code and a message share this instead of each reading a body its own way.

use std::time::Duration;

/// How long one request may take before it counts as unanswered.
pub const WITHIN: Duration = Duration::from_secs(20);

/// `method path` with `body` (JSON when given, or as `content_type` says): the status
/// code and the body's text; code 0 with the error when there was no answer.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, String) {
    let mut req = http::Request::builder().method(method).uri(path);
    let bytes = match body {
        Some((content_type, bytes)) => {
            req = req.header(http::header::CONTENT_TYPE, content_type);
            bytes
        }
        None => Vec::new(),
    };
    let req = req
        .body(kube::client::Body::from(bytes))
        .expect("a request");
    match tokio::time::timeout(WITHIN, client.send(req)).await {
        Ok(Ok(resp)) => {
            let code = resp.status().as_u16();
            let bytes = http_body_util::BodyExt::collect(resp.into_body())
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            (code, String::from_utf8_lossy(&bytes).into_owned())
        }
        Ok(Err(e)) => (0, e.to_string()),
        Err(_) => (0, format!("no answer within {WITHIN:?}")),
    }
}

/// `send` with a JSON body.
pub async fn json(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, String) {
    let bytes = body.to_string().into_bytes();
    send(client, method, path, Some(("application/json", bytes))).await
}

/// The `message` of a Kubernetes `Status` (or `google.rpc.Status`) body, else the body.
pub fn message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.to_string())
}
