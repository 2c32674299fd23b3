//! Kubernetes-style API errors: every failure is answered as a `Status` object
//! with the reason and code a real kube-apiserver would use.

use serde_json::{json, Value};

/// What an RBAC refusal is about, for [`forbidden_message`].
#[derive(Debug, Clone, Copy)]
pub struct Refused<'a> {
    pub user: &'a str,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub name: Option<&'a str>,
    pub namespace: Option<&'a str>,
}

/// The message kube-apiserver's RBAC authorizer gives a denied resource request, word
/// for word (`pods "web" is forbidden: User "ann" cannot get resource "pods" in API group
/// "" in the namespace "shop"`): the simulator and Kairship's own cached reads say it alike.
pub fn forbidden_message(r: Refused<'_>) -> String {
    let label = match r.group.is_empty() {
        true => r.resource.to_string(),
        false => format!("{}.{}", r.resource, r.group),
    };
    let subject = match r.name {
        Some(n) => format!("{label} {n:?}"),
        None => label,
    };
    let scope = match r.namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    let resource = match r.subresource {
        Some(s) => format!("{}/{s}", r.resource),
        None => r.resource.to_string(),
    };
    format!(
        "{subject} is forbidden: User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
        r.user, r.verb, r.group
    )
}

/// One API failure, carried to the HTTP layer and rendered as a `meta/v1 Status`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// Identifies the object an error is about, for `Status.details`.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
    pub name: &'a str,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_target(mut self, t: Target<'_>) -> Self {
        // kube-apiserver leaves out an empty group (the core API).
        let mut d = json!({"name": t.name, "kind": t.plural});
        if !t.group.is_empty() {
            d["group"] = t.group.into();
        }
        self.details = Some(d);
        self
    }

    fn resource_label(t: &Target<'_>) -> String {
        if t.group.is_empty() {
            t.plural.to_string()
        } else {
            format!("{}.{}", t.plural, t.group)
        }
    }

    pub fn not_found(t: Target<'_>) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", Self::resource_label(&t), t.name),
        )
        .with_target(t)
    }

    pub fn already_exists(t: Target<'_>) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", Self::resource_label(&t), t.name),
        )
        .with_target(t)
    }

    pub fn conflict(t: Target<'_>) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                Self::resource_label(&t),
                t.name
            ),
        )
        .with_target(t)
    }

    /// 422 with one cause per invalid field, as `kubectl` prints them.
    pub fn invalid(t: Target<'_>, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::new(
            422,
            "Invalid",
            format!(
                "{} \"{}\" is invalid: {}: {}",
                t.kind, t.name, field, message
            ),
        );
        e.details = Some(json!({
            "name": t.name, "group": t.group, "kind": t.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]
        }));
        e
    }

    /// Any other failure, as its code, reason, message and details.
    pub fn with_details(
        code: u16,
        reason: &'static str,
        message: impl Into<String>,
        details: Option<Value>,
    ) -> Self {
        Self {
            details,
            ..Self::new(code, reason, message)
        }
    }

    /// A patch that parses but cannot be applied: kube-apiserver answers 422.
    pub fn invalid_patch(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn path_not_found(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// The continue token or watch resourceVersion is older than the retained history.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {ct:?})"))
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `meta/v1 Status` as kube-apiserver serializes it (see [`failure_bytes`]).
    pub fn to_status_bytes(&self) -> Vec<u8> {
        failure_bytes(self.code, self.reason, &self.message, self.details.as_ref())
    }

    /// The `meta/v1 Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        if self.reason.is_empty() {
            if let Some(o) = s.as_object_mut() {
                o.remove("reason");
            }
        }
        s
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A failure `meta/v1 Status` as kube-apiserver serializes it, fields in its order (kind,
/// apiVersion, metadata, status, message, reason, details, code): clients that compare
/// error text see the same bytes.
pub fn failure_bytes(code: u16, reason: &str, message: &str, details: Option<&Value>) -> Vec<u8> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Status<'a> {
        kind: &'static str,
        api_version: &'static str,
        metadata: Value,
        status: &'static str,
        message: &'a str,
        // An internal error without a reason (as server-side apply's) has none.
        #[serde(skip_serializing_if = "str::is_empty")]
        reason: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<&'a Value>,
        code: u16,
    }
    serde_json::to_vec(&Status {
        kind: "Status",
        api_version: "v1",
        metadata: json!({}),
        status: "Failure",
        message,
        reason,
        details,
        code,
    })
    .unwrap_or_default()
}
