//! `metadata.managedFields`: who owns which fields, and how an update or an apply moves
//! ownership, as kube-apiserver's field manager does.

use serde_json::{json, Value};

use super::path::{self, Display, Path, Set};
use crate::store::meta::now_rfc3339;

/// One manager's entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: Option<String>,
    pub set: Set,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who is writing: the manager, its operation and version, and the subresource.
pub struct Writer<'a> {
    pub manager: &'a str,
    pub operation: Operation,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
}

impl Entry {
    fn is(&self, w: &Writer<'_>) -> bool {
        self.manager == w.manager
            && self.operation == w.operation
            && self.subresource.as_deref() == w.subresource
    }

    /// `"m1"`, or `"m3" using v1` for an updater, as conflicts name managers.
    fn describe(&self) -> String {
        match self.operation {
            Operation::Apply => format!("{:?}", self.manager),
            Operation::Update => format!("{:?} using {}", self.manager, self.api_version),
        }
    }
}

/// The entries of an object's `managedFields` (`None`: absent, empty, or not valid, so
/// the live object's are kept).
pub fn parse(obj: &Value) -> Option<Vec<Entry>> {
    let list = obj.pointer("/metadata/managedFields")?.as_array()?;
    if list.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for e in list {
        // `[{}]` resets ownership: an entry without a manager is dropped.
        let Some(manager) = e.get("manager").and_then(Value::as_str) else {
            continue;
        };
        let operation = match e.get("operation").and_then(Value::as_str) {
            Some("Apply") => Operation::Apply,
            Some("Update") => Operation::Update,
            _ => return None,
        };
        let set = match e.get("fieldsV1") {
            Some(f) => path::decode(f)?,
            None => Set::new(),
        };
        out.push(Entry {
            manager: manager.to_string(),
            operation,
            api_version: e
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            time: e.get("time").and_then(Value::as_str).map(String::from),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .map(String::from),
            set,
        });
    }
    Some(out)
}

/// The `managedFields` list, in kube-apiserver's order: by operation, time, manager.
pub fn render(mut entries: Vec<Entry>) -> Value {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        entries
            .into_iter()
            .map(|e| {
                let mut v = json!({
                    "manager": e.manager, "operation": e.operation.name(),
                    "apiVersion": e.api_version, "time": e.time,
                    "fieldsType": "FieldsV1", "fieldsV1": path::encode(&e.set),
                });
                if let Some(s) = e.subresource {
                    v["subresource"] = s.into();
                }
                v
            })
            .collect(),
    )
}

/// The writer's entry, taken out of `entries` (a new, empty one when it has none).
fn take_own(entries: &mut Vec<Entry>, w: &Writer<'_>) -> Entry {
    match entries.iter().position(|e| e.is(w)) {
        Some(i) => entries.remove(i),
        None => Entry {
            manager: w.manager.to_string(),
            operation: w.operation,
            api_version: w.api_version.to_string(),
            time: None,
            subresource: w.subresource.map(String::from),
            set: Set::new(),
        },
    }
}

/// An update (create, replace, or a patch other than apply): the writer takes every
/// field it added or changed from whoever owned it; removed fields are owned by no one.
pub fn update(mut entries: Vec<Entry>, changed: &Set, removed: &Set, w: &Writer<'_>) -> Vec<Entry> {
    let mut own = take_own(&mut entries, w);
    for e in &mut entries {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    let before = own.set.clone();
    own.set.retain(|p| !removed.contains(p));
    own.set.extend(changed.iter().cloned());
    if own.set != before || own.time.is_none() {
        own.time = Some(now_rfc3339());
        own.api_version = w.api_version.to_string();
    }
    entries.push(own);
    entries
}

/// Fields of the applied configuration another manager owns and the apply would change.
pub struct Conflicts(Vec<(String, Vec<Path>)>);

impl Conflicts {
    pub fn message(&self) -> String {
        let total: usize = self.0.iter().map(|(_, p)| p.len()).sum();
        let mut out = format!(
            "Apply failed with {total} conflict{}: ",
            if total == 1 { "" } else { "s" }
        );
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(who, paths)| match paths.as_slice() {
                [one] => format!("conflict with {who}: {}", Display(one)),
                many => {
                    let lines: Vec<String> =
                        many.iter().map(|p| format!("- {}", Display(p))).collect();
                    format!("conflicts with {who}:\n{}", lines.join("\n"))
                }
            })
            .collect();
        out.push_str(&parts.join("\n"));
        out
    }

    /// `details.causes`, one per field.
    pub fn causes(&self) -> Value {
        let causes: Vec<Value> = self
            .0
            .iter()
            .flat_map(|(who, paths)| {
                paths.iter().map(move |p| {
                    json!({"reason": "FieldManagerConflict", "message": format!("conflict with {who}"), "field": Display(p).to_string()})
                })
            })
            .collect();
        Value::Array(causes)
    }
}

/// The outcome of an apply: the new entries and the fields to remove from the object.
pub struct Applied {
    pub entries: Vec<Entry>,
    pub remove: Vec<Path>,
}

/// An apply: the applier owns exactly what it applied now. Fields it changes that others
/// own are conflicts unless `force` takes them; fields it applied before and not now are
/// removed unless someone else still owns them.
pub fn apply(
    mut entries: Vec<Entry>,
    config: Set,
    changed: &Set,
    force: bool,
    w: &Writer<'_>,
) -> Result<Applied, Conflicts> {
    let mut own = take_own(&mut entries, w);
    let mut conflicts = Vec::new();
    for e in &mut entries {
        let clash: Vec<Path> = e.set.intersection(changed).cloned().collect();
        if clash.is_empty() {
            continue;
        }
        if force {
            e.set.retain(|p| !changed.contains(p));
        } else {
            conflicts.push((e.describe(), clash));
        }
    }
    if !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    let remove: Vec<Path> = own
        .set
        .difference(&config)
        .filter(|p| !entries.iter().any(|e| e.set.contains(*p)))
        .cloned()
        .collect();
    if own.set != config || own.time.is_none() || !changed.is_empty() {
        own.time = Some(now_rfc3339());
    }
    own.api_version = w.api_version.to_string();
    own.set = config;
    entries.push(own);
    Ok(Applied { entries, remove })
}
