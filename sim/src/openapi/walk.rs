//! Reading a schema the way kube-apiserver reads one for an object: which fields a level
//! declares, what a map's values and a list's items are, how a list merges, and where
//! unknown fields are kept. One reader serves validation, pruning and field ownership.

use serde_json::{Map, Value};

/// How a list's items are told apart (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Set and replaced only as a whole (the default).
    Atomic,
    /// Scalars, each owned on its own.
    Set,
    /// Items identified by these key fields.
    Map(Vec<String>),
}

/// What a level of an object is, by its schema.
#[derive(Debug, Clone)]
pub enum Shape<'a> {
    /// Declared fields; others are unknown unless `preserve` says they are kept.
    Struct {
        preserve: bool,
    },
    /// A map whose keys are data, each value of this schema.
    Map(Node<'a>),
    List(ListType, Option<Node<'a>>),
    Scalar,
    /// Anything goes: no schema below this point.
    Any,
}

/// A schema node, with the definitions its references resolve in.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    schema: &'a Value,
    defs: &'a Map<String, Value>,
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const STRING: &Value = &Value::Null;

impl<'a> Node<'a> {
    pub fn new(schema: &'a Value, defs: &'a Map<String, Value>) -> Self {
        Self { schema, defs }
    }

    /// Follows `$ref` (bare or as the single `allOf` of a described field).
    fn resolved(self) -> Self {
        let mut node = self;
        for _ in 0..16 {
            let Some(target) = node.definition().and_then(|name| node.defs.get(name)) else {
                return node;
            };
            node = Self::new(target, node.defs);
        }
        node
    }

    fn flag(&self, ext: &str) -> bool {
        self.schema.get(ext).and_then(Value::as_bool) == Some(true)
            || self.resolved().schema.get(ext).and_then(Value::as_bool) == Some(true)
    }

    fn ext(&self, ext: &str) -> Option<&'a Value> {
        self.schema
            .get(ext)
            .or_else(|| self.resolved().schema.get(ext))
    }

    /// Set and replaced only as a whole (`x-kubernetes-map-type: atomic` on a struct or a
    /// map; lists say so by their [`ListType`]).
    pub fn atomic(&self) -> bool {
        self.ext("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
    }

    pub fn shape(&self) -> Shape<'a> {
        let r = self.resolved();
        let s = r.schema;
        let preserve = self.flag("x-kubernetes-preserve-unknown-fields");
        if s.get("properties").is_some() || self.flag("x-kubernetes-embedded-resource") {
            return Shape::Struct { preserve };
        }
        match s.get("additionalProperties") {
            Some(v @ Value::Object(_)) => return Shape::Map(Self::new(v, self.defs)),
            Some(Value::Bool(true)) => return Shape::Any,
            _ => {}
        }
        if self.flag("x-kubernetes-int-or-string") {
            return Shape::Scalar;
        }
        match s.get("type").and_then(Value::as_str) {
            Some("array") => {
                let items = s.get("items").map(|i| Self::new(i, self.defs));
                let kind = match self.ext("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("set") => ListType::Set,
                    Some("map") => ListType::Map(
                        self.ext("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|k| {
                                k.iter()
                                    .filter_map(|k| k.as_str().map(String::from))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    ),
                    _ => ListType::Atomic,
                };
                Shape::List(kind, items)
            }
            Some("string" | "integer" | "number" | "boolean") => Shape::Scalar,
            _ => Shape::Any,
        }
    }

    /// The declared fields present in a new empty object (`default: {}`), recursively:
    /// what kube-apiserver's typed decoding starts from. With `nulls`, required lists and
    /// maps are present too, as `null` (Go fields without `omitempty`).
    pub fn zero(&self, nulls: bool) -> Value {
        let mut out = Map::new();
        let r = self.resolved();
        let required: Vec<&str> = r
            .schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (name, p) in r
            .schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let node = Self::new(p, self.defs);
            if p.get("default")
                .is_some_and(|d| d.as_object().is_some_and(Map::is_empty))
            {
                out.insert(name.clone(), node.zero(nulls));
            } else if nulls
                && required.contains(&name.as_str())
                && matches!(node.shape(), Shape::List(..) | Shape::Map(_))
            {
                out.insert(name.clone(), Value::Null);
            }
        }
        Value::Object(out)
    }

    /// The definition this node names (`io.k8s.api.core.v1.PodSpec`), if it is a
    /// reference.
    pub fn definition(&self) -> Option<&'a str> {
        let direct = self.schema.get("$ref").and_then(Value::as_str);
        let wrapped = || match self
            .schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([one]) => one.get("$ref").and_then(Value::as_str),
            _ => None,
        };
        direct.or_else(wrapped).and_then(|r| r.rsplit('/').next())
    }

    /// The JSON type (`integer`, `string`...) and format a scalar declares.
    pub fn scalar_type(&self) -> Option<(&'a str, Option<&'a str>)> {
        let s = self.resolved().schema;
        let ty = s.get("type").and_then(Value::as_str)?;
        Some((ty, s.get("format").and_then(Value::as_str)))
    }

    /// Whether this node accepts an integer or a string (`x-kubernetes-int-or-string`, or
    /// kube's int-or-string format).
    pub fn int_or_string(&self) -> bool {
        self.flag("x-kubernetes-int-or-string")
            || self.resolved().schema.get("format").and_then(Value::as_str) == Some("int-or-string")
    }

    /// The declared fields of a struct, with their schemas.
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, Node<'a>)> + 'a {
        let defs = self.defs;
        self.resolved()
            .schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(move |(name, p)| (name.as_str(), Self::new(p, defs)))
    }

    /// The value this field takes when left out (`default`).
    pub fn default_value(&self) -> Option<&'a Value> {
        self.ext("default")
    }

    /// The value a declared field takes when left out (`default`).
    pub fn default_of(&self, field: &str) -> Option<&'a Value> {
        self.property(field)?.default_value()
    }

    /// The schema of a declared field (`apiVersion`, `kind` and `metadata` are declared
    /// on every embedded object).
    pub fn property(&self, name: &str) -> Option<Node<'a>> {
        let r = self.resolved();
        if let Some(p) = r.schema.get("properties").and_then(|p| p.get(name)) {
            return Some(Self::new(p, self.defs));
        }
        if !self.flag("x-kubernetes-embedded-resource") {
            return None;
        }
        match name {
            "apiVersion" | "kind" => Some(Self::new(STRING, self.defs)),
            "metadata" => self.defs.get(OBJECT_META).map(|m| Self::new(m, self.defs)),
            _ => None,
        }
    }
}
