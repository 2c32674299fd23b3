//! Access reviews for reads Kairship answers from an instance's caches: the instance is
//! asked (a `SubjectAccessReview`) whether the caller may read what they ask for, so the
//! cache never shows what the instance would refuse. Decisions are kept briefly, as
//! kube-apiserver's webhook authorizer keeps them: allowed longer than denied, so a new
//! grant shows quickly; one cache per instance, bounded.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::json;

use crate::auth::Identity;

const ALLOWED_TTL: Duration = Duration::from_secs(30);
const DENIED_TTL: Duration = Duration::from_secs(5);
const MAX_ENTRIES: usize = 4096;

/// What a read asks for, as a `resourceAttributes` of a review.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadAttributes {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the instance did not answer the access review within {0:?}")]
    Timeout(Duration),
    #[error("access review failed: {0}")]
    Failed(String),
}

/// A decision and until when it holds.
type Decisions = HashMap<(Identity, ReadAttributes), (bool, Instant)>;

#[derive(Clone)]
pub struct AccessReviews {
    decisions: Arc<Mutex<Decisions>>,
    /// Bound of one review (`Settings::instance_call_timeout`).
    timeout: Duration,
}

impl AccessReviews {
    pub fn new(timeout: Duration) -> Self {
        Self {
            decisions: Arc::default(),
            timeout,
        }
    }

    /// Whether `who` may do `what`, from a fresh decision or by asking the instance.
    pub async fn allowed(
        &self,
        client: &kube::Client,
        who: &Identity,
        what: &ReadAttributes,
    ) -> Result<bool, ReviewError> {
        let key = (who.clone(), what.clone());
        if let Some((allowed, until)) = self.decisions.lock().get(&key) {
            if *until > Instant::now() {
                return Ok(*allowed);
            }
        }
        let allowed = review(client, who, what, self.timeout).await?;
        let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
        let mut map = self.decisions.lock();
        if map.len() >= MAX_ENTRIES {
            let now = Instant::now();
            map.retain(|_, (_, until)| *until > now);
            if map.len() >= MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(key, (allowed, Instant::now() + ttl));
        Ok(allowed)
    }
}

/// One `SubjectAccessReview` of `who` doing `what`, asked of `client`'s API server (an
/// instance, or the host for what Kairship would read there on a caller's behalf).
pub async fn review(
    client: &kube::Client,
    who: &Identity,
    what: &ReadAttributes,
    timeout: Duration,
) -> Result<bool, ReviewError> {
    let body = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {
            "user": who.user, "uid": who.uid, "groups": who.groups,
            "resourceAttributes": {
                "verb": what.verb, "group": what.group, "resource": what.resource,
                "namespace": what.namespace.clone().unwrap_or_default(),
                "name": what.name.clone().unwrap_or_default(),
            }
        }
    });
    let req = http::Request::post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(|e| ReviewError::Failed(e.to_string()))?;
    let answer: serde_json::Value = tokio::time::timeout(timeout, client.request(req))
        .await
        .map_err(|_| ReviewError::Timeout(timeout))?
        .map_err(|e| ReviewError::Failed(e.to_string()))?;
    Ok(answer["status"]["allowed"].as_bool().unwrap_or(false))
}
