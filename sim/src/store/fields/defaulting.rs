//! Structural defaulting of custom resources, as kube-apiserver does it while decoding a
//! request: a field its schema gives a `default` is set when absent from an object that
//! is present, at any depth, and the walk goes on into what was set. Built-in kinds have
//! their defaults in `decode_defaults`.

use serde_json::Value;

use crate::openapi::walk::{Node, Shape};

/// Sets the schema's defaults on `obj`'s absent fields.
pub fn fill(obj: &mut Value, node: Node<'_>) {
    match node.shape() {
        Shape::Struct { .. } => {
            let Some(m) = obj.as_object_mut() else { return };
            for (name, field) in node.properties() {
                if let (false, Some(d)) = (m.contains_key(name), field.default_value()) {
                    m.insert(name.to_string(), d.clone());
                }
            }
            for (name, child) in m.iter_mut() {
                if let Some(field) = node.property(name) {
                    fill(child, field);
                }
            }
        }
        Shape::Map(values) => {
            for child in obj.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
                fill(child, values);
            }
        }
        Shape::List(_, Some(items)) => {
            for child in obj.as_array_mut().into_iter().flatten() {
                fill(child, items);
            }
        }
        Shape::List(_, None) | Shape::Scalar | Shape::Any => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Map};

    use super::*;

    #[test]
    fn defaults_fill_absent_fields_of_present_objects_only() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "priority": {"type": "integer", "default": 0},
                "mode": {"type": "string", "default": "Abort"},
                "placement": {"type": "object", "properties": {
                    "spread": {"type": "string", "default": "Divided"},
                }},
                "tolerations": {"type": "array", "items": {"type": "object", "properties": {
                    "seconds": {"type": "integer", "default": 300},
                }}},
            }},
        }});
        let defs = Map::new();
        let mut obj = json!({"spec": {"mode": "Overwrite", "tolerations": [{}, {"seconds": 5}]}});
        fill(&mut obj, Node::new(&schema, &defs));
        assert_eq!(
            obj,
            json!({"spec": {"mode": "Overwrite", "priority": 0,
                "tolerations": [{"seconds": 300}, {"seconds": 5}]}})
        );
    }
}
