//! An object as an instance's list or watch sent it. The caches keep its JSON as received,
//! one allocation of exactly its size, and decode only the metadata they index (name,
//! namespace, resourceVersion, labels). Decoding the whole object into maps and strings
//! and encoding it again cost some 60 short-lived allocations per event, freed among the
//! kept ones: a cache filled by watch events was twice as resident as one filled by its
//! first list (issue 60).

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, TypeMeta};
use kube::core::DynamicResourceScope;
use serde::Deserialize;
use serde_json::value::RawValue;

/// One object of a cached kind, as received.
#[derive(Clone, Debug)]
pub struct RawObject {
    /// `apiVersion` and `kind`: the JSON's own, or set by the watch for list items, which
    /// kube-apiserver sends without them.
    pub types: Option<TypeMeta>,
    /// What the caches read of the metadata: name, namespace, resourceVersion, labels.
    pub metadata: ObjectMeta,
    json: Box<RawValue>,
    /// Whether `json` names its own apiVersion and kind.
    typed: bool,
    /// Where the metadata sits in `json`.
    metadata_at: (usize, usize),
}

/// The top level of an object, its metadata left as JSON.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

/// The metadata the caches and kube-runtime's watcher read; the rest is skipped unread.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

impl RawObject {
    /// Reads the fields the caches need from `json`, keeping it. JSON that spans lines
    /// (never sent by kube-apiserver) is written again on one, since watch events are
    /// lines.
    pub fn new(json: Box<RawValue>) -> Result<Self, serde_json::Error> {
        let json = if json.get().contains('\n') {
            let value: serde_json::Value = serde_json::from_str(json.get())?;
            serde_json::value::to_raw_value(&value)?
        } else {
            json
        };
        let top: Top<'_> = serde_json::from_str(json.get())?;
        let (metadata, metadata_at) = match top.metadata {
            Some(m) => {
                let meta: Meta = serde_json::from_str(m.get())?;
                let start =
                    (m.get().as_ptr() as usize).saturating_sub(json.get().as_ptr() as usize);
                let metadata = ObjectMeta {
                    name: meta.name,
                    namespace: meta.namespace,
                    resource_version: meta.resource_version,
                    labels: meta.labels,
                    ..Default::default()
                };
                (metadata, (start, start + m.get().len()))
            }
            None => (ObjectMeta::default(), (0, 0)),
        };
        let types = match (top.api_version, top.kind) {
            (Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        };
        Ok(Self {
            typed: types.is_some(),
            types,
            metadata,
            json,
            metadata_at,
        })
    }

    /// `json`, parsed as [`RawObject::new`] does.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        Self::new(RawValue::from_string(json.to_string())?)
    }

    /// The object's JSON, naming its apiVersion and kind, and where its metadata sits in
    /// it. Kept as received (no copy) when it names them itself.
    pub fn into_json(self) -> (Bytes, (usize, usize)) {
        let types = self.types.filter(|_| !self.typed);
        let received: Box<str> = self.json.into();
        let Some(types) = types else {
            return (Bytes::from(received.into_boxed_bytes()), self.metadata_at);
        };
        let mut head = Vec::with_capacity(64);
        head.extend_from_slice(b"{\"apiVersion\":");
        push_string(&mut head, &types.api_version);
        head.extend_from_slice(b",\"kind\":");
        push_string(&mut head, &types.kind);
        // `received` is an object: `{` then its fields, if any, then `}`.
        let rest = received.get(1..).unwrap_or("}");
        if !rest.trim_start().starts_with('}') {
            head.push(b',');
        }
        let shift = head.len() - 1;
        // Exactly the object's size: no spare capacity kept per object.
        let mut out = Vec::with_capacity(head.len() + rest.len());
        out.extend_from_slice(&head);
        out.extend_from_slice(rest.as_bytes());
        let at = if self.metadata_at == (0, 0) {
            (0, 0)
        } else {
            (self.metadata_at.0 + shift, self.metadata_at.1 + shift)
        };
        (Bytes::from(out.into_boxed_slice()), at)
    }
}

fn push_string(buf: &mut Vec<u8>, s: &str) {
    // Serializing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, s);
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = Box::<RawValue>::deserialize(d)?;
        Self::new(json).map_err(serde::de::Error::custom)
    }
}

impl kube::Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"prod","resourceVersion":"42","labels":{"app":"web"},"managedFields":[{"manager":"kubectl"}]},"spec":{"replicas":3}}"#;

    #[test]
    fn a_typed_object_is_kept_as_received() {
        let raw = RawObject::from_json(DEPLOYMENT).expect("object");
        assert_eq!(raw.metadata.name.as_deref(), Some("web"));
        assert_eq!(raw.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(raw.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(
            raw.metadata.labels.as_ref().map(|l| l["app"].as_str()),
            Some("web")
        );
        let (json, (start, end)) = raw.into_json();
        assert_eq!(&json[..], DEPLOYMENT.as_bytes());
        let meta: serde_json::Value = serde_json::from_slice(&json[start..end]).expect("metadata");
        assert_eq!(meta["managedFields"][0]["manager"], "kubectl");
    }

    #[test]
    fn a_list_item_gains_the_types_the_watch_gives_it() {
        let item = r#"{"metadata":{"name":"web","resourceVersion":"7"},"spec":{"replicas":1}}"#;
        let mut raw = RawObject::from_json(item).expect("object");
        assert!(raw.types.is_none());
        raw.types = Some(TypeMeta {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
        });
        let (json, (start, end)) = raw.into_json();
        let v: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(v["apiVersion"], "apps/v1");
        assert_eq!(v["kind"], "Deployment");
        assert_eq!(v["spec"]["replicas"], 1);
        assert_eq!(
            &json[start..end],
            br#"{"name":"web","resourceVersion":"7"}"#
        );
    }

    #[test]
    fn an_empty_object_gains_types_without_a_dangling_comma() {
        let mut raw = RawObject::from_json("{}").expect("object");
        raw.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "Namespace".into(),
        });
        let (json, at) = raw.into_json();
        assert_eq!(&json[..], br#"{"apiVersion":"v1","kind":"Namespace"}"#);
        assert_eq!(at, (0, 0));
    }

    #[test]
    fn json_over_several_lines_is_kept_on_one() {
        let pretty = "{\n  \"metadata\": {\"name\": \"a\"},\n  \"data\": {\"k\": \"v\\nw\"}\n}";
        let raw = RawObject::from_json(pretty).expect("object");
        let (json, (start, end)) = raw.into_json();
        assert!(!json.contains(&b'\n'));
        assert_eq!(&json[start..end], br#"{"name":"a"}"#);
    }

    #[test]
    fn a_watch_event_decodes_into_one() {
        let line = format!(r#"{{"type":"MODIFIED","object":{DEPLOYMENT}}}"#);
        let ev: kube::api::WatchEvent<RawObject> = serde_json::from_str(&line).expect("event");
        let kube::api::WatchEvent::Modified(raw) = ev else {
            panic!("not a modification");
        };
        assert_eq!(raw.metadata.name.as_deref(), Some("web"));
    }

    #[test]
    fn an_object_that_is_not_one_is_refused() {
        assert!(RawObject::from_json("[1]").is_err());
        assert!(RawObject::from_json(r#"{"metadata":{"labels":{"a":1}}}"#).is_err());
    }
}
