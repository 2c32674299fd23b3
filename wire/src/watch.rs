//! Watch events as kube-apiserver writes them: one JSON object per line,
//! `{"type":...,"object":...}`.

use bytes::{BufMut, Bytes, BytesMut};

/// A watch event's type for a change of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }

    /// Its position (0, 1, 2), for keeping something per event type in an array.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One event line: `{"type":"<kind>","object":<object>}` and a newline (`kind` may also be
/// `BOOKMARK` or `ERROR`).
pub fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(object.len() + 32);
    b.put_slice(b"{\"type\":\"");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\",\"object\":");
    b.put_slice(object);
    b.put_slice(b"}\n");
    b.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_and_a_newline() {
        let l = line(EventType::Modified.as_str(), br#"{"kind":"Pod"}"#);
        assert_eq!(
            &l[..],
            b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\"}}\n"
        );
    }
}
