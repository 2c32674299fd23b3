//! A pod's log as Kairship streams it, wherever the pod runs (a member, through Karmada's
//! cluster proxy; the host, for a managed instance's components): the query kubelet
//! takes, the answer cut into chunks of whole lines, and a refusal in the caller's words.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde_json::Value;
use tonic::Status;

use crate::error::{check_name, ApiError};
use crate::proto;

/// A log read without `follow` stops here, as a bound on what one answer holds.
const LOG_LIMIT_BYTES: u64 = 8 << 20;

pub type LogStream = Pin<Box<dyn Stream<Item = Result<proto::PodLogChunk, Status>> + Send>>;

/// What a log read asks for.
pub struct Options<'a> {
    pub container: &'a str,
    pub tail_lines: i64,
    pub since_seconds: i64,
    pub previous: bool,
    pub follow: bool,
    pub timestamps: bool,
}

/// The `pods/log` query for `o`, checked.
pub fn query(o: &Options<'_>) -> Result<String, ApiError> {
    if !o.container.is_empty() {
        check_name("container", o.container)?;
    }
    if o.tail_lines < 0 || o.since_seconds < 0 {
        return Err(ApiError::invalid(
            "tail_lines",
            "tail_lines and since_seconds must not be negative",
        ));
    }
    let mut query: Vec<(&str, String)> = Vec::new();
    if !o.container.is_empty() {
        query.push(("container", o.container.to_string()));
    }
    if o.tail_lines > 0 {
        query.push(("tailLines", o.tail_lines.to_string()));
    }
    if o.since_seconds > 0 {
        query.push(("sinceSeconds", o.since_seconds.to_string()));
    }
    for (flag, on) in [
        ("previous", o.previous),
        ("follow", o.follow),
        ("timestamps", o.timestamps),
    ] {
        if on {
            query.push((flag, "true".into()));
        }
    }
    if !o.follow {
        query.push(("limitBytes", LOG_LIMIT_BYTES.to_string()));
    }
    serde_urlencoded::to_string(&query).map_err(|e| ApiError::Internal(e.to_string()))
}

/// The longest unfinished line kept for the next chunk: past it, the line goes out as it
/// is (a container that never writes a newline would otherwise grow the carry forever).
/// kubelet itself splits lines at 16 KiB.
const MAX_CARRY: usize = 64 << 10;

/// Whole lines of `carry` + `chunk`, keeping an unfinished last line (and any split UTF-8
/// sequence) in `carry` for the next chunk, at most `MAX_CARRY` bytes of it.
fn whole_lines(carry: &mut Vec<u8>, chunk: &[u8]) -> Option<String> {
    carry.extend_from_slice(chunk);
    let end = match carry.iter().rposition(|b| *b == b'\n') {
        Some(i) => i + 1,
        None if carry.len() > MAX_CARRY => utf8_boundary(carry),
        None => return None,
    };
    let lines: Vec<u8> = carry.drain(..end).collect();
    Some(String::from_utf8_lossy(&lines).into_owned())
}

/// Where `bytes` may be cut without splitting a UTF-8 sequence (its end, or before a
/// sequence the next chunk finishes).
fn utf8_boundary(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

/// The log in `answer` as a stream of whole-line chunks (an error naming `what` when the
/// answer is a refusal); `guard` is held while it runs, and it ends when `closing` resolves.
pub async fn chunks<G: Send + 'static>(
    answer: http::Response<kube::client::Body>,
    what: &str,
    guard: G,
    closing: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<LogStream, ApiError> {
    if !answer.status().is_success() {
        return Err(refused(answer, what).await);
    }
    let body = http_body_util::BodyStream::new(answer.into_body());
    let carry = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let rest = carry.clone();
    let chunks = body
        .filter_map(move |frame| {
            let out = match frame {
                Ok(f) => f
                    .into_data()
                    .ok()
                    .and_then(|d| whole_lines(&mut carry.lock(), &d))
                    .map(|text| Ok(proto::PodLogChunk { text })),
                Err(e) => Some(Err(Status::unavailable(format!("reading the log: {e}")))),
            };
            futures::future::ready(out)
        })
        // A last line without its newline.
        .chain(futures::stream::once(async move {
            let rest = std::mem::take(&mut *rest.lock());
            Ok(proto::PodLogChunk {
                text: String::from_utf8_lossy(&rest).into_owned(),
            })
        }))
        .filter(|c| futures::future::ready(c.as_ref().map_or(true, |c| !c.text.is_empty())))
        .take_until(closing)
        // The guard goes with the stream.
        .inspect(move |_| {
            let _ = &guard;
        });
    Ok(Box::pin(chunks))
}

/// The API server's refusal of a log read, as an error naming `what`.
async fn refused(answer: http::Response<kube::client::Body>, what: &str) -> ApiError {
    let code = answer.status().as_u16();
    let bytes = crate::api::body::read_limited(
        axum::body::Body::new(answer.into_body()),
        64 << 10,
        "the refusal",
    )
    .await
    .unwrap_or_default();
    let message = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["message"].as_str().map(String::from))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_string());
    match code {
        403 => ApiError::Forbidden(Box::new(crate::error::Refusal {
            message,
            name: String::new(),
            group: String::new(),
            kind: "pods/log".into(),
        })),
        404 => ApiError::NotFound(format!("{what}: {message}")),
        400 => ApiError::invalid("pod", format!("{what}: {message}")),
        _ => ApiError::Unavailable(format!("{what}: {code} {message}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_chunks_end_on_whole_lines() {
        let mut carry = Vec::new();
        assert_eq!(whole_lines(&mut carry, b"one\ntw"), Some("one\n".into()));
        // A line that never ends is sent on once it passes the bound, not held.
        let mut endless = Vec::new();
        let block = "é".repeat(MAX_CARRY / 4);
        assert_eq!(whole_lines(&mut endless, block.as_bytes()), None);
        let more = format!("{block}é");
        let out = whole_lines(&mut endless, more.as_bytes()).expect("sent on");
        assert!(
            out.len() > MAX_CARRY && endless.is_empty(),
            "{}",
            endless.len()
        );
        assert!(whole_lines(&mut endless, &[0xc3]).is_none_or(|s| !s.contains('\u{fffd}')));
        // A chunk that ends inside a UTF-8 sequence waits for the rest of it.
        let text = "o \u{e9}\n".as_bytes();
        assert_eq!(whole_lines(&mut carry, &text[..3]), None);
        assert_eq!(
            whole_lines(&mut carry, &text[3..]),
            Some("two \u{e9}\n".into())
        );
    }
}
