//! Values of the wrong JSON type for their schema (a string where an integer belongs),
//! which kube-apiserver refuses rather than store: built-in kinds when decoding into Go
//! structs, custom resources when validating against the CRD's schema.

use serde_json::Value;

use crate::openapi::walk::{Node, Shape};

/// One value of the wrong type.
#[derive(Debug)]
pub struct Mismatch {
    /// `spec.parts[0].name`: where, as CRD validation names it.
    pub path: String,
    /// `spec.template.spec.containers.image`: where, as Go's decoder names it (no indices).
    pub go_path: String,
    /// The Go struct holding the field (`Container`).
    pub go_struct: String,
    /// The Go type expected (`int32`, `[]v1.Container`, `v1.PodSpec`).
    pub go_type: String,
    /// The schema type expected (`integer`, `array`...).
    pub expected: String,
    pub value: Value,
}

impl Mismatch {
    /// The JSON type as Go's decoder names it (`number 1.5` for a fraction meant to be
    /// an integer).
    pub fn go_actual(&self) -> String {
        match &self.value {
            Value::Number(n) if self.expected == "integer" => format!("number {n}"),
            v => json_type(v).to_string(),
        }
    }

    /// The JSON type as CRD validation names it (`integer` for a whole number).
    pub fn schema_actual(&self) -> &'static str {
        match &self.value {
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            v => match json_type(v) {
                "bool" => "boolean",
                t => t,
            },
        }
    }

    /// Server-side apply's words: `expected numeric (int or float), got string`.
    pub fn apply_message(&self) -> String {
        let expected = match self.expected.as_str() {
            "integer" | "number" => "numeric (int or float)",
            "object" => "map",
            "array" => "list",
            other => other,
        };
        // Its value printer differs by expected type: a type name for numbers, the value
        // (`&{yes}`) for booleans.
        let got = match (self.expected.as_str(), &self.value) {
            ("boolean", Value::String(s)) => format!("&{{{s}}}"),
            ("boolean", v) => format!("&{{{v}}}"),
            (_, v) => json_type(v).to_string(),
        };
        format!(".{}: expected {expected}, got {got}", self.path)
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every mismatch in `obj`, in path order; `kind` names the root's Go struct.
pub fn check(obj: &Value, node: Node<'_>, kind: &str) -> Vec<Mismatch> {
    let mut out = Vec::new();
    walk(obj, node, "", "", kind, &mut out);
    out
}

fn join(path: &str, k: &str) -> String {
    match path.is_empty() {
        true => k.to_string(),
        false => format!("{path}.{k}"),
    }
}

/// The Go type a node decodes into.
fn go_type(node: Node<'_>) -> String {
    if let Some(def) = node.definition() {
        let mut parts = def.rsplit('.');
        let name = parts.next().unwrap_or(def);
        return match parts.next() {
            Some(pkg) => format!("{pkg}.{name}"),
            None => name.to_string(),
        };
    }
    match node.shape() {
        Shape::List(_, Some(items)) => format!("[]{}", go_type(items)),
        Shape::Map(values) => format!("map[string]{}", go_type(values)),
        _ => match node.scalar_type() {
            Some(("integer", Some(f))) => f.to_string(),
            Some(("integer", None)) => "int64".into(),
            Some(("number", _)) => "float64".into(),
            Some(("boolean", _)) => "bool".into(),
            Some((t, _)) => t.to_string(),
            None => "interface {}".into(),
        },
    }
}

fn walk(
    v: &Value,
    node: Node<'_>,
    path: &str,
    go_path: &str,
    go_struct: &str,
    out: &mut Vec<Mismatch>,
) {
    if v.is_null() {
        return;
    }
    let quantity = node
        .definition()
        .is_some_and(|d| d.ends_with("resource.Quantity"));
    let shape = node.shape();
    let expected = match (&shape, quantity || node.int_or_string()) {
        (_, true) => None,
        (Shape::Struct { .. } | Shape::Map(_), _) => Some("object"),
        (Shape::List(..), _) => Some("array"),
        (Shape::Scalar, _) => node.scalar_type().map(|(t, _)| t),
        (Shape::Any, _) => None,
    };
    let fits = match (expected, v) {
        (None, _) => true,
        (Some("object"), Value::Object(_)) | (Some("array"), Value::Array(_)) => true,
        (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => true,
        (Some("number"), Value::Number(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some(_), _) => false,
    };
    if !fits {
        out.push(Mismatch {
            path: path.to_string(),
            go_path: go_path.to_string(),
            go_struct: go_struct.to_string(),
            go_type: go_type(node),
            expected: expected.unwrap_or_default().to_string(),
            value: v.clone(),
        });
        return;
    }
    match shape {
        Shape::Struct { .. } => {
            let name = node
                .definition()
                .and_then(|d| d.rsplit('.').next())
                .unwrap_or(go_struct);
            for (k, child) in v.as_object().into_iter().flatten() {
                if let Some(n) = node.property(k) {
                    walk(child, n, &join(path, k), &join(go_path, k), name, out);
                }
            }
        }
        // Go names a map's or a list's field, not the entry.
        Shape::Map(values) => {
            for (k, child) in v.as_object().into_iter().flatten() {
                walk(child, values, &join(path, k), go_path, go_struct, out);
            }
        }
        Shape::List(_, Some(items)) => {
            for (i, child) in v.as_array().into_iter().flatten().enumerate() {
                walk(
                    child,
                    items,
                    &format!("{path}[{i}]"),
                    go_path,
                    go_struct,
                    out,
                );
            }
        }
        _ => {}
    }
}
