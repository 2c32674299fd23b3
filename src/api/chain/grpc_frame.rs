//! The one gRPC frame codec: a unary request's one message, read by the authorization
//! layer to find the instance it names, then handed on unchanged; frames split off a
//! stream (REST's streamed answers) and made.

use axum::body::Body;
use bytes::Bytes;

use crate::error::ApiError;

/// tonic's own default bound on a decoded message.
pub const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// How long the message may take to arrive.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The message length a frame's 5-byte head gives (a flag byte, a big-endian length),
/// once `buf` holds the head.
pub fn length(buf: &[u8]) -> Option<usize> {
    let head: [u8; 4] = buf.get(1..5)?.try_into().ok()?;
    usize::try_from(u32::from_be_bytes(head)).ok()
}

/// The first whole frame's message, taken off the front of `buf`; `None` until one is in.
pub fn split(buf: &mut bytes::BytesMut) -> Option<Bytes> {
    let len = length(buf)?;
    (buf.len() >= 5 + len).then(|| buf.split_to(5 + len).freeze().slice(5..))
}

/// The request's first length-prefixed message (its frame), bounded in size and time: the
/// whole body the handler gets. Every method is unary, so nothing after the message is the
/// handler's: the rest of the caller's stream is dropped instead of waited for (a caller
/// that never ends its stream, or sends more, holds nothing), and the handler starts as
/// soon as the message is in.
pub async fn read(body: Body) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut buf = bytes::BytesMut::new();
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "the request message is larger than the limit of {MAX_MESSAGE} bytes"
        ))
    };
    let read = async {
        loop {
            if let Some(len) = length(&buf) {
                if len > MAX_MESSAGE {
                    return Err(too_large());
                }
                if buf.len() >= 5 + len {
                    return Ok(());
                }
            }
            match body.frame().await {
                None => return Ok(()),
                Some(Err(e)) => {
                    return Err(ApiError::invalid(
                        "body",
                        format!("reading the request body: {e}"),
                    ))
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if buf.len() + data.len() > MAX_MESSAGE + 5 {
                            return Err(too_large());
                        }
                        buf.extend_from_slice(&data);
                    }
                }
            }
        }
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| {
            ApiError::DeadlineExceeded(format!(
                "the request message did not arrive within {READ_TIMEOUT:?}"
            ))
        })??;
    Ok(buf.freeze())
}

/// The message of a frame: an uncompressed, length-prefixed message filling the body.
pub fn message(frame: &[u8]) -> Result<&[u8], ApiError> {
    let bad = |why: &str| ApiError::invalid("message", format!("not a unary gRPC request: {why}"));
    let (head, rest) = frame
        .split_at_checked(5)
        .ok_or_else(|| bad("shorter than a frame header"))?;
    if head[0] != 0 {
        return Err(bad("compressed messages are not accepted"));
    }
    if length(head) != Some(rest.len()) {
        return Err(bad("the frame's length is not the body's"));
    }
    Ok(rest)
}

/// `message` as one uncompressed frame.
pub fn frame(message: &[u8]) -> Result<Bytes, ApiError> {
    let len = u32::try_from(message.len())
        .map_err(|_| ApiError::ResourceExhausted("the message is too large".into()))?;
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(message);
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_named() {
        let f = frame(b"abc").expect("frame");
        assert_eq!(message(&f).expect("message"), b"abc");
        assert!(message(&f[..4]).is_err());
        let mut compressed = f.to_vec();
        compressed[0] = 1;
        assert!(message(&compressed)
            .expect_err("compressed")
            .to_string()
            .contains("compressed"));
        let mut long = f.to_vec();
        long.push(b'x');
        assert!(message(&long).is_err());
    }
}
