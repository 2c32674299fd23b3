//! A cached LIST's JSON answer, written while it is sent in pieces smaller than the
//! allocator's mmap threshold (128 KiB, `kairship_heap::configure`). Built whole, the
//! answer to a LIST of 1,000 Deployments (~0.9 MB) was a mapping of its own, made and
//! unmapped again for every request with a page fault on each of its pages; and 100,000
//! Deployments' answer (~87 MB) was held in full beside the cache until the last byte left.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Frame, SizeHint};

use crate::cache::object::CachedObject;

/// Well under the mmap threshold, and large enough that TLS records are full.
const PIECE: usize = 64 * 1024;

/// `{<head's fields>,"items":[<object>,...]}`, the objects' JSON as the cache keeps it.
pub struct ListBody {
    /// The list's own fields as a JSON object; sent without its closing brace.
    head: Option<Bytes>,
    objects: Vec<Arc<CachedObject>>,
    next: usize,
    /// Bytes not sent yet.
    remaining: u64,
}

impl ListBody {
    /// `head` is a JSON object (`{"kind":...,"metadata":{...}}`).
    pub fn new(head: String, objects: Vec<Arc<CachedObject>>) -> Self {
        let head = head.trim_end();
        let head = head.strip_suffix('}').unwrap_or(head);
        let mut start = BytesMut::with_capacity(head.len() + 10);
        start.extend_from_slice(head.as_bytes());
        start.extend_from_slice(b",\"items\":[");
        let commas = objects.len().saturating_sub(1);
        let items: usize = objects.iter().map(|o| o.json().len()).sum();
        let remaining = (start.len() + items + commas + 2) as u64;
        Self {
            head: Some(start.freeze()),
            objects,
            next: 0,
            remaining,
        }
    }

    /// The next piece: objects are appended while the piece stays under [`PIECE`] (an
    /// object larger than that is a piece of its own).
    fn piece(&mut self) -> Bytes {
        let mut piece = BytesMut::with_capacity(PIECE.min(self.remaining as usize));
        if let Some(head) = self.head.take() {
            piece.extend_from_slice(&head);
        }
        while let Some(o) = self.objects.get(self.next) {
            let json = o.json();
            let comma = usize::from(self.next > 0);
            if !piece.is_empty() && piece.len() + comma + json.len() > PIECE {
                break;
            }
            if comma == 1 {
                piece.put_u8(b',');
            }
            piece.extend_from_slice(json);
            self.next += 1;
        }
        if self.next == self.objects.len() {
            piece.extend_from_slice(b"]}");
            // Nothing more to send: the objects go back to the cache's sole keeping.
            self.objects = Vec::new();
            self.next = 0;
        }
        self.remaining = self.remaining.saturating_sub(piece.len() as u64);
        piece.freeze()
    }
}

impl http_body::Body for ListBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Ok(Frame::data(this.piece()))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;
    use http_body_util::BodyExt;
    use serde_json::{json, Value};

    use super::*;
    use crate::cache::raw::RawObject;

    fn object(name: &str, pad: usize) -> Arc<CachedObject> {
        let v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "7"},
            "data": {"pad": "x".repeat(pad)}});
        let raw: RawObject = serde_json::from_str(&v.to_string()).expect("raw object");
        Arc::new(CachedObject::new(raw, Some("default".into())))
    }

    async fn collect(body: ListBody) -> (Vec<usize>, Value, u64) {
        let hint = body.size_hint().exact().expect("exact size");
        let mut body = body;
        let mut pieces = Vec::new();
        let mut all = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.expect("infallible").into_data().expect("data");
            pieces.push(data.len());
            all.extend_from_slice(&data);
        }
        assert_eq!(
            all.len() as u64,
            hint,
            "the size announced is the size sent"
        );
        let v = serde_json::from_slice(&all).expect("the pieces make one JSON document");
        (pieces, v, hint)
    }

    const HEAD: &str =
        r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"}}"#;

    #[tokio::test]
    async fn pieces_make_the_list_in_order_and_stay_under_the_piece_size() {
        let objects: Vec<_> = (0..300)
            .map(|i| object(&format!("cm-{i:03}"), 1000))
            .collect();
        let (pieces, v, _) = collect(ListBody::new(HEAD.into(), objects)).await;
        assert!(pieces.len() > 3, "{pieces:?}");
        assert!(pieces.iter().all(|p| *p <= PIECE), "{pieces:?}");
        assert_eq!(v["kind"], "ConfigMapList");
        assert_eq!(v["metadata"]["resourceVersion"], "9");
        let names: Vec<_> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let expected: Vec<_> = (0..300).map(|i| format!("cm-{i:03}")).collect();
        assert_eq!(names, expected);
    }

    #[tokio::test]
    async fn empty_and_oversized_objects() {
        let (pieces, v, _) = collect(ListBody::new(HEAD.into(), Vec::new())).await;
        assert_eq!(pieces.len(), 1);
        assert_eq!(v["items"], json!([]));
        let objects = vec![
            object("small", 10),
            object("big", 3 * PIECE),
            object("after", 10),
        ];
        let (pieces, v, _) = collect(ListBody::new(HEAD.into(), objects)).await;
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert!(pieces[1] > PIECE, "the large object is a piece of its own");
        assert_eq!(v["items"].as_array().map(Vec::len), Some(3));
    }
}
