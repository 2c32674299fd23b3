//! An object seen as field paths, by its schema: which paths it sets (what an applier
//! owns) and which nodes changed between two versions (what an update takes over).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::path::{Elem, Path, Set};
use crate::openapi::walk::{ListType, Node, Shape};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The object itself; `status` is left out when a status subresource owns it.
    Main { status_subresource: bool },
    /// The `status` subresource: only `status`.
    Status,
}

/// Server-set metadata, never owned by anyone.
const SERVER_SET: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// The part of `obj` field ownership is about in `scope`.
pub fn tracked(obj: &Value, scope: Scope) -> Value {
    let Some(o) = obj.as_object() else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (k, v) in o {
        let keep = match (scope, k.as_str()) {
            (_, "apiVersion" | "kind") => false,
            (Scope::Status, k) => k == "status",
            (Scope::Main { status_subresource }, "status") => !status_subresource,
            _ => true,
        };
        if keep {
            out.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::Object(m)) = out.get_mut("metadata") {
        m.retain(|k, _| !SERVER_SET.contains(&k.as_str()));
        if m.is_empty() {
            out.remove("metadata");
        }
    }
    Value::Object(out)
}

/// How a node's children are told apart, by its schema (`None`: no schema, so maps are
/// granular and lists atomic, as kube-apiserver deduces).
pub enum Level<'a> {
    Leaf,
    Fields(Node<'a>),
    Map(Option<Node<'a>>),
    Set,
    Keyed(Vec<String>, Option<Node<'a>>),
}

pub fn level<'a>(v: &Value, node: Option<Node<'a>>) -> Level<'a> {
    if v.is_null() {
        return Level::Leaf;
    }
    let Some(n) = node else {
        return match v.is_object() {
            true => Level::Map(None),
            false => Level::Leaf,
        };
    };
    if n.atomic() {
        return Level::Leaf;
    }
    match n.shape() {
        Shape::Struct { .. } if v.is_object() => Level::Fields(n),
        Shape::Map(values) if v.is_object() => Level::Map(Some(values)),
        Shape::Any if v.is_object() => Level::Map(None),
        Shape::List(ListType::Set, _) if v.is_array() => Level::Set,
        Shape::List(ListType::Map(keys), items) if v.is_array() => Level::Keyed(keys, items),
        _ => Level::Leaf,
    }
}

/// The children of a node at `level`: their path element, value and schema.
pub fn children<'v, 'a>(
    v: &'v Value,
    level: &Level<'a>,
) -> Vec<(Elem, &'v Value, Option<Node<'a>>)> {
    match level {
        Level::Leaf => Vec::new(),
        Level::Fields(node) => object(v)
            .map(|(k, c)| (Elem::Field(k.clone()), c, node.property(k)))
            .collect(),
        Level::Map(values) => object(v)
            .map(|(k, c)| (Elem::Field(k.clone()), c, *values))
            .collect(),
        Level::Set => array(v).map(|i| (Elem::value_of(i), i, None)).collect(),
        Level::Keyed(keys, items) => array(v)
            .map(|i| (Elem::key_of(i, keys, *items), i, *items))
            .collect(),
    }
}

fn object(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flatten()
}

fn array(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// Every node below the root: leaves with their value, containers as `None`.
fn nodes<'v>(v: &'v Value, node: Option<Node<'_>>) -> BTreeMap<Path, Option<&'v Value>> {
    fn walk<'v>(
        v: &'v Value,
        at: Level<'_>,
        path: &mut Path,
        out: &mut BTreeMap<Path, Option<&'v Value>>,
    ) {
        for (e, child, n) in children(v, &at) {
            path.push(e);
            let l = level(child, n);
            match l {
                Level::Leaf => {
                    out.insert(path.clone(), Some(child));
                }
                _ => {
                    out.insert(path.clone(), None);
                    walk(child, l, path, out);
                }
            }
            path.pop();
        }
    }
    let mut out = BTreeMap::new();
    walk(v, root_level(v, node), &mut Vec::new(), &mut out);
    out
}

/// The root is a struct even without a schema (a kind's object).
fn root_level<'a>(v: &Value, node: Option<Node<'a>>) -> Level<'a> {
    match node {
        Some(n) => level(v, Some(n)),
        None => Level::Map(None),
    }
}

/// The fields an applied configuration sets: its leaves, its empty maps and structs, and
/// the items of its keyed lists and sets (non-empty maps and structs are only parents).
pub fn config_set(v: &Value, node: Option<Node<'_>>) -> Set {
    fn walk(v: &Value, at: Level<'_>, path: &mut Path, out: &mut Set) {
        let item_level = matches!(at, Level::Set | Level::Keyed(..));
        for (e, child, n) in children(v, &at) {
            path.push(e);
            let l = level(child, n);
            let empty = match &l {
                Level::Leaf => true,
                Level::Fields(_) | Level::Map(_) => child.as_object().is_some_and(Map::is_empty),
                Level::Set | Level::Keyed(..) => false,
            };
            if empty || item_level {
                out.insert(path.clone());
            }
            walk(child, l, path, out);
            path.pop();
        }
    }
    let mut out = Set::new();
    walk(v, root_level(v, node), &mut Vec::new(), &mut out);
    out.remove(&metadata());
    out
}

/// `metadata` itself, which every object has and nobody owns (its fields are owned).
fn metadata() -> Path {
    vec![Elem::Field("metadata".into())]
}

/// What changed from `old` to `new`, as kube-apiserver's field manager compares them.
pub struct Diff {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Diff {
    /// Added or modified: what a writer takes over.
    pub fn changed(&self) -> Set {
        self.added.union(&self.modified).cloned().collect()
    }
}

pub fn compare(old: &Value, new: &Value, node: Option<Node<'_>>) -> Diff {
    let (a, b) = (nodes(old, node), nodes(new, node));
    let mut d = Diff {
        added: Set::new(),
        modified: Set::new(),
        removed: Set::new(),
    };
    for (p, v) in &b {
        match (a.get(p), v) {
            (None, _) => {
                d.added.insert(p.clone());
            }
            // A list or map where the empty object had `null` is filled, not changed.
            (Some(Some(Value::Null)), None) => {}
            (Some(old), v) if old != v && (old.is_some() || v.is_some()) => {
                d.modified.insert(p.clone());
            }
            _ => {}
        }
    }
    for p in a.keys().filter(|p| !b.contains_key(*p)) {
        d.removed.insert(p.clone());
    }
    for set in [&mut d.added, &mut d.modified, &mut d.removed] {
        set.remove(&metadata());
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(names: &[&str]) -> Path {
        names.iter().map(|n| Elem::Field(n.to_string())).collect()
    }

    #[test]
    fn applied_maps_own_their_keys_and_updates_own_what_they_add() {
        let cm = json!({"data": {"a": "1", "b": "2"}, "metadata": {"labels": {}}});
        let set = config_set(&cm, None);
        assert!(set.contains(&f(&["data", "a"])));
        assert!(!set.contains(&f(&["data"])));
        assert!(set.contains(&f(&["metadata", "labels"])));
        let d = compare(
            &json!({"data": {"a": "1"}}),
            &json!({"data": {"a": "9", "c": "3"}}),
            None,
        );
        assert_eq!(d.added, Set::from([f(&["data", "c"])]));
        assert_eq!(d.modified, Set::from([f(&["data", "a"])]));
        let d = compare(&json!({}), &json!({"data": {"a": "1"}}), None);
        assert!(d.added.contains(&f(&["data"])));
    }
}
