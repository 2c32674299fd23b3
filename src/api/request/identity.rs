//! Who a request acts as on an instance: the caller's user and groups, plus the group of
//! the Kairship role they hold there, sent as impersonation headers on every call the
//! request makes, so the instance's RBAC decides.

use http::{HeaderName, HeaderValue};

use crate::api::context::ApiContext;
use crate::auth::{Caller, Role};
use crate::error::ApiError;

pub use crate::auth::Identity;

/// The group that carries a Kairship role to the instance (bound there by
/// `deploy/instance-rbac.yaml`).
pub fn role_group(role: Role) -> String {
    format!("{}{}", crate::auth::ROLE_GROUP_PREFIX, role.as_str())
}

/// Who the caller acts as on `instance`: their user and groups, plus the group of the role
/// they hold there. `system:` groups other than `system:authenticated`, and Kairship's own
/// role groups, are never passed on (authentication drops them already; this is the last
/// gate before the instance). `None` when authorization is off: requests then go as
/// Kairship's own identity.
pub(super) fn on_instance(ctx: &ApiContext, caller: &Caller, instance: &str) -> Option<Identity> {
    if caller.is_unrestricted() {
        return None;
    }
    let mut groups: Vec<String> = caller
        .user
        .groups
        .iter()
        .filter(|g| {
            (!g.starts_with("system:") || *g == "system:authenticated")
                && !g.starts_with(crate::auth::ROLE_GROUP_PREFIX)
        })
        .cloned()
        .collect();
    if let Some(role) = ctx.auth.role_on(caller, instance) {
        groups.push(role_group(role));
    }
    Some(Identity {
        user: caller.user.name.clone(),
        uid: caller.user.uid.clone(),
        groups,
    })
}

/// The headers that make a request act as `who` (a client's own `Impersonate-*` headers
/// are never passed on: only these are sent).
pub fn headers(who: &Identity) -> Result<Vec<(HeaderName, HeaderValue)>, ApiError> {
    let value = |v: &str| {
        HeaderValue::from_str(v)
            .map_err(|_| ApiError::invalid("user", format!("{v:?} cannot be sent as a header")))
    };
    let mut out = vec![(
        HeaderName::from_static("impersonate-user"),
        value(&who.user)?,
    )];
    if !who.uid.is_empty() {
        out.push((HeaderName::from_static("impersonate-uid"), value(&who.uid)?));
    }
    for g in &who.groups {
        out.push((HeaderName::from_static("impersonate-group"), value(g)?));
    }
    Ok(out)
}

/// `client` (the instance's, with Kairship's credentials) acting as `who`: the same
/// connection, every request carrying `who`'s impersonation headers.
pub(super) fn acting_as(client: kube::Client, who: &Identity) -> Result<kube::Client, ApiError> {
    let headers = std::sync::Arc::new(headers(who)?);
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |mut req: http::Request<kube::client::Body>| {
        let (client, headers) = (client.clone(), headers.clone());
        async move {
            for (k, v) in headers.iter() {
                req.headers_mut().append(k.clone(), v.clone());
            }
            client.send(req).await
        }
    });
    Ok(kube::Client::new(service, namespace))
}
