//! One error type for every request, whichever surface it came by (gRPC, REST, the proxy,
//! the auth webhook), mapped once to a gRPC code, an HTTP status (grpc-gateway's table) and
//! a Kubernetes `Status` reason. It sits below `api` and `auth` so neither imports the other
//! for it.

use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{field}: {message}")]
    InvalidArgument { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// A stale resourceVersion or a concurrent change.
    #[error("{0}")]
    Aborted(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    DeadlineExceeded(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Internal(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    /// The instance refused the caller, in its own words and with what it refused (a
    /// Kubernetes `Status`'s details).
    #[error("{}", .0.message)]
    Forbidden(Box<Refusal>),
    /// An object that does not exist, named as a Kubernetes `Status` names it.
    #[error("{}", .0.message)]
    Missing(Box<Refusal>),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The system is not in the state the call needs (a cluster that still runs
    /// workloads; a member that cannot be reached with the kubeconfig given).
    #[error("{0}")]
    FailedPrecondition(String),
    /// The request came on a connection set up for another host (SNI and `Host`
    /// disagree): HTTP's 421, after which a client opens a connection of its own.
    #[error("{0}")]
    Misdirected(String),
}

/// What an instance refused (or does not have): the message, and the object as a `Status`
/// names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub name: String,
    pub group: String,
    pub kind: String,
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn code(&self) -> Code {
        match self {
            Self::InvalidArgument { .. } => Code::InvalidArgument,
            Self::NotFound(_) | Self::Missing(_) => Code::NotFound,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::Aborted(_) => Code::Aborted,
            Self::Unavailable(_) => Code::Unavailable,
            Self::DeadlineExceeded(_) => Code::DeadlineExceeded,
            Self::ResourceExhausted(_) => Code::ResourceExhausted,
            Self::Internal(_) => Code::Internal,
            Self::Unauthenticated(_) => Code::Unauthenticated,
            Self::PermissionDenied(_) | Self::Forbidden(_) => Code::PermissionDenied,
            Self::PayloadTooLarge(_) => Code::ResourceExhausted,
            Self::FailedPrecondition(_) | Self::Misdirected(_) => Code::FailedPrecondition,
        }
    }

    /// The HTTP status for this error: grpc-gateway's table by its code, except a body too
    /// large, which gRPC can only call RESOURCE_EXHAUSTED.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::PayloadTooLarge(_) => 413,
            Self::Misdirected(_) => 421,
            _ => http_status_of(self.code()),
        }
    }

    /// The `reason` of a Kubernetes `Status` for the same failure.
    pub fn k8s_reason(&self) -> &'static str {
        match self {
            Self::InvalidArgument { .. } => "BadRequest",
            Self::NotFound(_) | Self::Missing(_) => "NotFound",
            Self::AlreadyExists(_) => "AlreadyExists",
            Self::Aborted(_) => "Conflict",
            Self::ResourceExhausted(_) => "TooManyRequests",
            Self::Internal(_) => "InternalError",
            Self::Unavailable(_) => "ServiceUnavailable",
            Self::DeadlineExceeded(_) => "Timeout",
            Self::Unauthenticated(_) => "Unauthorized",
            Self::PermissionDenied(_) | Self::Forbidden(_) => "Forbidden",
            Self::PayloadTooLarge(_) => "RequestEntityTooLarge",
            Self::FailedPrecondition(_) | Self::Misdirected(_) => "BadRequest",
        }
    }

    /// The `details` of a Kubernetes `Status` for the same failure, when it names an
    /// object (as kube-apiserver's 403s do).
    pub fn k8s_details(&self) -> Option<serde_json::Value> {
        match self {
            Self::Forbidden(r) | Self::Missing(r) => {
                // As kube-apiserver writes them: empty fields left out.
                let details: serde_json::Map<String, serde_json::Value> =
                    [("name", &r.name), ("group", &r.group), ("kind", &r.kind)]
                        .into_iter()
                        .filter(|(_, v)| !v.is_empty())
                        .map(|(k, v)| (k.to_string(), serde_json::Value::from(v.as_str())))
                        .collect();
                Some(serde_json::Value::Object(details))
            }
            _ => None,
        }
    }

    /// Maps a failed call to a Kubernetes API (`what` names the object).
    pub fn from_kube(e: kube::Error, what: &str) -> Self {
        match e {
            kube::Error::Api(s) => match s.code {
                // The instance's RBAC refused the caller (impersonated): its own words.
                403 => Self::Forbidden(Box::new(Refusal {
                    message: s.message,
                    name: s
                        .details
                        .as_ref()
                        .map(|d| d.name.clone())
                        .unwrap_or_default(),
                    group: s
                        .details
                        .as_ref()
                        .map(|d| d.group.clone())
                        .unwrap_or_default(),
                    kind: s
                        .details
                        .as_ref()
                        .map(|d| d.kind.clone())
                        .unwrap_or_default(),
                })),
                404 => Self::NotFound(format!("{what} not found")),
                409 if s.reason == "AlreadyExists" => {
                    Self::AlreadyExists(format!("{what} already exists"))
                }
                409 => Self::Aborted(format!("{what}: {}", s.message)),
                400 | 422 => Self::invalid("object", format!("{what}: {}", s.message)),
                429 => Self::ResourceExhausted(s.message),
                503 => Self::Unavailable(format!("{what}: {}", s.message)),
                504 => Self::DeadlineExceeded(format!("{what}: {}", s.message)),
                _ => Self::Internal(format!("{what}: {} ({})", s.message, s.code)),
            },
            other => Self::Unavailable(format!("{what}: {other}")),
        }
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        match &e {
            ApiError::InvalidArgument { field, message } => tonic::Status::with_error_details(
                Code::InvalidArgument,
                e.to_string(),
                ErrorDetails::with_bad_request_violation(field.clone(), message.clone()),
            ),
            _ => tonic::Status::new(e.code(), e.to_string()),
        }
    }
}

/// grpc-gateway's mapping of gRPC codes to HTTP statuses, for errors that arrive as a gRPC
/// status (REST answers from the gRPC server).
pub fn http_status_of(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::ResourceExhausted => 429,
        Code::Cancelled => 499,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        Code::Internal | Code::Unknown | Code::DataLoss => 500,
    }
}

/// Validates a Kubernetes object name (RFC 1123 subdomain), naming the field.
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(ApiError::invalid(field, format!("{name:?} is not a valid name: lowercase alphanumerics, '-' and '.', starting and ending with an alphanumeric")));
    }
    Ok(())
}

/// An error with its causes, outermost first ("client error (Connect): tcp connect
/// error: Connection refused").
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_object_is_a_kubernetes_not_found_naming_it() {
        let e = ApiError::Missing(Box::new(Refusal {
            message: "configmaps \"web\" not found".into(),
            name: "web".into(),
            group: String::new(),
            kind: "configmaps".into(),
        }));
        assert_eq!((e.http_status(), e.k8s_reason()), (404, "NotFound"));
        assert_eq!(e.code(), Code::NotFound);
        // The core group is left out, as kube-apiserver leaves it out.
        assert_eq!(
            e.k8s_details(),
            Some(serde_json::json!({"name": "web", "kind": "configmaps"}))
        );
        assert_eq!(e.to_string(), "configmaps \"web\" not found");
    }
}
