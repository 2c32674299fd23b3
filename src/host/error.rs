//! Errors of the calls Kairship makes to a cluster (the host mostly, an instance's
//! karmada-apiserver too), typed so callers decide on the status code (a conflict is
//! retried, a missing object is fine) instead of on the text; and [`bounded`], the one
//! timeout every such call is made under.

use std::time::Duration;

use super::leader::Fenced;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{what}: {source}")]
    Fenced {
        what: String,
        #[source]
        source: Fenced,
    },
    #[error("{what}: {whom} did not answer within {after:?}")]
    TimedOut {
        what: String,
        whom: &'static str,
        after: Duration,
    },
    /// A Secret Kairship needs could not be read (missing, without its key, unanswered).
    #[error("{0}")]
    Secret(String),
}

impl HostError {
    /// The host's answer code, when it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            HostError::Api {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }

    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

fn answered<T>(what: String, result: Result<T, kube::Error>) -> Result<T, HostError> {
    result.map_err(|source| HostError::Api { what, source })
}

/// A fenced leader-only write's outcome as a `HostError`, naming `what` it was.
pub fn fenced<T>(
    what: impl Into<String>,
    result: Result<Result<T, kube::Error>, Fenced>,
) -> Result<T, HostError> {
    let what = what.into();
    match result {
        Ok(answer) => answered(what, answer),
        Err(source) => Err(HostError::Fenced { what, source }),
    }
}

/// Who a call that timed out was made to.
pub const HOST: &str = "the host cluster";
pub const INSTANCE: &str = "the instance";

/// A call to the host bounded by `after`, its failure naming `what`.
pub async fn bounded<T>(
    what: impl Into<String>,
    after: Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, HostError> {
    bounded_on(HOST, what, after, call).await
}

/// A call to `whom` ([`HOST`], [`INSTANCE`]) bounded by `after`, its failure naming `what`.
pub async fn bounded_on<T>(
    whom: &'static str,
    what: impl Into<String>,
    after: Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, HostError> {
    match tokio::time::timeout(after, call).await {
        Ok(answer) => answered(what.into(), answer),
        Err(_) => Err(HostError::TimedOut {
            what: what.into(),
            whom,
            after,
        }),
    }
}

/// `Ok` for a 404: the object is already gone.
pub fn gone_is_fine(result: Result<(), HostError>) -> Result<(), HostError> {
    match result {
        Err(e) if e.code() == Some(404) => Ok(()),
        other => other,
    }
}

/// An actor's host call as the API answers it: the host's own answer, or a deadline.
impl From<HostError> for crate::error::ApiError {
    fn from(e: HostError) -> Self {
        use crate::error::ApiError;
        match e {
            HostError::Api { what, source } => ApiError::from_kube(source, &what),
            e @ HostError::TimedOut { .. } => ApiError::DeadlineExceeded(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(code: u16, reason: &str) -> Result<Result<(), kube::Error>, Fenced> {
        Ok(Err(kube::Error::Api(
            kube::core::Status::failure("refused", reason)
                .with_code(code)
                .boxed(),
        )))
    }

    #[test]
    fn codes_decide_not_text() {
        let conflict =
            fenced("patching instance a", answered(409, "Conflict")).expect_err("an error");
        assert!(conflict.is_conflict());
        assert!(conflict.to_string().starts_with("patching instance a: "));
        // A message that merely mentions a conflict is not one.
        let other = fenced("x", answered(500, "Conflict")).expect_err("an error");
        assert!(!other.is_conflict());
        assert!(gone_is_fine(fenced("x", answered(404, "NotFound"))).is_ok());
        let fence = fenced::<()>("x", Err(Fenced::NotLeader)).expect_err("an error");
        assert_eq!(fence.code(), None);
        assert_eq!(fence.to_string(), "x: not the leader");
    }
}
