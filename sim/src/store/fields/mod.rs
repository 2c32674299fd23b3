//! What kube-apiserver does with the fields of a client's write: validation against the
//! kind's schema (unknown and duplicate fields) and ownership (`managedFields`), with
//! server-side apply's merge, conflicts and removal of fields an applier dropped.
//!
//! Writes the simulator makes itself (its controllers) bypass this, as they would not be
//! field-managed requests in the first place.

mod defaulting;
pub mod managed;
mod merge;
pub mod path;
mod sets;
mod types;
pub mod validation;

use serde_json::{json, Value};

use crate::openapi::Schema;
use crate::resources::ResourceDef;
use kairship_wire::status::{ApiError, ApiResult};
use managed::{Entry, Operation, Writer};
pub use sets::Scope;
use validation::{Findings, Validation};

/// A client's write, as field handling needs it.
pub struct ClientWrite {
    /// `?fieldManager`, or the client's user agent up to its first `/`.
    pub manager: String,
    /// The apiVersion of the request path (`apps/v1`).
    pub api_version: String,
    pub validation: Validation,
    pub force: bool,
    /// The kind's schema at the request's version (`None`: anything is kept).
    pub schema: Option<Schema>,
    /// `dryRun=All`: checked and answered, never stored.
    pub dry_run: bool,
    /// Who writes, for admission (`None`: the simulator's own controllers).
    pub requester: Option<crate::store::admission::Requester>,
}

/// A `meta.k8s.io` options error (`PatchOptions.meta.k8s.io "" is invalid: force: ...`).
pub fn options_error(options: &str, field: &str, reason: &str, detail: &str) -> ApiError {
    ApiError::with_details(
        422,
        "Invalid",
        format!("{options}.meta.k8s.io \"\" is invalid: {field}: {detail}"),
        Some(json!({
            "group": "meta.k8s.io", "kind": options,
            "causes": [{"reason": reason, "message": detail, "field": field}],
        })),
    )
}

/// How Go's decoder words a value of the wrong type.
fn go_error(m: &types::Mismatch) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {}.{} of type {}",
        m.go_actual(),
        m.go_struct,
        m.go_path,
        m.go_type
    )
}

/// A patch whose result kube-apiserver cannot take: 422 quoting the patch or its result.
fn patch_invalid(shown: &str, why: &str) -> ApiError {
    let detail = format!("Invalid value: {shown:?}: {why}");
    ApiError::with_details(
        422,
        "Invalid",
        format!(" \"\" is invalid: patch: {detail}"),
        Some(
            json!({"causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "patch"}]}),
        ),
    )
}

/// Server-side apply's refusal of a configuration it cannot type: a 500 without reason.
fn typed_patch_error(
    def: &ResourceDef,
    api_version: &str,
    config: &Value,
    errors: &str,
) -> ApiError {
    let meta = |k: &str| {
        config
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let gv = match def.group.as_str() {
        "" => format!("/{api_version}"),
        _ => api_version.to_string(),
    };
    ApiError::with_details(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {gv}, Kind={}): {errors}",
            meta("namespace"),
            meta("name"),
            def.kind
        ),
        None,
    )
}

/// The manager kube-apiserver names for a write without `?fieldManager`.
pub fn manager_from_user_agent(user_agent: Option<&str>) -> String {
    match user_agent.map(|ua| ua.split('/').next().unwrap_or("").trim()) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => "unknown".into(),
    }
}

impl ClientWrite {
    fn node(&self) -> Option<crate::openapi::walk::Node<'_>> {
        self.schema.as_ref().map(Schema::root)
    }

    fn writer(&self, operation: Operation, scope: Scope) -> Writer<'_> {
        Writer {
            manager: &self.manager,
            operation,
            api_version: &self.api_version,
            subresource: match scope {
                Scope::Status => Some("status"),
                Scope::Main { .. } => None,
            },
        }
    }

    /// Sets a custom kind's schema defaults (built-in kinds are defaulted by
    /// `decode_defaults`, whose schemas here carry none).
    pub fn fill_defaults(&self, def: &ResourceDef, obj: &mut Value) {
        if let (Some(_), Some(node)) = (&def.crd, self.node()) {
            defaulting::fill(obj, node);
        }
    }

    /// Prunes a created or replacing object's undeclared fields; `found` already holds
    /// its duplicates. Strict fails on any; Warn returns one warning each.
    pub fn check_body(
        &self,
        def: &ResourceDef,
        obj: &mut Value,
        mut found: Findings,
    ) -> ApiResult<Vec<String>> {
        self.check_types(def, obj, |m| {
            ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: {}",
                self.version(),
                go_error(m),
                kind = def.kind
            ))
        })?;
        if let Some(node) = self.node() {
            validation::prune(obj, node, &mut found);
        }
        self.fill_defaults(def, obj);
        self.verdict(found, |f| {
            ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: {}",
                self.version(),
                f.strict_error(),
                kind = def.kind
            ))
        })
    }

    /// Prunes a patched object; Strict fails naming the patch as kube-apiserver does.
    pub fn check_patched(
        &self,
        def: &ResourceDef,
        obj: &mut Value,
        patch_shown: impl Fn(&Value) -> String,
    ) -> ApiResult<Vec<String>> {
        self.check_types(def, obj, |m| patch_invalid(&patch_shown(obj), &go_error(m)))?;
        // Only a strict refusal quotes the patched object as it was before pruning.
        let before = (self.validation == Validation::Strict).then(|| obj.clone());
        let mut found = Findings::default();
        if let Some(node) = self.node() {
            validation::prune(obj, node, &mut found);
        }
        self.fill_defaults(def, obj);
        self.verdict(found, |f| {
            patch_invalid(
                &before.as_ref().map(&patch_shown).unwrap_or_default(),
                &f.strict_error(),
            )
        })
    }

    fn verdict(
        &self,
        found: Findings,
        strict: impl FnOnce(&Findings) -> ApiError,
    ) -> ApiResult<Vec<String>> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        match self.validation {
            Validation::Strict => Err(strict(&found)),
            Validation::Warn => Ok(found.0),
            Validation::Ignore => Ok(Vec::new()),
        }
    }

    fn version(&self) -> &str {
        self.api_version.rsplit('/').next().unwrap_or_default()
    }

    /// Values of the wrong type: a built-in kind's first (`builtin` says how its decoder
    /// words it), or all of a custom resource's, as CRD validation lists them.
    fn check_types(
        &self,
        def: &ResourceDef,
        obj: &Value,
        builtin: impl FnOnce(&types::Mismatch) -> ApiError,
    ) -> ApiResult<()> {
        let Some(node) = self.node() else {
            return Ok(());
        };
        let found = types::check(obj, node, &def.kind);
        let Some(first) = found.first() else {
            return Ok(());
        };
        if def.crd.is_none() {
            return Err(builtin(first));
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let causes: Vec<(String, String)> = found
            .iter()
            .map(|m| {
                let a = m.schema_actual();
                let message = format!(
                    "Invalid value: {a:?}: {p} in body must be of type {}: {a:?}",
                    m.expected,
                    p = m.path
                );
                (m.path.clone(), message)
            })
            .collect();
        let listed: Vec<String> = causes.iter().map(|(p, m)| format!("{p}: {m}")).collect();
        let listed = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Err(ApiError::with_details(
            422,
            "Invalid",
            format!("{}.{} {name:?} is invalid: {listed}", def.kind, def.group),
            Some(json!({
                "name": name, "group": def.group, "kind": def.kind,
                "causes": causes.iter().map(|(p, m)| json!({"reason": "FieldValueTypeInvalid", "message": m, "field": p})).collect::<Vec<_>>(),
            })),
        ))
    }

    /// An applied configuration may not set undeclared fields, whatever the validation.
    pub fn check_applied(&self, def: &ResourceDef, config: &Value) -> ApiResult<()> {
        let Some(node) = self.node() else {
            return Ok(());
        };
        let typed = types::check(config, node, &def.kind);
        if let Some(m) = typed.first() {
            return Err(typed_patch_error(
                def,
                &self.api_version,
                config,
                &m.apply_message(),
            ));
        }
        let mut copy = config.clone();
        let mut found = Findings::default();
        validation::prune(&mut copy, node, &mut found);
        if found.is_empty() {
            return Ok(());
        }
        let paths: Vec<String> = found
            .0
            .iter()
            .map(|f| {
                let p = f.trim_start_matches("unknown field ").trim_matches('"');
                format!(".{p}: field not declared in schema")
            })
            .collect();
        let errors = match paths.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        Err(typed_patch_error(def, &self.api_version, config, &errors))
    }

    /// The managed fields after an update from `old` (`None`: a create) to `new`.
    pub fn after_update(&self, old: Option<&Value>, new: &Value, scope: Scope) -> Value {
        let node = self.node();
        let zero = node.map(|n| n.zero(true)).unwrap_or_else(|| json!({}));
        let old = old.unwrap_or(&zero);
        let diff = sets::compare(&sets::tracked(old, scope), &sets::tracked(new, scope), node);
        let entries = managed::parse(new)
            .or_else(|| managed::parse(old))
            .unwrap_or_default();
        let entries = managed::update(
            entries,
            &diff.changed(),
            &diff.removed,
            &self.writer(Operation::Update, scope),
        );
        managed::render(entries)
    }

    /// Applies `config` to `live` (`None`: the object does not exist yet): the merged
    /// object with its managed fields, or the conflicts as a 409.
    pub fn apply(
        &self,
        def: &ResourceDef,
        live: Option<&Value>,
        config: &Value,
        scope: Scope,
    ) -> ApiResult<Value> {
        self.check_applied(def, config)?;
        let node = self.node();
        let mut merged = match live {
            Some(l) => l.clone(),
            None => node.map(|n| n.zero(false)).unwrap_or_else(|| json!({})),
        };
        let applied = sets::tracked(config, scope);
        merge::merge(&mut merged, &applied, node, true);
        let before = live
            .map(|l| sets::tracked(l, scope))
            .unwrap_or_else(|| json!({}));
        let diff = sets::compare(&before, &sets::tracked(&merged, scope), node);
        let entries: Vec<Entry> = managed::parse(config)
            .or_else(|| live.and_then(managed::parse))
            .unwrap_or_default();
        let result = managed::apply(
            entries,
            sets::config_set(&applied, node),
            &diff.changed(),
            self.force,
            &self.writer(Operation::Apply, scope),
        )
        .map_err(|c| {
            ApiError::with_details(
                409,
                "Conflict",
                c.message(),
                Some(json!({"causes": c.causes()})),
            )
        })?;
        for p in &result.remove {
            merge::remove(&mut merged, p, def.builtin);
        }
        if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("managedFields".into(), managed::render(result.entries));
        } else {
            merged["metadata"] = json!({"managedFields": managed::render(result.entries)});
        }
        // Identity and type come from the configuration.
        for k in ["apiVersion", "kind"] {
            if let Some(v) = config.get(k) {
                merged[k] = v.clone();
            }
        }
        for k in ["name", "namespace"] {
            if let Some(v) = config.pointer(&format!("/metadata/{k}")) {
                merged["metadata"][k] = v.clone();
            }
        }
        Ok(merged)
    }
}
