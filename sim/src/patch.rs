//! The patch types kube-apiserver accepts. JSON merge patch (RFC 7386) and JSON patch
//! (RFC 6902) come from the `json-patch` crate; strategic merge patch, which `kubectl
//! apply` sends for built-in kinds, is implemented here for the lists people patch.

use serde_json::{Map, Value};

use kairship_wire::status::{ApiError, ApiResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    /// Server-side apply: merged by schema with field ownership (`store::fields`); only
    /// a Scale view, which has no owners, takes it as a merge patch here.
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Applies `patch` (raw body) to `target` in place.
pub fn apply(kind: PatchKind, target: &mut Value, body: &[u8]) -> ApiResult<()> {
    let parse = |what: &str| -> ApiResult<Value> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding {what} patch: {e}")))
    };
    match kind {
        PatchKind::Merge | PatchKind::Apply => {
            let p = parse("merge")?;
            if !p.is_object() {
                return Err(ApiError::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(target, &p);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(parse("json")?)
                .map_err(|e| ApiError::bad_request(format!("invalid json patch: {e}")))?;
            json_patch::patch(target, &p).map_err(|e| {
                ApiError::invalid_patch(format!("the json patch could not be applied: {e}"))
            })?;
        }
        PatchKind::Strategic => {
            let p = parse("strategic merge")?;
            let Value::Object(p) = p else {
                return Err(ApiError::bad_request(
                    "strategic merge patch must be a JSON object",
                ));
            };
            strategic_merge(target, p, "");
        }
    }
    Ok(())
}

/// The merge key of a list, by field name (and for `ports`, by what its items carry).
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                "containerPort"
            } else {
                "port"
            }
        }
        _ => return None,
    })
}

/// Lists of scalars that merge as sets rather than being replaced.
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

fn strategic_merge(target: &mut Value, mut patch: Map<String, Value>, _path: &str) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        patch.remove("$patch");
        *target = Value::Object(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(obj) = target else { return };
    let retain: Option<Vec<String>> = patch.remove("$retainKeys").and_then(|v| {
        v.as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
    });
    let mut orders: Vec<(String, Vec<Value>)> = Vec::new();
    let mut deletions: Vec<(String, Vec<Value>)> = Vec::new();
    patch.remove("$patch");
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            orders.push((field.to_string(), v.as_array().cloned().unwrap_or_default()));
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            deletions.push((field.to_string(), v.as_array().cloned().unwrap_or_default()));
            continue;
        }
        match v {
            Value::Null => {
                obj.remove(&k);
            }
            Value::Object(pm) => {
                let slot = obj.entry(k.clone()).or_insert(Value::Null);
                strategic_merge(slot, pm, &k);
            }
            Value::Array(items) => {
                let existing = obj.remove(&k);
                obj.insert(k.clone(), merge_list(&k, existing, items));
            }
            scalar => {
                obj.insert(k, scalar);
            }
        }
    }
    for (field, remove) in deletions {
        if let Some(Value::Array(items)) = obj.get_mut(&field) {
            items.retain(|i| !remove.contains(i));
        }
    }
    for (field, order) in orders {
        if let Some(Value::Array(items)) = obj.get_mut(&field) {
            reorder(&field, items, &order);
        }
    }
    if let Some(keep) = retain {
        obj.retain(|k, _| keep.iter().any(|r| r == k));
    }
}

fn merge_list(field: &str, existing: Option<Value>, patch_items: Vec<Value>) -> Value {
    let mut current = match existing {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    if is_set_list(field) {
        for item in patch_items {
            if !current.contains(&item) {
                current.push(item);
            }
        }
        return Value::Array(current);
    }
    let Some(key) = merge_key(field, &patch_items) else {
        let cleaned = patch_items
            .into_iter()
            .filter(|i| i.get("$patch").is_none())
            .collect();
        return Value::Array(cleaned);
    };
    if patch_items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch_items
                .into_iter()
                .filter(|i| i.get("$patch").is_none())
                .collect(),
        );
    }
    for item in patch_items {
        let Value::Object(mut pm) = item else {
            continue;
        };
        let id = pm.get(key).cloned();
        let pos = id
            .as_ref()
            .and_then(|id| current.iter().position(|c| c.get(key) == Some(id)));
        if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(p) = pos {
                current.remove(p);
            }
            continue;
        }
        match pos {
            Some(p) => {
                pm.remove("$patch");
                strategic_merge(&mut current[p], pm, field);
            }
            None => {
                let mut fresh = Value::Object(Map::new());
                strategic_merge(&mut fresh, pm, field);
                current.push(fresh);
            }
        }
    }
    Value::Array(current)
}

/// `$setElementOrder`: items named in the order list come first, in that order.
fn reorder(field: &str, items: &mut [Value], order: &[Value]) {
    let key = merge_key(field, items);
    let rank = |item: &Value| -> usize {
        order
            .iter()
            .position(|o| match key {
                Some(k) => o.get(k).is_some() && o.get(k) == item.get(k),
                None => o == item,
            })
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(|i| rank(i));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(target: Value, patch: Value) -> Value {
        let mut t = target;
        apply(PatchKind::Strategic, &mut t, patch.to_string().as_bytes()).expect("patch applies");
        t
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let t = json!({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}});
        let out = smp(
            t,
            json!({"spec": {"containers": [{"name": "b", "image": "y:2"}]}}),
        );
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}])
        );
    }

    #[test]
    fn strategic_delete_directive_and_null_removal() {
        let t = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "env": [{"name": "A", "value": "1"}, {"name": "B"}]});
        let out = smp(
            t,
            json!({"metadata": {"labels": {"a": null}}, "env": [{"name": "A", "$patch": "delete"}]}),
        );
        assert_eq!(
            out,
            json!({"metadata": {"labels": {"b": "2"}}, "env": [{"name": "B"}]})
        );
    }

    #[test]
    fn strategic_set_element_order_and_plain_lists_replace() {
        let t = json!({"containers": [{"name": "a"}, {"name": "b"}], "args": ["x", "y"]});
        let out = smp(
            t,
            json!({"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}], "containers": [{"name": "a", "image": "i"}], "args": ["z"]}),
        );
        assert_eq!(
            out,
            json!({"containers": [{"name": "b"}, {"name": "a", "image": "i"}], "args": ["z"]})
        );
    }

    #[test]
    fn finalizers_merge_as_a_set() {
        let out = smp(
            json!({"finalizers": ["a"]}),
            json!({"finalizers": ["b", "a"]}),
        );
        assert_eq!(out, json!({"finalizers": ["a", "b"]}));
    }

    #[test]
    fn json_patch_failure_is_422_and_leaves_target() {
        let mut t = json!({"a": 1});
        let err = apply(
            PatchKind::Json,
            &mut t,
            br#"[{"op":"replace","path":"/missing","value":2}]"#,
        )
        .expect_err("fails");
        assert_eq!(err.code, 422);
        assert_eq!(t, json!({"a": 1}));
    }

    #[test]
    fn unknown_content_type_is_415() {
        assert_eq!(
            PatchKind::from_content_type("text/plain")
                .expect_err("415")
                .code,
            415
        );
    }
}
