//! Field validation (`?fieldValidation=Ignore|Warn|Strict`): fields the kind's schema
//! does not declare are dropped, with a warning each (`Warn`, the default) or silently
//! (`Ignore`), or the write fails naming them (`Strict`); so are duplicate fields.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{json, Map, Value};

use crate::openapi::walk::{Node, Shape};
use kairship_wire::status::{ApiError, ApiResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl Validation {
    /// The query parameter's value; `options` names the request's options kind
    /// (`CreateOptions`, `UpdateOptions`, `PatchOptions`) in the error.
    pub fn parse(v: Option<&str>, options: &'static str) -> ApiResult<Self> {
        match v.unwrap_or("") {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => {
                let detail = format!("Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
                Err(ApiError::with_details(
                    422,
                    "Invalid",
                    format!("{options}.meta.k8s.io \"\" is invalid: fieldValidation: {detail}"),
                    Some(json!({
                        "group": "meta.k8s.io", "kind": options,
                        "causes": [{"reason": "FieldValueNotSupported", "message": detail, "field": "fieldValidation"}],
                    })),
                ))
            }
        }
    }
}

/// What decoding a body found wrong with its fields, in kube-apiserver's words
/// (`unknown field "spec.foo"`, `duplicate field "data.a"`).
#[derive(Debug, Default)]
pub struct Findings(pub Vec<String>);

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `strict decoding error: unknown field "a", unknown field "b"`.
    pub fn strict_error(&self) -> String {
        format!("strict decoding error: {}", self.0.join(", "))
    }
}

/// Drops the fields `node` does not declare from `obj`, noting each.
pub fn prune(obj: &mut Value, node: Node<'_>, found: &mut Findings) {
    let mut unknown = Vec::new();
    walk(obj, node, "", &mut unknown);
    unknown.sort();
    found
        .0
        .extend(unknown.into_iter().map(|p| format!("unknown field {p:?}")));
}

fn walk(v: &mut Value, node: Node<'_>, path: &str, out: &mut Vec<String>) {
    let join = |k: &str| match path.is_empty() {
        true => k.to_string(),
        false => format!("{path}.{k}"),
    };
    // By shape rather than merge level: atomic structs and lists still declare fields.
    match node.shape() {
        Shape::Struct { preserve } => {
            let Some(m) = v.as_object_mut() else { return };
            let mut drop = Vec::new();
            for (k, child) in m.iter_mut() {
                match node.property(k) {
                    Some(n) => walk(child, n, &join(k), out),
                    None if preserve => {}
                    None => {
                        out.push(join(k));
                        drop.push(k.clone());
                    }
                }
            }
            for k in drop {
                m.remove(&k);
            }
        }
        Shape::Map(values) => {
            for (k, child) in v.as_object_mut().into_iter().flatten() {
                walk(child, values, &join(k), out);
            }
        }
        Shape::List(_, Some(items)) => {
            for (i, child) in v.as_array_mut().into_iter().flatten().enumerate() {
                walk(child, items, &format!("{path}[{i}]"), out);
            }
        }
        Shape::List(_, None) | Shape::Scalar | Shape::Any => {}
    }
}

/// Parses a JSON body, noting duplicate fields (the last one wins, as in Go).
pub fn parse(body: &[u8], found: &mut Findings) -> Result<Value, serde_json::Error> {
    let dups = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = Tracked {
        path: String::new(),
        dups: &dups,
    }
    .deserialize(&mut de)?;
    de.end()?;
    found.0.extend(
        dups.into_inner()
            .into_iter()
            .map(|p| format!("duplicate field {p:?}")),
    );
    Ok(v)
}

struct Tracked<'a> {
    path: String,
    dups: &'a RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Tracked {
            path: format!("{}[{}]", self.path, out.len()),
            dups: self.dups,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = match self.path.is_empty() {
                true => k.clone(),
                false => format!("{}.{k}", self.path),
            };
            let v = map.next_value_seed(Tracked {
                path: path.clone(),
                dups: self.dups,
            })?;
            if out.insert(k, v).is_some() {
                self.dups.borrow_mut().push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_with_their_path() {
        let mut f = Findings::default();
        let v = parse(br#"{"data":{"a":"1","a":"2"},"x":[{"b":1,"b":2}]}"#, &mut f).expect("json");
        assert_eq!(v["data"]["a"], "2");
        assert_eq!(
            f.0,
            vec![r#"duplicate field "data.a""#, r#"duplicate field "x[0].b""#]
        );
        let mut f = Findings::default();
        assert!(Validation::parse(Some("Bogus"), "CreateOptions").is_err());
        assert!(parse(b"{} x", &mut f).is_err());
    }
}
