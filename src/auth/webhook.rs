//! The global-management webhook: an IAM sends role events (bind, unbind) signed with
//! HMAC-SHA256 over `"{timestamp}.{body}"` using a shared secret; accepted events become
//! `InstanceRoleBinding` objects in the host, idempotently (the object's name is derived
//! from the grant, so a repeated bind finds it already there). Every accepted signature is
//! remembered in the host (a Lease named after it, in Kairship's namespace), so a replay is
//! refused by whichever replica receives it.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::AuthSetupError;
use crate::crd::{
    InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, ALL_INSTANCES, SOURCE_LABEL,
};
use crate::error::{check_name, ApiError};

/// The Lease name remembering one signature: a digest of its bytes (names must be short;
/// and the bytes, not their spelling, so no re-spelt signature is new).
fn replay_marker(signature: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, signature);
    format!("webhook-replay-{}", hex::encode(&digest.as_ref()[..16]))
}

pub const TIMESTAMP_HEADER: &str = "x-kairship-timestamp";
pub const SIGNATURE_HEADER: &str = "x-kairship-signature";
/// How far a timestamp may be from now, either way; signatures are remembered this long.
pub const TOLERANCE: Duration = Duration::from_secs(300);
const SOURCE: &str = "global-management";
const HOST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventType {
    Bind,
    Unbind,
}

/// One role event, as the IAM sends it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleEvent {
    /// The IAM's id of the event, recorded on the binding.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    /// An instance name, or `"*"` for every instance.
    pub instance: String,
    pub role: Role,
    pub subject: Subject,
}

#[derive(Debug, Serialize)]
pub struct Outcome {
    /// The binding object the event maps to.
    pub binding: String,
    /// False when the host already reflected the event (a retry).
    pub changed: bool,
    /// What it did to the binding, as Kubernetes names it (create or delete).
    #[serde(skip)]
    pub verb: &'static str,
}

pub struct Webhook {
    key: ring::hmac::Key,
    host: kube::Client,
    /// Kairship's own identity on the host, recorded on the bindings it writes.
    operator: String,
    /// Where accepted signatures are remembered (Leases in Kairship's namespace).
    replays: Api<Lease>,
    /// When expired replay markers were last cleared out.
    last_sweep: Mutex<Option<Instant>>,
}

/// Labels the Leases that remember accepted signatures.
const REPLAY_LABEL: &str = "kairship.io/webhook-replay";

impl Webhook {
    pub fn new(
        secret_file: &Path,
        host: kube::Client,
        operator: String,
        namespace: &str,
    ) -> Result<Self, AuthSetupError> {
        let read = |message: String| AuthSetupError::Read {
            what: "--webhook-secret-file",
            path: secret_file.display().to_string(),
            message,
        };
        let secret = std::fs::read(secret_file).map_err(|e| read(e.to_string()))?;
        let secret = secret.trim_ascii();
        if secret.len() < 16 {
            return Err(read("the secret must be at least 16 bytes".into()));
        }
        Ok(Self {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
            replays: Api::namespaced(host.clone(), namespace),
            host,
            operator,
            last_sweep: Mutex::new(None),
        })
    }

    /// Checks the signature and freshness, then applies the event once.
    pub async fn receive(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now_unix: i64,
    ) -> Result<Outcome, ApiError> {
        let signature = verify(&self.key, timestamp, signature, body, now_unix)?;
        self.sweep(now_unix).await;
        let marker = replay_marker(&signature);
        self.remember(&marker, now_unix).await?;
        let result = match parse_event(body) {
            Ok(event) => self.apply(&event).await,
            Err(e) => Err(e),
        };
        if result.is_err() {
            // Not applied: the IAM may send the same request again.
            let dp = DeleteParams::default();
            let forget = self.replays.delete(&marker, &dp);
            if let Ok(Err(e)) = tokio::time::timeout(HOST_TIMEOUT, forget).await {
                tracing::warn!(marker, error = %e, "forgetting a webhook signature");
            }
        }
        result
    }

    /// Records the signature in the host; one already there is a replay. Without the host's
    /// word the request is refused, so no replica can accept a replay it cannot check.
    async fn remember(&self, marker: &str, now_unix: i64) -> Result<(), ApiError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(marker.to_string()),
                labels: Some([(REPLAY_LABEL.to_string(), now_unix.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let pp = PostParams::default();
        let create = self.replays.create(&pp, &lease);
        match tokio::time::timeout(HOST_TIMEOUT, create).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(kube::Error::Api(s))) if s.code == 409 => Err(ApiError::Aborted(
                "this signed request was already received (replay refused)".into(),
            )),
            Ok(Err(e)) => Err(ApiError::Unavailable(format!(
                "the host cluster did not record the request: {e}"
            ))),
            Err(_) => Err(ApiError::Unavailable(format!(
                "the host cluster did not answer within {HOST_TIMEOUT:?}"
            ))),
        }
    }

    /// At most once a minute, deletes the markers of signatures too old to be accepted
    /// anyway (their timestamps fail the freshness check).
    async fn sweep(&self, now_unix: i64) {
        {
            let mut last = self.last_sweep.lock();
            if last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
                return;
            }
            *last = Some(Instant::now());
        }
        let lp = ListParams::default().labels(REPLAY_LABEL);
        let list = self.replays.list(&lp);
        let Ok(Ok(list)) = tokio::time::timeout(HOST_TIMEOUT, list).await else {
            return;
        };
        let horizon = i64::try_from((TOLERANCE * 2).as_secs()).unwrap_or(600);
        for l in list.items {
            let at = l
                .metadata
                .labels
                .as_ref()
                .and_then(|m| m.get(REPLAY_LABEL))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            if now_unix - at > horizon {
                if let Some(name) = l.metadata.name {
                    let _ = tokio::time::timeout(
                        HOST_TIMEOUT,
                        self.replays.delete(&name, &DeleteParams::default()),
                    )
                    .await;
                }
            }
        }
    }

    async fn apply(&self, event: &RoleEvent) -> Result<Outcome, ApiError> {
        let api: Api<InstanceRoleBinding> = Api::all(self.host.clone());
        let name = binding_name(event);
        let call = async {
            match event.kind {
                EventType::Bind => {
                    let binding = InstanceRoleBinding {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            labels: Some([(SOURCE_LABEL.to_string(), SOURCE.to_string())].into()),
                            annotations: Some(
                                [
                                    ("kairship.io/event-id".to_string(), event.id.clone()),
                                    ("kairship.io/applied-by".to_string(), self.operator.clone()),
                                ]
                                .into(),
                            ),
                            ..Default::default()
                        },
                        spec: InstanceRoleBindingSpec {
                            role: event.role,
                            instances: vec![event.instance.clone()],
                            subjects: vec![event.subject.clone()],
                        },
                    };
                    match api.create(&PostParams::default(), &binding).await {
                        Ok(_) => Ok(true),
                        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                        Err(e) => Err(e),
                    }
                }
                EventType::Unbind => match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
                    Err(e) => Err(e),
                },
            }
        };
        let changed = tokio::time::timeout(HOST_TIMEOUT, call)
            .await
            .map_err(|_| {
                ApiError::DeadlineExceeded(format!(
                    "the host cluster did not answer within {HOST_TIMEOUT:?}"
                ))
            })?
            .map_err(|e| ApiError::from_kube(e, &format!("InstanceRoleBinding {name:?}")))?;
        tracing::info!(event = %event.id, binding = %name, kind = ?event.kind, changed, "role event applied");
        Ok(Outcome {
            binding: name,
            changed,
            verb: match event.kind {
                EventType::Bind => "create",
                EventType::Unbind => "delete",
            },
        })
    }
}

/// The signature as sent (lowercase hex) once it checks out against body and timestamp.
pub fn verify(
    key: &ring::hmac::Key,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Result<Vec<u8>, ApiError> {
    let unauth = |m: &str| ApiError::Unauthenticated(format!("webhook: {m}"));
    let ts_text =
        timestamp.ok_or_else(|| unauth(&format!("the {TIMESTAMP_HEADER} header is missing")))?;
    let ts: i64 = ts_text
        .trim()
        .parse()
        .map_err(|_| unauth(&format!("{TIMESTAMP_HEADER} is not a Unix time in seconds")))?;
    // abs_diff: a timestamp near i64::MIN or MAX must not overflow the subtraction.
    if now_unix.abs_diff(ts) > TOLERANCE.as_secs() {
        return Err(unauth(&format!(
            "the timestamp is more than {}s from now (stale or replayed request)",
            TOLERANCE.as_secs()
        )));
    }
    let sig = signature
        .and_then(|s| s.trim().strip_prefix("sha256="))
        .ok_or_else(|| {
            unauth(&format!(
                "the {SIGNATURE_HEADER} header must be sha256=<hex>"
            ))
        })?;
    // Strictly: two hex digits per byte, nothing else (no signs, no spaces).
    let raw = hex::decode(sig).map_err(|_| unauth("the signature is not hex"))?;
    let mut signed = Vec::with_capacity(ts_text.len() + 1 + body.len());
    signed.extend_from_slice(ts_text.trim().as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    ring::hmac::verify(key, &signed, &raw).map_err(|_| unauth("the signature does not match"))?;
    Ok(raw)
}

/// `sha256=<hex>` over `"{timestamp}.{body}"`: what an IAM sends (used by tests and docs).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let tag = ring::hmac::sign(&key, &signed);
    format!("sha256={}", hex::encode(tag.as_ref()))
}

/// A role event from the request body, checked field by field.
pub fn parse_event(body: &[u8]) -> Result<RoleEvent, ApiError> {
    let event: RoleEvent = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid("body", format!("not a role event: {e}")))?;
    if event.id.is_empty() {
        return Err(ApiError::invalid("id", "must not be empty"));
    }
    if event.instance != ALL_INSTANCES {
        check_name("instance", &event.instance)?;
    }
    if event.subject.name.is_empty() {
        return Err(ApiError::invalid("subject.name", "must not be empty"));
    }
    Ok(event)
}

/// One name per (instance, role, subject): bind is create-if-absent, unbind delete.
pub fn binding_name(event: &RoleEvent) -> String {
    let scope = match event.instance.as_str() {
        ALL_INSTANCES => "all".to_string(),
        name => name.chars().take(30).collect(),
    };
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!(
            "{}\n{}\n{:?}\n{}",
            event.instance,
            event.role.as_str(),
            event.subject.kind,
            event.subject.name
        )
        .as_bytes(),
    );
    format!(
        "gm-{}-{}-{}",
        scope.trim_end_matches(['-', '.']),
        event.role.as_str(),
        &hex::encode(digest.as_ref())[..16]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef-secret";

    fn key() -> ring::hmac::Key {
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET)
    }

    #[test]
    fn a_good_signature_verifies_and_anything_else_is_refused() {
        let body = br#"{"id":"1"}"#;
        let sig = sign(SECRET, 1_000, body);
        assert!(verify(&key(), Some("1000"), Some(&sig), body, 1_010).is_ok());
        // Tampered body, other timestamp, stale, future, missing, malformed.
        assert!(verify(&key(), Some("1000"), Some(&sig), br#"{"id":"2"}"#, 1_010).is_err());
        assert!(verify(&key(), Some("1001"), Some(&sig), body, 1_010).is_err());
        assert!(verify(&key(), Some("1000"), Some(&sig), body, 1_000 + 301).is_err());
        assert!(verify(&key(), Some("1000"), Some(&sig), body, 1_000 - 301).is_err());
        assert!(verify(&key(), None, Some(&sig), body, 1_000).is_err());
        assert!(verify(&key(), Some("1000"), Some("md5=00"), body, 1_000).is_err());
        assert!(verify(&key(), Some("1000"), Some("sha256=zz"), body, 1_000).is_err());
        // Re-spelt: a sign where a digit goes (`u8::from_str_radix` took "+a" for "0a"),
        // upper case (the same bytes: the same replay marker).
        let hex = sig.trim_start_matches("sha256=");
        let plus = format!("sha256=+{}", &hex[1..]);
        if hex.starts_with('0') {
            assert!(verify(&key(), Some("1000"), Some(&plus), body, 1_010).is_err());
        }
        assert!(verify(
            &key(),
            Some("1000"),
            Some(&format!("sha256=+{hex}")),
            body,
            1_010
        )
        .is_err());
        let upper = format!("sha256={}", hex.to_ascii_uppercase());
        let (a, b) = (
            verify(&key(), Some("1000"), Some(&sig), body, 1_010).expect("verifies"),
            verify(&key(), Some("1000"), Some(&upper), body, 1_010).expect("verifies"),
        );
        assert_eq!(replay_marker(&a), replay_marker(&b));
        let other = sign(b"another-secret-entirely", 1_000, body);
        assert!(verify(&key(), Some("1000"), Some(&other), body, 1_000).is_err());
    }

    /// Found by fuzz/webhook_event: the skew check overflowed on extreme timestamps.
    #[test]
    fn extreme_timestamps_are_refused_not_a_panic() {
        for ts in [
            "-9223372036854775807",
            "-9223372036854775808",
            "9223372036854775807",
        ] {
            let e = verify(&key(), Some(ts), Some("sha256=00"), b"{}", 1_800_000_000)
                .expect_err("far from now");
            assert!(e.to_string().contains("stale or replayed"), "{e}");
        }
    }

    #[test]
    fn binding_names_are_stable_valid_and_distinct() {
        let e = |instance: &str, name: &str| RoleEvent {
            id: "x".into(),
            kind: EventType::Bind,
            instance: instance.into(),
            role: Role::View,
            subject: Subject {
                kind: crate::crd::SubjectKind::User,
                name: name.into(),
            },
        };
        let a = binding_name(&e("karmada-1", "alice"));
        assert_eq!(a, binding_name(&e("karmada-1", "alice")));
        assert_ne!(a, binding_name(&e("karmada-1", "bob")));
        assert!(binding_name(&e("*", "alice")).starts_with("gm-all-view-"));
        check_name("n", &a).expect("a valid object name");
        check_name("n", &binding_name(&e(&"x".repeat(200), "alice"))).expect("long instance");
    }

    #[test]
    fn events_are_checked() {
        assert!(parse_event(br#"{"id":"1","type":"bind","instance":"a","role":"view","subject":{"kind":"User","name":"u"}}"#).is_ok());
        assert!(parse_event(br#"{"id":"1","type":"bind","instance":"A_","role":"view","subject":{"kind":"User","name":"u"}}"#).is_err());
        assert!(parse_event(br#"{"id":"1","type":"grant","instance":"a","role":"view","subject":{"kind":"User","name":"u"}}"#).is_err());
        assert!(parse_event(br#"{"id":"1","type":"bind","instance":"a","role":"owner","subject":{"kind":"User","name":"u"}}"#).is_err());
    }
}
