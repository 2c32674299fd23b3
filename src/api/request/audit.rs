//! One structured line per write to an instance and per refused write, whatever the
//! surface (target `kairship::audit`: user, surface, instance, verb, resource, namespace,
//! name, code, outcome), as kube-apiserver's audit log records who changed what.

use crate::auth::Caller;
use crate::error::ApiError;

#[allow(clippy::too_many_arguments)]
pub fn write(
    caller: &Caller,
    surface: super::Surface,
    instance: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    code: u16,
) {
    let outcome = if code < 400 { "allowed" } else { "refused" };
    tracing::info!(
        target: "kairship::audit",
        user = %caller.user.name,
        surface = surface.as_str(),
        instance,
        verb,
        resource,
        namespace = namespace.unwrap_or(""),
        name,
        code,
        outcome,
        "write"
    );
}

/// A write Kairship refused before it reached the instance (the caller's role there).
pub fn refused(
    caller: &Caller,
    surface: super::Surface,
    instance: &str,
    action: &str,
    error: &ApiError,
) {
    tracing::info!(
        target: "kairship::audit",
        user = %caller.user.name,
        surface = surface.as_str(),
        instance,
        action,
        code = error.http_status(),
        outcome = "refused",
        reason = %error,
        "write refused"
    );
}
