//! Server-side printing: `meta.k8s.io/v1 Table` for `kubectl get`, with the resource's
//! printer columns evaluated from their JSONPath.

use serde_json::{json, Value};

use crate::resources::ResourceDef;
use crate::store::StoredObject;

/// Whether the client asked for a Table (kubectl's human-readable output does).
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn columns(def: &ResourceDef) -> Value {
    let mut cols = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    for c in &def.printer_columns {
        cols.push(json!({"name": c.name, "type": c.kind, "format": "", "description": "", "priority": c.priority}));
    }
    cols.push(json!({"name": "Age", "type": "string", "format": "", "description": "Time since creation.", "priority": 0}));
    Value::Array(cols)
}

fn row(def: &ResourceDef, obj: &StoredObject) -> Value {
    let v = &obj.value;
    let mut cells = vec![Value::String(obj.name().to_string())];
    for c in &def.printer_columns {
        let found = eval(v, &c.json_path);
        cells.push(match found.as_slice() {
            [] => Value::Null,
            [one] => (*one).clone(),
            many => Value::String(many.iter().map(|x| scalar(x)).collect::<Vec<_>>().join(",")),
        });
    }
    let created = v
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .unwrap_or("");
    cells.push(Value::String(age(created)));
    json!({
        "cells": cells,
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or_default()},
    })
}

/// A Table of `objs`; watch events after the first leave the column definitions out.
pub fn table(
    def: &ResourceDef,
    objs: &[&StoredObject],
    with_columns: bool,
    list_meta: Value,
) -> Value {
    let rows: Vec<Value> = objs.iter().map(|o| row(def, o)).collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": if with_columns { columns(def) } else { Value::Array(vec![]) },
        "rows": rows,
    })
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// kubectl's short human duration since an RFC 3339 timestamp ("5m", "3h", "2d").
pub fn age(created: &str) -> String {
    let Ok(t) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now()
        .as_second()
        .saturating_sub(t.as_second())
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 8 * 3600 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s if s < 8 * 86400 => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
        s if s < 730 * 86400 => format!("{}d", s / 86400),
        s => format!("{}y", s / (365 * 86400)),
    }
}

/// Evaluates the JSONPath subset CRD printer columns use: `.a.b`, `[n]`, `[*]`,
/// and `[?(@.key=="value")]`.
pub fn eval<'a>(root: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![root];
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            current = current.into_iter().filter_map(|v| v.get(key)).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return vec![];
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            let items = current.into_iter().filter_map(Value::as_array).flatten();
            current = if inner == "*" {
                items.collect()
            } else if let Ok(i) = inner.parse::<usize>() {
                // An index addresses each array once, not each item.
                return_index(items, i)
            } else if let Some(filter) =
                inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let Some((key, want)) = filter.split_once("==") else {
                    return vec![];
                };
                let want = want.trim().trim_matches('"').trim_matches('\'');
                items
                    .filter(|it| it.get(key.trim()).map(scalar).as_deref() == Some(want))
                    .collect()
            } else {
                return vec![];
            };
        } else {
            return vec![];
        }
    }
    current
}

fn return_index<'a>(items: impl Iterator<Item = &'a Value>, i: usize) -> Vec<&'a Value> {
    items.skip(i).take(1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let v = json!({"status": {"conditions": [{"type": "Scheduled", "status": "True"}, {"type": "Ready", "status": "False"}]},
            "spec": {"workload": {"manifests": [{"kind": "Deployment"}, {"kind": "Service"}]}}});
        assert_eq!(
            eval(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("False")]
        );
        assert_eq!(eval(&v, ".spec.workload.manifests[*].kind").len(), 2);
        assert_eq!(
            eval(&v, ".status.conditions[0].type"),
            vec![&json!("Scheduled")]
        );
        assert!(eval(&v, ".spec.missing").is_empty());
    }

    #[test]
    fn wanted_only_when_table_is_first_choice() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
    }
}
