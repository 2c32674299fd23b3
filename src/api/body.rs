//! Reading a request body with a size limit, the same way on every HTTP surface.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

use crate::error::ApiError;

/// Past the limit, this much more is read and dropped so the client finishes sending and
/// reads the 413; a connection closed mid-upload shows the client a broken pipe instead.
const DRAIN_FACTOR: usize = 4;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The whole body, or `PayloadTooLarge` naming `what` and the limit.
pub async fn read_limited(
    body: axum::body::Body,
    max: usize,
    what: &str,
) -> Result<Bytes, ApiError> {
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut seen = 0usize;
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| ApiError::invalid("body", format!("reading the request body: {e}")))?;
            if let Ok(data) = frame.into_data() {
                seen = seen.saturating_add(data.len());
                if seen <= max {
                    buf.extend_from_slice(&data);
                } else if seen > max.saturating_mul(DRAIN_FACTOR) {
                    break;
                }
            }
        }
        Ok::<(), ApiError>(())
    };
    let finished = tokio::time::timeout(DRAIN_TIMEOUT, read).await;
    if seen > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "{what} is larger than the limit of {max} bytes"
        )));
    }
    finished.map_err(|_| {
        ApiError::DeadlineExceeded(format!("{what} did not arrive within {DRAIN_TIMEOUT:?}"))
    })??;
    Ok(buf.freeze())
}
