//! Who a proxied request acts as and what it may read: the caller's identity passed to the
//! instance by impersonation, access reviews before cache-served reads, and the audit line
//! of every write.

use std::collections::HashMap;

use axum::response::Response;
use http::Method;
use kairship_wire::routes::{self, ResourcePath, Route};
use serde_json::json;

use super::cache_read::parse_bool;
use super::status::{k8s_status, status_response};
use crate::actors::instance::access::{Identity, ReadAttributes};
use crate::api::router::{Routed, Router};
use crate::auth::{Caller, Role};
use crate::error::ApiError;

/// The group that carries a Kairship role to the instance (bound there by
/// `deploy/instance-rbac.yaml`).
pub fn role_group(role: Role) -> String {
    format!("kairship:{}", role.as_str())
}

/// Who the caller acts as on `instance`: their user and groups, plus the group of the role
/// they hold there. `system:` groups other than `system:authenticated` are never passed on:
/// they are Kubernetes' own (`system:masters` is cluster-admin), not an IdP's to grant.
/// `None` when authorization is off: requests then go as Kairship's own identity.
pub(super) fn identity_on(router: &Router, caller: &Caller, instance: &str) -> Option<Identity> {
    if caller.is_unrestricted() {
        return None;
    }
    let mut groups: Vec<String> = caller
        .user
        .groups
        .iter()
        .filter(|g| !g.starts_with("system:") || *g == "system:authenticated")
        .cloned()
        .collect();
    if let Some(role) = router.auth.role_on(caller, instance) {
        groups.push(role_group(role));
    }
    Some(Identity {
        user: caller.user.name.clone(),
        uid: caller.user.uid.clone(),
        groups,
    })
}

/// Asks the instance whether `who` may make this read, before answering it from the cache.
pub(super) async fn review_read(
    routed: &Routed,
    who: &Identity,
    rp: &ResourcePath,
    q: &HashMap<String, String>,
) -> Result<(), Response> {
    let watching = q.get("watch").is_some_and(|w| parse_bool(w) == Some(true));
    let verb = match (&rp.name, watching) {
        (_, true) => "watch",
        (Some(_), false) => "get",
        (None, false) => "list",
    };
    let what = ReadAttributes {
        verb,
        group: rp.group.clone(),
        resource: rp.plural.clone(),
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
    };
    let client = routed.client.as_ref().ok_or_else(|| {
        status_response(&ApiError::Unavailable(format!(
            "instance {:?} is not connected",
            routed.name
        )))
    })?;
    match routed.access.allowed(client, who, &what).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(forbidden(who, &what)),
        // Fail closed: without the instance's word, the cache shows nothing.
        Err(e) => Err(status_response(&ApiError::Unavailable(format!(
            "instance {:?}: {e}",
            routed.name
        )))),
    }
}

/// The 403 the instance itself gives, in its words.
fn forbidden(who: &Identity, a: &ReadAttributes) -> Response {
    let label = match a.group.is_empty() {
        true => a.resource.clone(),
        false => format!("{}.{}", a.resource, a.group),
    };
    let subject = match &a.name {
        Some(n) => format!("{label} {n:?}"),
        None => label,
    };
    let scope = match &a.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".into(),
    };
    let message = format!(
        "{subject} is forbidden: User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        who.user, a.verb, a.resource, a.group
    );
    let details =
        json!({"name": a.name.clone().unwrap_or_default(), "group": a.group, "kind": a.resource});
    k8s_status(403, "Forbidden", &message, Some(details))
}

/// One structured line per write through the proxy (target `kairship::audit`).
pub(super) fn audit(
    caller: &Caller,
    instance: &str,
    method: &Method,
    path: &str,
    answer: &Result<Response, ApiError>,
) {
    let (resource, namespace, name) = match routes::parse(path) {
        Route::Resource(rp) => (rp.plural, rp.namespace, rp.name),
        _ => (path.to_string(), None, None),
    };
    let code = match answer {
        Ok(r) => r.status().as_u16(),
        Err(e) => e.http_status(),
    };
    let outcome = if code < 400 { "allowed" } else { "refused" };
    tracing::info!(
        target: "kairship::audit",
        user = %caller.user.name,
        instance,
        verb = %method,
        resource,
        namespace = namespace.as_deref().unwrap_or(""),
        name = name.as_deref().unwrap_or(""),
        code,
        outcome,
        "proxy write"
    );
}
