//! One object as the caches hold it: its JSON, as the list or watch delivered it,
//! and the few fields every read filters or sorts on (name, namespace, version, labels).
//! Everything else (a workload's replicas, a binding's clusters, a policy's selectors) is
//! decoded from the JSON on the rare paths that need it. A Table row is printed on first
//! use and kept beside the JSON, sharing its metadata bytes.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kairship_wire::table::{Column, Row};
use kube::api::DynamicObject;

use super::raw::RawObject;

/// A cached object. Cheap to share (`Arc`); immutable but for its row, printed once.
pub struct CachedObject {
    json: Bytes,
    /// Where `metadata` sits in `json`.
    metadata: (u32, u32),
    name: Arc<str>,
    namespace: Option<Arc<str>>,
    resource_version: u64,
    /// `key\0value\0` for each label, in the object's order.
    labels: Box<str>,
    row: OnceLock<Row>,
}

impl std::fmt::Debug for CachedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedObject")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("resource_version", &self.resource_version)
            .finish()
    }
}

/// Why an object could not be decoded again from its JSON (never expected: the JSON was
/// written from a decoded object).
#[derive(Debug, thiserror::Error)]
#[error("cached {what} cannot be decoded: {source}")]
pub struct DecodeError {
    what: String,
    source: serde_json::Error,
}

impl CachedObject {
    /// Keeps `o`'s JSON as received (naming its apiVersion and kind); `namespace` is the
    /// store's shared copy of the object's namespace name.
    pub fn new(o: RawObject, namespace: Option<Arc<str>>) -> Self {
        let size = o.metadata.labels.iter().flatten();
        let mut labels = String::with_capacity(size.map(|(k, v)| k.len() + v.len() + 2).sum());
        for (k, v) in o.metadata.labels.iter().flatten() {
            labels.push_str(k);
            labels.push('\0');
            labels.push_str(v);
            labels.push('\0');
        }
        let name = Arc::from(o.metadata.name.as_deref().unwrap_or_default());
        let resource_version = o
            .metadata
            .resource_version
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let (json, (start, end)) = o.into_json();
        let offset = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            json,
            metadata: (offset(start), offset(end)),
            name,
            namespace,
            resource_version,
            labels: labels.into_boxed_str(),
            row: OnceLock::new(),
        }
    }

    /// The object's JSON, as a GET of it answers.
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub(crate) fn namespace_arc(&self) -> Option<&Arc<str>> {
        self.namespace.as_ref()
    }

    /// `metadata.resourceVersion` as a number (0 if it is not one).
    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// The value of label `key`, if the object has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        let mut parts = self.labels.split('\0');
        while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
            if k == key {
                return Some(v);
            }
        }
        None
    }

    /// Every label, in the object's order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut parts = self.labels.split('\0');
        std::iter::from_fn(move || match (parts.next(), parts.next()) {
            (Some(k), Some(v)) => Some((k, v)),
            _ => None,
        })
    }

    /// The whole object, decoded from its JSON: for the paths that read its spec or status.
    pub fn decode(&self) -> Result<DynamicObject, DecodeError> {
        serde_json::from_slice(&self.json).map_err(|source| DecodeError {
            what: format!(
                "{}/{}",
                self.namespace.as_deref().unwrap_or_default(),
                self.name
            ),
            source,
        })
    }

    /// The object's Table row with `columns` (its kind's, fixed for the cache's life),
    /// printed on first use.
    fn row(&self, columns: &[Column]) -> &Row {
        self.row.get_or_init(|| {
            let value: serde_json::Value = serde_json::from_slice(&self.json).unwrap_or_default();
            Row::new(columns, &value)
        })
    }

    /// The object's row beside its serialized metadata, as [`kairship_wire::table::write`]
    /// takes them.
    pub fn row_and_metadata(&self, columns: &[Column]) -> (&Row, &[u8]) {
        let (start, end) = (self.metadata.0 as usize, self.metadata.1 as usize);
        (
            self.row(columns),
            self.json.get(start..end).unwrap_or(b"{}"),
        )
    }

    /// Bytes this object keeps (its JSON, fields, row; not the shared name and namespace
    /// strings), for the memory figures.
    pub fn kept_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.json.len()
            + self.labels.len()
            + self
                .row
                .get()
                .map_or(0, |r| r.kept_bytes() - std::mem::size_of::<Row>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"prod","resourceVersion":"42","creationTimestamp":"2020-01-01T00:00:00Z","labels":{"app":"web","tier":"front"}},"spec":{"replicas":3},"status":{"readyReplicas":2}}"#;

    fn deployment() -> RawObject {
        RawObject::from_json(DEPLOYMENT).expect("object")
    }

    #[test]
    fn the_json_is_kept_as_received() {
        let c = CachedObject::new(deployment(), Some(Arc::from("prod")));
        assert_eq!(&c.json()[..], DEPLOYMENT.as_bytes());
        assert_eq!(c.decode().expect("decode").data["spec"]["replicas"], 3);
    }

    #[test]
    fn fields_and_labels() {
        let c = CachedObject::new(deployment(), Some(Arc::from("prod")));
        assert_eq!((c.namespace(), c.name()), (Some("prod"), "web"));
        assert_eq!(c.resource_version(), 42);
        assert_eq!(c.label("tier"), Some("front"));
        assert_eq!(c.label("web"), None);
        assert_eq!(c.labels().count(), 2);
    }

    #[test]
    fn the_row_is_written_with_the_metadata_of_the_json() {
        let c = CachedObject::new(deployment(), Some(Arc::from("prod")));
        let columns = kairship_wire::table::builtin_columns("apps", "Deployment").expect("columns");
        let table = kairship_wire::table::write(
            &columns,
            &[c.row_and_metadata(&columns)],
            false,
            json!({}),
        );
        let t: serde_json::Value = serde_json::from_slice(&table).expect("table");
        assert_eq!(
            t["rows"][0]["object"]["metadata"]["labels"]["tier"],
            "front"
        );
        assert_eq!(t["rows"][0]["cells"][0], "web");
    }
}
