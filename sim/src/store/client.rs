//! Clients' writes: the same create, replace and patch as the simulator's own writes, plus
//! field validation and field ownership (`managedFields`), with server-side apply as
//! kube-apiserver does it rather than as a merge patch.

use serde_json::Value;

use super::admission;
use super::decode_defaults;
use super::fields::validation::Findings;
use super::fields::{ClientWrite, Scope};
use super::writes::{check_kind, check_patch_type, patched};
use super::{meta::meta_mut, Obj, Store};
use crate::patch::PatchKind;
use crate::resources::ResourceDef;
use kairship_wire::status::{ApiError, ApiResult};

/// A client's write as stored, with the warnings its answer carries.
pub struct Written {
    pub obj: Obj,
    pub warnings: Vec<String>,
    /// Server-side apply made the object (answered 201 rather than 200).
    pub created: bool,
}

fn scope(def: &ResourceDef, status: bool) -> Scope {
    match status {
        true => Scope::Status,
        false => Scope::Main {
            status_subresource: def.status_subresource,
        },
    }
}

impl Store {
    pub fn create_by(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        mut obj: Value,
        found: Findings,
        w: &ClientWrite,
    ) -> ApiResult<Written> {
        check_kind(def, &obj)?;
        let warnings = w.check_body(def, &mut obj, found)?;
        decode_defaults::fill(def, &mut obj);
        // Set before ownership is computed: the creator owns it, as on kube-apiserver.
        super::defaults::daemonset_on_create(def, &mut obj);
        let managed = w.after_update(None, &obj, scope(def, false));
        let obj = self.writing(w.dry_run, |inner| {
            admit(inner, w, def, "CREATE", ns, (&obj, None), false)?;
            let created = self.create_in(inner, def, ns, obj, Some(managed))?;
            Ok(dry_created(w.dry_run, created))
        })?;
        Ok(Written {
            obj,
            warnings,
            created: false,
        })
    }

    /// Replaces an object (`status`: only its status, the `/status` subresource).
    #[allow(clippy::too_many_arguments)]
    pub fn update_by(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        mut obj: Value,
        found: Findings,
        status: bool,
        w: &ClientWrite,
    ) -> ApiResult<Written> {
        check_kind(def, &obj)?;
        // Custom resources are never replaced unconditionally.
        let rv = super::meta::meta_str(&obj, "resourceVersion").filter(|r| !r.is_empty());
        if def.crd.is_some() && rv.is_none() {
            let mut e = ApiError::invalid(
                def.target(name),
                "metadata.resourceVersion",
                "Invalid value: 0: must be specified for an update",
            );
            e.message = format!(
                "{}.{} {name:?} is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
                def.plural, def.group
            );
            e.details = Some(serde_json::json!({
                "name": name, "group": def.group, "kind": def.plural,
                "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 0: must be specified for an update", "field": "metadata.resourceVersion"}],
            }));
            return Err(e);
        }
        let warnings = w.check_body(def, &mut obj, found)?;
        if !status {
            decode_defaults::fill(def, &mut obj);
        }
        let obj = self.writing(w.dry_run, |inner| {
            let current = inner.get(def, ns, name)?;
            admit(
                inner,
                w,
                def,
                "UPDATE",
                ns,
                (&obj, Some(&current.value)),
                status,
            )?;
            let managed = w.after_update(Some(&current.value), &obj, scope(def, status));
            let written = inner.replace(self, def, &current, obj, status, Some(managed))?;
            Ok(super::dry_answer(w.dry_run, &current, written))
        })?;
        Ok(Written {
            obj,
            warnings,
            created: false,
        })
    }

    /// Patches an object atomically; server-side apply creates it when absent.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_by(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        status: bool,
        w: &ClientWrite,
    ) -> ApiResult<Written> {
        check_patch_type(def, kind)?;
        self.writing(w.dry_run, |inner| {
            self.patch_in(inner, def, ns, name, kind, body, status, w)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn patch_in(
        &self,
        inner: &mut super::Inner,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        status: bool,
        w: &ClientWrite,
    ) -> ApiResult<Written> {
        let current = match inner.get(def, ns, name) {
            Ok(c) => Some(c),
            Err(e) if kind == PatchKind::Apply && e.code == 404 => None,
            Err(e) => return Err(e),
        };
        if kind == PatchKind::Apply {
            let config = applied_config(def, &w.api_version, body)?;
            let mut merged = w.apply(
                def,
                current.as_ref().map(|c| &c.value),
                &config,
                scope(def, status),
            )?;
            w.fill_defaults(def, &mut merged);
            decode_defaults::fill(def, &mut merged);
            let managed = meta_mut(&mut merged).remove("managedFields");
            let Some(current) = current else {
                meta_mut(&mut merged).insert("name".into(), name.into());
                admit(inner, w, def, "CREATE", ns, (&merged, None), false)?;
                let obj = self.create_in(inner, def, ns, merged, managed)?;
                return Ok(Written {
                    obj: dry_created(w.dry_run, obj),
                    warnings: Vec::new(),
                    created: true,
                });
            };
            if unchanged(&current.value, &merged, managed.as_ref()) {
                return Ok(Written {
                    obj: current,
                    warnings: Vec::new(),
                    created: false,
                });
            }
            admit(
                inner,
                w,
                def,
                "UPDATE",
                ns,
                (&merged, Some(&current.value)),
                status,
            )?;
            let obj = inner.replace(self, def, &current, merged, status, managed)?;
            return Ok(Written {
                obj: super::dry_answer(w.dry_run, &current, obj),
                warnings: Vec::new(),
                created: false,
            });
        }
        let Some(current) = current else {
            return Err(ApiError::internal("patch of a missing object"));
        };
        let mut next = patched(def, &current.value, kind, body)?;
        let warnings = w.check_patched(def, &mut next, |result| match kind {
            PatchKind::Strategic => serde_json::from_slice::<Value>(body)
                .map(|p| go_format(&p))
                .unwrap_or_default(),
            _ => serde_json::to_string(result).unwrap_or_default(),
        })?;
        if !status {
            decode_defaults::fill(def, &mut next);
        }
        admit(
            inner,
            w,
            def,
            "UPDATE",
            ns,
            (&next, Some(&current.value)),
            status,
        )?;
        let managed = w.after_update(Some(&current.value), &next, scope(def, status));
        let obj = inner.replace(self, def, &current, next, status, Some(managed))?;
        Ok(Written {
            obj: super::dry_answer(w.dry_run, &current, obj),
            warnings,
            created: false,
        })
    }
}

/// Runs the instance's admission policies on a client's write (`object` and the object
/// it replaces); the simulator's own writes carry no requester and are not admitted.
fn admit(
    inner: &super::Inner,
    w: &ClientWrite,
    def: &ResourceDef,
    operation: &'static str,
    ns: Option<&str>,
    (object, old): (&Value, Option<&Value>),
    status: bool,
) -> ApiResult<()> {
    let Some(who) = &w.requester else {
        return Ok(());
    };
    let namespace = ns
        .or_else(|| super::meta::meta_str(object, "namespace"))
        .filter(|n| def.namespaced && !n.is_empty());
    let version = w
        .api_version
        .rsplit_once('/')
        .map_or(w.api_version.as_str(), |(_, v)| v);
    let attempt = admission::Attempt {
        operation,
        def,
        version,
        namespace,
        name: super::meta::meta_str(object, "name").unwrap_or_default(),
        subresource: status.then_some("status"),
        object,
        old,
        dry_run: w.dry_run,
    };
    admission::admit(inner, who, &attempt)
}

/// A dry run's created object carries no resourceVersion: nothing was stored.
fn dry_created(dry_run: bool, created: Obj) -> Obj {
    if !dry_run {
        return created;
    }
    let mut v = created.value.clone();
    meta_mut(&mut v).remove("resourceVersion");
    super::StoredObject::new(v, 0).unwrap_or(created)
}

/// An applied configuration, checked as kube-apiserver checks one before merging: an
/// object, of the request's kind and version, without `managedFields`.
fn applied_config(def: &ResourceDef, api_version: &str, body: &[u8]) -> ApiResult<Value> {
    let config: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding apply patch: {e}")))?;
    let json_type = match &config {
        Value::Object(_) => None,
        Value::Array(_) => Some("array"),
        Value::String(_) => Some("string"),
        Value::Number(_) => Some("number"),
        Value::Bool(_) => Some("bool"),
        Value::Null => None,
    };
    if let Some(t) = json_type {
        return Err(ApiError::bad_request(format!("error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {t} into Go value of type map[string]interface {{}}")));
    }
    let av = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if av != api_version || kind != def.kind {
        let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={kind}"
        )));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    Ok(config)
}

/// An apply that changes neither the object nor who owns what (times aside) is not a
/// write: kube-apiserver answers with the object as it is.
fn unchanged(live: &Value, merged: &Value, managed: Option<&Value>) -> bool {
    let without = |v: &Value| {
        let mut v = v.clone();
        meta_mut(&mut v).remove("managedFields");
        v
    };
    let owners = |v: Option<&Value>| -> Vec<Value> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| {
                let mut e = e.clone();
                if let Some(o) = e.as_object_mut() {
                    o.remove("time");
                }
                e
            })
            .collect()
    };
    without(live) == without(merged)
        && owners(live.pointer("/metadata/managedFields")) == owners(managed)
}

/// A value as Go's `%v` prints a decoded JSON value (`map[spec:map[x:1]]`), as
/// kube-apiserver shows a strategic merge patch it refuses.
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => format!(
            "map[{}]",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", go_format(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}
