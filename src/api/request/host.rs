//! What a request makes Kairship read on the host for its caller. Kairship's host
//! credentials read every kubeconfig Secret it is allowed to, so before it takes a Secret
//! a caller names, the host is asked (a `SubjectAccessReview`) whether the caller may read
//! that Secret themselves: Kairship never reads for someone what they could not.

use crate::api::context::ApiContext;
use crate::auth::Caller;
use crate::auth::Identity;
use crate::cache::access::{review, ReadAttributes};
use crate::error::ApiError;

/// PERMISSION_DENIED unless the host lets `caller` get Secret `ns/name`. The refusal names
/// the Secret and the rule, never whether it exists.
pub async fn require_secret_read(
    ctx: &ApiContext,
    caller: &Caller,
    ns: &str,
    name: &str,
    field: &str,
) -> Result<(), ApiError> {
    if caller.is_unrestricted() {
        return Ok(());
    }
    let who = Identity {
        user: caller.user.name.clone(),
        uid: caller.user.uid.clone(),
        groups: caller.user.groups.clone(),
    };
    let what = ReadAttributes {
        verb: "get",
        group: String::new(),
        resource: "secrets".into(),
        namespace: Some(ns.to_string()),
        name: Some(name.to_string()),
    };
    let timeout = ctx.tree.settings().host_call_timeout;
    let allowed = review(ctx.tree.host(), &who, &what, timeout)
        .await
        .map_err(|e| {
            ApiError::Unavailable(format!(
                "asking the host cluster whether user {:?} may read Secret {ns}/{name}: {e}",
                caller.user.name
            ))
        })?;
    match allowed {
        true => Ok(()),
        false => Err(ApiError::PermissionDenied(format!(
            "{field}: user {:?} may not get Secret {ns}/{name} on the host cluster; Kairship reads an instance's kubeconfig only from a Secret its caller may read",
            caller.user.name
        ))),
    }
}
