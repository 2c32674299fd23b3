//! Field paths and sets of them, and their `FieldsV1` form in `managedFields`:
//! `{"f:data": {".": {}, "f:a": {}}}` is the set {`.data`, `.data.a`}.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::openapi::walk::Node;

/// One step from a node to a child.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Elem {
    /// A struct field or a map key (`f:name`).
    Field(String),
    /// An item of a list keyed by fields: their values, as a JSON object with sorted keys
    /// (`k:{"name":"nginx"}`).
    Key(String),
    /// An item of a set, by its JSON value (`v:"a"`).
    Value(String),
}

pub type Path = Vec<Elem>;
pub type Set = BTreeSet<Path>;

impl Elem {
    fn encode(&self) -> String {
        match self {
            Elem::Field(f) => format!("f:{f}"),
            Elem::Key(k) => format!("k:{k}"),
            Elem::Value(v) => format!("v:{v}"),
        }
    }

    fn decode(s: &str) -> Option<Self> {
        let (kind, rest) = s.split_at_checked(2)?;
        Some(match kind {
            "f:" => Elem::Field(rest.into()),
            "k:" => Elem::Key(rest.into()),
            "v:" => Elem::Value(rest.into()),
            _ => return None,
        })
    }

    /// The item key of a keyed list's item, from its key fields (a field left out counts
    /// as its default, when the schema has one).
    pub fn key_of(item: &Value, keys: &[String], schema: Option<Node<'_>>) -> Self {
        let fields: Map<String, Value> = keys
            .iter()
            .filter_map(|k| {
                item.get(k)
                    .or_else(|| schema.and_then(|s| s.default_of(k)))
                    .map(|v| (k.clone(), v.clone()))
            })
            .collect();
        Elem::Key(Value::Object(fields).to_string())
    }

    pub fn value_of(item: &Value) -> Self {
        Elem::Value(item.to_string())
    }

    /// Whether `item` is the list item this element names.
    pub fn names_item(&self, item: &Value) -> bool {
        match self {
            Elem::Key(k) => serde_json::from_str::<Map<String, Value>>(k)
                .is_ok_and(|fields| fields.iter().all(|(f, v)| item.get(f) == Some(v))),
            Elem::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item),
            Elem::Field(_) => false,
        }
    }
}

/// A path as kube-apiserver prints it in conflicts: `.spec.containers[name="nginx"].image`.
pub struct Display<'a>(pub &'a [Elem]);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.0 {
            match e {
                Elem::Field(name) => write!(f, ".{name}")?,
                Elem::Key(k) => {
                    let fields: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
                    let parts: Vec<String> =
                        fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    write!(f, "[{}]", parts.join(","))?;
                }
                Elem::Value(v) => write!(f, "[={v}]")?,
            }
        }
        Ok(())
    }
}

/// The `FieldsV1` object of a set: a node per path, `"."` marking a member with children.
pub fn encode(set: &Set) -> Value {
    #[derive(Default)]
    struct Tree {
        member: bool,
        children: BTreeMap<String, Tree>,
    }
    fn render(t: &Tree) -> Value {
        let mut m: Map<String, Value> = t
            .children
            .iter()
            .map(|(k, c)| (k.clone(), render(c)))
            .collect();
        if t.member && !m.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        Value::Object(m)
    }
    let mut root = Tree::default();
    for path in set {
        let mut node = &mut root;
        for e in path {
            node = node.children.entry(e.encode()).or_default();
        }
        node.member = true;
    }
    render(&root)
}

/// The set a `FieldsV1` object stands for (`None`: not a valid one).
pub fn decode(fields: &Value) -> Option<Set> {
    fn walk(node: &Map<String, Value>, path: &mut Path, out: &mut Set) -> Option<()> {
        for (k, child) in node {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            path.push(Elem::decode(k)?);
            let child = child.as_object()?;
            if child.is_empty() {
                out.insert(path.clone());
            } else {
                walk(child, path, out)?;
            }
            path.pop();
        }
        Some(())
    }
    let mut out = Set::new();
    walk(fields.as_object()?, &mut Vec::new(), &mut out)?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_members_marked() {
        let f = json!({"f:data": {".": {}, "f:a": {}}, "f:spec": {"f:parts": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}});
        let set = decode(&f).expect("valid");
        assert!(set.contains(&vec![Elem::Field("data".into())]));
        assert!(!set.contains(&vec![Elem::Field("spec".into())]));
        assert_eq!(encode(&set), f);
        let p = vec![
            Elem::Field("spec".into()),
            Elem::Key("{\"name\":\"a\"}".into()),
            Elem::Field("image".into()),
        ];
        assert_eq!(Display(&p).to_string(), ".spec[name=\"a\"].image");
    }
}
