//! Server-side printing: `meta.k8s.io/v1 Table` for `kubectl get`, with the resource's
//! printer columns evaluated from their JSONPath.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};

use crate::resource::{PrinterColumn, ResourceDef};

/// Whether the client asked for a Table (kubectl's human-readable output does).
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// How a column's cell is read from an object.
#[derive(Clone, Copy, Debug)]
pub enum Cell {
    Name,
    /// A JSONPath (a CRD's printer column); `date` cells print as an age.
    Path(&'static str, bool),
    /// A JSONPath owned by the column (from a CRD read at run time).
    OwnedPath,
    Builtin(fn(&Value) -> Value),
}

/// One column of a Table, as `columnDefinitions` carries it, and how to fill it.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub kind: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub cell: Cell,
    /// For [`Cell::OwnedPath`].
    pub path: String,
    pub date: bool,
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn column(name: &str, kind: &str, priority: i64, description: &str, cell: Cell) -> Column {
    Column {
        name: name.into(),
        kind: kind.into(),
        format: if matches!(cell, Cell::Name) {
            "name".into()
        } else {
            String::new()
        },
        description: description.into(),
        priority,
        cell,
        path: String::new(),
        date: false,
    }
}

fn age_column() -> Column {
    column(
        "Age",
        "string",
        0,
        AGE_DESC,
        Cell::Path(".metadata.creationTimestamp", true),
    )
}

/// Columns of a resource with printer columns (a CRD's `additionalPrinterColumns`): Name,
/// then those; Name and Age when there are none, as kube-apiserver prints them.
pub fn custom_columns(printer: &[PrinterColumn]) -> Vec<Column> {
    let mut cols = vec![column("Name", "string", 0, NAME_DESC, Cell::Name)];
    if printer.is_empty() {
        cols.push(age_column());
        return cols;
    }
    for c in printer {
        let date = c.kind == "date";
        cols.push(Column {
            name: c.name.clone(),
            kind: c.kind.clone(),
            format: String::new(),
            description: String::new(),
            priority: c.priority,
            cell: Cell::OwnedPath,
            path: c.json_path.clone(),
            date,
        });
    }
    cols
}

fn i64_at(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

fn containers(v: &Value, field: &str) -> Value {
    let list: Vec<String> = v
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c[field].as_str().map(String::from))
        .collect();
    Value::String(list.join(","))
}

/// `metav1.FormatLabelSelector`: `k=v` and set-based requirements, comma-joined, as a
/// `labelSelector` query takes them; `None` for a selector with no terms.
pub fn format_label_selector(sel: &Value) -> Option<String> {
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// A selector as kubectl prints it: `<none>` when it has no terms.
fn label_selector(sel: &Value) -> String {
    format_label_selector(sel).unwrap_or_else(|| "<none>".into())
}

/// A Pod's STATUS as kubectl prints it: Terminating, else a container's waiting or
/// terminated reason, else the pod's reason or phase.
fn pod_status(v: &Value) -> Value {
    if v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return "Terminating".into();
    }
    let reason = v
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|c| {
            let state = &c["state"];
            state["waiting"]["reason"]
                .as_str()
                .or_else(|| state["terminated"]["reason"].as_str())
        });
    reason
        .or_else(|| v.pointer("/status/reason").and_then(Value::as_str))
        .or_else(|| v.pointer("/status/phase").and_then(Value::as_str))
        .unwrap_or("Pending")
        .into()
}

/// kube-apiserver's own printers for the built-in kinds served here.
pub fn builtin_columns(group: &str, kind: &str) -> Option<Vec<Column>> {
    let name = || column("Name", "string", 0, NAME_DESC, Cell::Name);
    Some(match (group, kind) {
        ("", "Namespace") => vec![
            name(),
            column("Status", "string", 0, "The status of the namespace", Cell::Builtin(|v| {
                v.pointer("/status/phase").cloned().unwrap_or_else(|| "Active".into())
            })),
            age_column(),
        ],
        ("apps", "Deployment") => vec![
            name(),
            column("Ready", "string", 0, "Number of the pod with ready state", Cell::Builtin(|v| {
                let want = v.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
                format!("{}/{want}", i64_at(v, "/status/readyReplicas")).into()
            })),
            column("Up-to-date", "string", 0, "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", Cell::Builtin(|v| i64_at(v, "/status/updatedReplicas").into())),
            column("Available", "string", 0, "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", Cell::Builtin(|v| i64_at(v, "/status/availableReplicas").into())),
            age_column(),
            column("Containers", "string", 1, "Names of each container in the template.", Cell::Builtin(|v| containers(v, "name"))),
            column("Images", "string", 1, "Images referenced by each container in the template.", Cell::Builtin(|v| containers(v, "image"))),
            column("Selector", "string", 1, "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.", Cell::Builtin(|v| label_selector(&v["spec"]["selector"]).into())),
        ],
        ("apps", "ReplicaSet") => vec![
            name(),
            column("Desired", "integer", 0, "Number of desired pods.", Cell::Builtin(|v| v.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1).into())),
            column("Current", "integer", 0, "Number of actual replicas.", Cell::Builtin(|v| i64_at(v, "/status/replicas").into())),
            column("Ready", "integer", 0, "Number of ready replicas.", Cell::Builtin(|v| i64_at(v, "/status/readyReplicas").into())),
            age_column(),
            column("Containers", "string", 1, "Names of each container in the template.", Cell::Builtin(|v| containers(v, "name"))),
            column("Images", "string", 1, "Images referenced by each container in the template.", Cell::Builtin(|v| containers(v, "image"))),
            column("Selector", "string", 1, "Label selector for pods.", Cell::Builtin(|v| label_selector(&v["spec"]["selector"]).into())),
        ],
        ("", "Pod") => vec![
            name(),
            column("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic.", Cell::Builtin(|v| {
                let statuses = v.pointer("/status/containerStatuses").and_then(Value::as_array);
                let ready = statuses.into_iter().flatten().filter(|c| c["ready"] == true).count();
                let total = v.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
                format!("{ready}/{total}").into()
            })),
            column("Status", "string", 0, "The aggregate status of the containers in this pod.", Cell::Builtin(pod_status)),
            column("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", Cell::Builtin(|v| {
                let n: i64 = v.pointer("/status/containerStatuses").and_then(Value::as_array).into_iter().flatten().filter_map(|c| c["restartCount"].as_i64()).sum();
                n.to_string().into()
            })),
            age_column(),
            column("IP", "string", 1, "IP address assigned to the pod", Cell::Builtin(|v| v.pointer("/status/podIP").and_then(Value::as_str).unwrap_or("<none>").into())),
            column("Node", "string", 1, "Name of the node assigned to the pod", Cell::Builtin(|v| v.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("<none>").into())),
            column("Nominated Node", "string", 1, "Name of the node nominated for this pod", Cell::Builtin(|v| v.pointer("/status/nominatedNodeName").and_then(Value::as_str).unwrap_or("<none>").into())),
            column("Readiness Gates", "string", 1, "Readiness gates of the pod", Cell::Builtin(|_| "<none>".into())),
        ],
        _ => return None,
    })
}

/// The columns `def` prints with.
pub fn columns_for(def: &ResourceDef) -> Vec<Column> {
    let builtin = def
        .builtin
        .then(|| builtin_columns(&def.group, &def.kind))
        .flatten();
    builtin.unwrap_or_else(|| custom_columns(&def.printer_columns))
}

/// A cell before printing: ages are printed last, since they move with the clock.
enum Printed {
    Plain(Value),
    /// The timestamp a `date` column found, if it found a string.
    Age(Option<String>),
}

impl Printed {
    fn now(self) -> Value {
        match self {
            Printed::Plain(v) => v,
            Printed::Age(t) => t.map_or(Value::Null, |t| Value::String(age(&t))),
        }
    }
}

fn cell(c: &Column, v: &Value) -> Printed {
    let (path, date) = match c.cell {
        Cell::Name => {
            return Printed::Plain(v.pointer("/metadata/name").cloned().unwrap_or(Value::Null))
        }
        Cell::Builtin(f) => return Printed::Plain(f(v)),
        Cell::Path(p, d) => (p, d),
        Cell::OwnedPath => (c.path.as_str(), c.date),
    };
    let found = eval(v, path);
    let value = match found.as_slice() {
        [] if date => return Printed::Age(None),
        [] => return Printed::Plain(Value::Null),
        [one] => (*one).clone(),
        many => Value::String(many.iter().map(|x| scalar(x)).collect::<Vec<_>>().join(",")),
    };
    if date {
        return Printed::Age(value.as_str().map(String::from));
    }
    // CRD columns convert as kube-apiserver's table convertor does: `string` prints the
    // value as text (PRIORITY 0 is "0"), the others keep their JSON type.
    Printed::Plain(match c.kind.as_str() {
        "string" if !value.is_string() => Value::String(scalar(&value)),
        "integer" => match &value {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            Value::String(s) => s.parse::<i64>().map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "number" => match &value {
            Value::Number(_) => value,
            Value::String(s) => s.parse::<f64>().map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "boolean" => match &value {
            Value::Bool(_) => value,
            Value::String(s) => s.parse::<bool>().map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        _ => value,
    })
}

fn definitions(columns: &[Column], with_columns: bool) -> Vec<Value> {
    if !with_columns {
        return Vec::new();
    }
    columns
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect()
}

/// A `meta.k8s.io/v1` Table of `objs` with `columns`; watch events after the first leave
/// the column definitions out.
pub fn render(columns: &[Column], objs: &[&Value], with_columns: bool, list_meta: Value) -> Value {
    let rows: Vec<Value> = objs
        .iter()
        .map(|v| {
            json!({
                "cells": columns.iter().map(|c| cell(c, v).now()).collect::<Vec<_>>(),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v.get("metadata").cloned().unwrap_or_default()},
            })
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": definitions(columns, with_columns),
        "rows": rows,
    })
}

/// One object's Table row with everything but its ages already serialized, so a server
/// holding many objects can keep rows per object version and write Tables by copying.
/// Compact on purpose, since a cache keeps one per object: one allocation for the cells and
/// the ages, and none for the metadata, which the writer takes from the object's own JSON.
#[derive(Debug, Clone)]
pub struct Row {
    /// The cells, comma-separated, with each age left out; then [`AGE_BYTES`] per age:
    /// where it goes in the cells (u32) and the second it counts from (i64; [`NO_DATE`]
    /// prints null, [`BAD_DATE`] `<unknown>`), little-endian.
    buf: Box<[u8]>,
    /// Where the cells end in `buf`.
    cells: u32,
}

const AGE_BYTES: usize = 12;
const NO_DATE: i64 = i64::MIN;
const BAD_DATE: i64 = i64::MAX;

impl Row {
    /// The row of `v` (a whole object) printed with `columns`.
    pub fn new(columns: &[Column], v: &Value) -> Row {
        let mut cells = Vec::with_capacity(64);
        let mut ages = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                cells.push(b',');
            }
            match cell(c, v) {
                Printed::Plain(p) => {
                    // Writing a Value into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut cells, &p);
                }
                Printed::Age(t) => {
                    let at = u32::try_from(cells.len()).unwrap_or(u32::MAX);
                    let since = t.map_or(NO_DATE, |t| {
                        t.parse::<jiff::Timestamp>()
                            .map_or(BAD_DATE, |t| t.as_second())
                    });
                    ages.push((at, since));
                }
            }
        }
        let end = u32::try_from(cells.len()).unwrap_or(u32::MAX);
        cells.reserve_exact(ages.len() * AGE_BYTES);
        for (at, since) in ages {
            cells.extend_from_slice(&at.to_le_bytes());
            cells.extend_from_slice(&since.to_le_bytes());
        }
        Row {
            buf: cells.into_boxed_slice(),
            cells: end,
        }
    }

    /// Bytes this row keeps.
    pub fn kept_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.buf.len()
    }

    fn cells(&self) -> &[u8] {
        self.buf.get(..self.cells as usize).unwrap_or_default()
    }

    /// Each age's place in the cells and the second it counts from.
    fn ages(&self) -> impl Iterator<Item = (usize, i64)> + '_ {
        let tail = self.buf.get(self.cells as usize..).unwrap_or_default();
        tail.chunks_exact(AGE_BYTES).map(|c| {
            let (at, since) = c.split_at(4);
            let at = u32::from_le_bytes(at.try_into().unwrap_or_default());
            let since = i64::from_le_bytes(since.try_into().unwrap_or_default());
            (at as usize, since)
        })
    }

    /// The row, its object's `metadata` (serialized) beside its cells.
    fn write(&self, metadata: &[u8], out: &mut BytesMut) {
        let cells = self.cells();
        out.put_slice(b"{\"cells\":[");
        let mut from = 0;
        for (at, since) in self.ages() {
            let at = at.clamp(from, cells.len());
            out.put_slice(&cells[from..at]);
            match since {
                NO_DATE => out.put_slice(b"null"),
                BAD_DATE => out.put_slice(b"\"<unknown>\""),
                since => {
                    out.put_u8(b'"');
                    out.put_slice(age_since(since).as_bytes());
                    out.put_u8(b'"');
                }
            }
            from = at;
        }
        out.put_slice(&cells[from..]);
        out.put_slice(b"],\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":");
        out.put_slice(metadata);
        out.put_slice(b"}}");
    }

    fn size(&self, metadata: &[u8]) -> usize {
        metadata.len() + self.buf.len() + 96
    }
}

/// The same Table as [`render`] gives, written from prepared rows, each beside its object's
/// serialized metadata.
pub fn write(
    columns: &[Column],
    rows: &[(&Row, &[u8])],
    with_columns: bool,
    list_meta: Value,
) -> Bytes {
    let head = json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": definitions(columns, with_columns),
    })
    .to_string();
    let size: usize = rows.iter().map(|(r, m)| r.size(m)).sum();
    let mut out = BytesMut::with_capacity(head.len() + size + 16);
    // The head without its closing brace, then the rows.
    out.put_slice(&head.as_bytes()[..head.len() - 1]);
    out.put_slice(b",\"rows\":[");
    for (i, (r, metadata)) in rows.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        r.write(metadata, &mut out);
    }
    out.put_slice(b"]}");
    out.freeze()
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// kubectl's short human duration since an RFC 3339 timestamp ("5m", "3h", "2d").
pub fn age(created: &str) -> String {
    match created.parse::<jiff::Timestamp>() {
        Ok(t) => age_since(t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

/// [`age`] of a timestamp in seconds since the epoch.
fn age_since(second: i64) -> String {
    let secs = jiff::Timestamp::now()
        .as_second()
        .saturating_sub(second)
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
    fn rows_written_equal_the_rendered_table() {
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": "2020-01-01T00:00:00Z", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2}});
        let bare = json!({"metadata": {"name": "no-date"}});
        let bad = json!({"metadata": {"name": "bad-date", "creationTimestamp": "yesterday"}});
        let crd_columns = custom_columns(&[PrinterColumn {
            name: "Age".into(),
            kind: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            priority: 0,
        }]);
        let builtin = builtin_columns("apps", "Deployment").expect("deployment printer");
        for columns in [builtin, crd_columns] {
            let objs = [&deploy, &bare, &bad];
            let meta = json!({"resourceVersion": "7"});
            let rendered = render(&columns, &objs, true, meta.clone());
            let rows: Vec<Row> = objs.iter().map(|v| Row::new(&columns, v)).collect();
            let metadata: Vec<Vec<u8>> = objs
                .iter()
                .map(|v| serde_json::to_vec(&v["metadata"]).expect("metadata"))
                .collect();
            let refs: Vec<(&Row, &[u8])> = rows
                .iter()
                .zip(&metadata)
                .map(|(r, m)| (r, &m[..]))
                .collect();
            let written: Value =
                serde_json::from_slice(&write(&columns, &refs, true, meta)).expect("json");
            assert_eq!(written, rendered);
        }
    }

    #[test]
    fn wanted_only_when_table_is_first_choice() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
    }
}
