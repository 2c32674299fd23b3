//! ValidatingAdmissionPolicy, as kube-apiserver runs it on clients' creates and updates:
//! each policy bound by a ValidatingAdmissionPolicyBinding whose `Deny` action is on,
//! matched by its `matchConstraints` (resource rules, namespace and object selectors) and
//! its binding's `matchResources`, then its `matchConditions`, `variables` and
//! `validations` evaluated in CEL (the `cel` crate) over `request`, `object`,
//! `oldObject` and `namespaceObject`. A failed validation is refused as kube-apiserver
//! refuses it (`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`); an
//! expression that cannot be evaluated follows the policy's `failurePolicy`.
//!
//! Not simulated: `paramKind`/`paramRef` (a binding with params is skipped, with a log
//! line), `auditAnnotations`, `Audit` and `Warn` actions, type checking, the
//! `authorizer` variable, and DELETE and CONNECT operations.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use super::{Inner, NAMESPACE_KEY};
use crate::resources::ResourceDef;
use kairship_wire::label_selector::label_selector_matches;
use kairship_wire::status::{ApiError, ApiResult};

const POLICIES: &str = "admissionregistration.k8s.io/validatingadmissionpolicies";
const BINDINGS: &str = "admissionregistration.k8s.io/validatingadmissionpolicybindings";

/// Who writes, as admission sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requester {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// One write as admission sees it.
pub struct Attempt<'a> {
    pub operation: &'static str,
    pub def: &'a ResourceDef,
    pub version: &'a str,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub subresource: Option<&'a str>,
    pub object: &'a Value,
    pub old: Option<&'a Value>,
    pub dry_run: bool,
}

/// Refuses `attempt` by `who` when a bound policy denies it.
pub(super) fn admit(inner: &Inner, who: &Requester, attempt: &Attempt<'_>) -> ApiResult<()> {
    let Some(policies) = inner.collections.get(POLICIES).filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let bindings = inner.collections.get(BINDINGS);
    let namespace_object = attempt.namespace.and_then(|ns| {
        inner
            .collections
            .get(NAMESPACE_KEY)
            .and_then(|c| c.get(&(String::new(), ns.to_string())))
            .map(|o| o.value.clone())
    });
    for policy in policies.values() {
        let spec = &policy.value["spec"];
        if !matches(
            &spec["matchConstraints"],
            attempt,
            namespace_object.as_ref(),
        ) {
            continue;
        }
        let policy_name = policy.name();
        for binding in bindings.into_iter().flat_map(|b| b.values()) {
            let b = &binding.value["spec"];
            if b["policyName"].as_str() != Some(policy_name) {
                continue;
            }
            if !b["paramRef"].is_null() || !spec["paramKind"].is_null() {
                tracing::info!(
                    policy = policy_name,
                    "the simulator does not evaluate policies with params; skipped"
                );
                continue;
            }
            let deny = b["validationActions"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "Deny"));
            let narrowed = b["matchResources"].is_null()
                || matches(&b["matchResources"], attempt, namespace_object.as_ref());
            if !deny || !narrowed {
                continue;
            }
            evaluate(spec, who, attempt, namespace_object.as_ref())
                .map_err(|why| refusal(policy_name, binding.name(), why))?;
        }
    }
    Ok(())
}

/// Why a policy refused, with its status reason.
struct Refused {
    message: String,
    reason: String,
}

fn refusal(policy: &str, binding: &str, why: Refused) -> ApiError {
    let (code, reason) = match why.reason.as_str() {
        "Invalid" => (422, "Invalid"),
        "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
        "Unauthorized" => (401, "Unauthorized"),
        _ => (403, "Forbidden"),
    };
    ApiError::with_details(
        code,
        reason,
        format!(
            "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {}",
            why.message
        ),
        None,
    )
}

/// Whether `constraints` (`matchConstraints` or a binding's `matchResources`) select the
/// attempt.
fn matches(constraints: &Value, a: &Attempt<'_>, namespace_object: Option<&Value>) -> bool {
    let rule_hits = |rules: &Value| {
        rules
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| rule_matches(r, a)))
    };
    if !rule_hits(&constraints["resourceRules"]) || rule_hits(&constraints["excludeResourceRules"])
    {
        return false;
    }
    let empty = json!({});
    let labels = |o: Option<&Value>| {
        o.and_then(|o| o.pointer("/metadata/labels"))
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let ns_selector = &constraints["namespaceSelector"];
    if !ns_selector.is_null()
        && a.namespace.is_some()
        && !label_selector_matches(ns_selector, &labels(namespace_object))
    {
        return false;
    }
    let obj_selector = &constraints["objectSelector"];
    if !obj_selector.is_null() {
        let hit = [Some(a.object), a.old]
            .into_iter()
            .flatten()
            .any(|o| label_selector_matches(obj_selector, &labels(Some(o))));
        if !hit {
            return false;
        }
    }
    true
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|x| x == "*" || x == want))
}

/// One `NamedRuleWithOperations` against the attempt (`resources` may name a
/// subresource, `*/status`, or `resource/*`).
fn rule_matches(rule: &Value, a: &Attempt<'_>) -> bool {
    let names = rule["resourceNames"].as_array();
    if names.is_some_and(|n| !n.is_empty() && !n.iter().any(|x| x == a.name)) {
        return false;
    }
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => a.namespace.is_none(),
        "Namespaced" => a.namespace.is_some(),
        _ => true,
    };
    let resource = match a.subresource {
        Some(s) => format!("{}/{s}", a.def.plural),
        None => a.def.plural.clone(),
    };
    let resource_ok = rule["resources"].as_array().is_some_and(|rs| {
        rs.iter().filter_map(Value::as_str).any(|r| {
            r == resource
                || match r.split_once('/') {
                    Some(("*", sub)) => a.subresource == Some(sub),
                    Some((res, "*")) => res == a.def.plural && a.subresource.is_some(),
                    _ => r == "*" && a.subresource.is_none(),
                }
        })
    });
    scope_ok
        && resource_ok
        && has(&rule["apiGroups"], &a.def.group)
        && has(&rule["apiVersions"], a.version)
        && has(&rule["operations"], a.operation)
}

/// The policy's conditions, variables and validations over the attempt.
fn evaluate(
    spec: &Value,
    who: &Requester,
    a: &Attempt<'_>,
    namespace_object: Option<&Value>,
) -> Result<(), Refused> {
    // An expression that cannot be evaluated refuses the request as invalid (422), as
    // kube-apiserver does, unless the policy fails open.
    let fail_open = spec["failurePolicy"].as_str() == Some("Ignore");
    let failed = |what: String| match fail_open {
        true => Ok(()),
        false => Err(Refused {
            message: what,
            reason: "Invalid".into(),
        }),
    };
    let mut vars = Map::new();
    let mut context = match base_context(who, a, namespace_object) {
        Ok(c) => c,
        Err(e) => return failed(format!("the request cannot be evaluated: {e}")),
    };
    for c in spec["matchConditions"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or_default();
        match run(&context, c["expression"].as_str().unwrap_or_default()) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Ok(()),
            Ok(other) => {
                return failed(format!(
                    "matchCondition {name:?} evaluated to {other}, not a bool"
                ))
            }
            Err(e) => return failed(format!("matchCondition {name:?}: {e}")),
        }
    }
    for v in spec["variables"].as_array().into_iter().flatten() {
        let name = v["name"].as_str().unwrap_or_default().to_string();
        match run(&context, v["expression"].as_str().unwrap_or_default()) {
            Ok(value) => {
                vars.insert(name.clone(), value);
                if let Err(e) = context.add_variable("variables", Value::Object(vars.clone())) {
                    return failed(format!("variable {name:?}: {e}"));
                }
            }
            // kube-apiserver evaluates variables lazily: an error matters only when a
            // validation reads it, which then fails in its turn.
            Err(_) => continue,
        }
    }
    for (i, v) in spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let expression = v["expression"].as_str().unwrap_or_default();
        let outcome = run(&context, expression);
        let reason = v["reason"].as_str().unwrap_or("Forbidden").to_string();
        match outcome {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => {
                let message = v["messageExpression"]
                    .as_str()
                    .and_then(|m| match run(&context, m) {
                        Ok(Value::String(s)) if !s.trim().is_empty() => Some(s),
                        _ => None,
                    })
                    .or_else(|| v["message"].as_str().map(str::to_string))
                    .unwrap_or_else(|| format!("failed expression: {expression}"));
                return Err(Refused {
                    message: message.trim().to_string(),
                    reason,
                });
            }
            Ok(other) => {
                return failed(format!("validations[{i}] evaluated to {other}, not a bool"))
            }
            Err(e) => return failed(format!("expression '{expression}' resulted in error: {e}")),
        }
    }
    Ok(())
}

/// `request`, `object`, `oldObject`, `namespaceObject` and `params` as the policy sees
/// them.
fn base_context(
    who: &Requester,
    a: &Attempt<'_>,
    namespace_object: Option<&Value>,
) -> Result<cel::Context<'static, 'static>, String> {
    // As kube-apiserver's AdmissionRequest: empty fields are left out (`omitempty`), so a
    // policy must ask `has(request.namespace)` of a cluster-scoped request.
    let mut request = json!({
        "kind": {"group": a.def.group, "version": a.version, "kind": a.def.kind},
        "resource": {"group": a.def.group, "version": a.version, "resource": a.def.plural},
        "operation": a.operation,
        "userInfo": {"username": who.username},
        "dryRun": a.dry_run,
    });
    for (field, value) in [
        ("subResource", a.subresource.unwrap_or_default()),
        ("name", a.name),
        ("namespace", a.namespace.unwrap_or_default()),
    ] {
        if !value.is_empty() {
            request[field] = value.into();
        }
    }
    if !who.uid.is_empty() {
        request["userInfo"]["uid"] = who.uid.clone().into();
    }
    if !who.groups.is_empty() {
        request["userInfo"]["groups"] = who.groups.clone().into();
    }
    let mut context = cel::Context::default();
    let mut add = |name: &str, v: Value| {
        context
            .add_variable(name.to_string(), v)
            .map_err(|e| format!("{name}: {e}"))
    };
    add("request", request)?;
    add("object", a.object.clone())?;
    add("oldObject", a.old.cloned().unwrap_or(Value::Null))?;
    add(
        "namespaceObject",
        namespace_object.cloned().unwrap_or(Value::Null),
    )?;
    add("params", Value::Null)?;
    add("variables", json!({}))?;
    Ok(context)
}

/// Compiled programs by their source: policies are evaluated on every matching write.
fn compiled(expression: &str) -> Result<Arc<cel::Program>, String> {
    static PROGRAMS: OnceLock<Mutex<HashMap<String, Arc<cel::Program>>>> = OnceLock::new();
    let programs = PROGRAMS.get_or_init(Default::default);
    if let Some(p) = programs.lock().get(expression) {
        return Ok(p.clone());
    }
    let p = Arc::new(
        cel::Program::compile(expression).map_err(|e| format!("compilation failed: {e}"))?,
    );
    programs.lock().insert(expression.to_string(), p.clone());
    Ok(p)
}

fn run(context: &cel::Context<'_, '_>, expression: &str) -> Result<Value, String> {
    let value = compiled(expression)?
        .execute(context)
        .map_err(|e| e.to_string())?;
    value.json().map_err(|e| e.to_string())
}
