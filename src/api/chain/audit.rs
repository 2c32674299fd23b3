//! Audit events: one per write and one per refusal, on every surface (gRPC, REST, the
//! proxy, host writes such as Instance changes and actor restarts, the global-management
//! webhook), in the shape of Kubernetes' `audit.k8s.io/v1` `Event` at the `Metadata` level,
//! so the pipelines that already read kube-apiserver's audit log read Kairship's. Written
//! as JSON lines to `--audit-log-path` (a file, or `-` for standard output); without it,
//! as log lines on the target `kairship::audit`.
//!
//! The chain's audit layer starts a [`Record`] for each request; the layers and handlers
//! after it fill in what they learn (the instance, the object, the decision), and the
//! layer emits the event once the answer is known.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

use crate::auth::Caller;

/// Where events go.
pub enum Sink {
    /// Log lines (target `kairship::audit`), the event's JSON in the `event` field.
    Log,
    Stdout,
    File {
        path: PathBuf,
        file: Mutex<std::fs::File>,
    },
}

/// As kube-apiserver's audit: a longer User-Agent is cut here.
pub const MAX_USER_AGENT: usize = 1024;
/// Request URIs in audit events are cut here (the URI of a refused stranger's request is
/// theirs to choose).
pub const MAX_URI: usize = 4096;

/// `s` cut at `max` bytes (on a character boundary), saying so.
fn truncated(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...(truncated)", &s[..end])
}

/// Refusals of unauthenticated requests are audited at most at this rate (a burst of
/// `UNAUTHENTICATED_BURST`), off the request path: whoever can reach the port can send
/// them, and each would otherwise cost a synchronous write of a line they choose. The
/// next event says how many were left out.
pub const UNAUTHENTICATED_PER_SECOND: f64 = 20.0;
pub const UNAUTHENTICATED_BURST: f64 = 100.0;

/// The rate limit and the writes in flight of unauthenticated refusals' events.
pub struct Unauthenticated {
    bucket: Mutex<(f64, std::time::Instant)>,
    left_out: std::sync::atomic::AtomicU64,
    writing: Arc<tokio::sync::Semaphore>,
}

impl Default for Unauthenticated {
    fn default() -> Self {
        Self {
            bucket: Mutex::new((UNAUTHENTICATED_BURST, std::time::Instant::now())),
            left_out: Default::default(),
            writing: Arc::new(tokio::sync::Semaphore::new(64)),
        }
    }
}

impl Unauthenticated {
    fn take(&self) -> bool {
        let mut b = self.bucket.lock();
        let now = std::time::Instant::now();
        let refill = now.duration_since(b.1).as_secs_f64() * UNAUTHENTICATED_PER_SECOND;
        *b = ((b.0 + refill).min(UNAUTHENTICATED_BURST), now);
        match b.0 >= 1.0 {
            true => {
                b.0 -= 1.0;
                true
            }
            false => false,
        }
    }

    /// Emits `event` to `sink` on a blocking thread, unless over the rate or too many
    /// writes are in flight (then it is counted, and the next event says so).
    pub fn emit(&self, sink: &Arc<Sink>, mut event: Event) {
        let permit = match self.take() {
            true => self.writing.clone().try_acquire_owned().ok(),
            false => None,
        };
        let Some(permit) = permit else {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let before = self.left_out.swap(0, Ordering::Relaxed);
        if before > 0 {
            event.annotations.insert(
                "kairship.io/unaudited-unauthenticated".into(),
                before.to_string(),
            );
        }
        let sink = sink.clone();
        tokio::task::spawn_blocking(move || {
            sink.emit(&event);
            drop(permit);
        });
    }
}

impl Sink {
    /// `-` is standard output, anything else a file opened for appending (created with
    /// mode 0600: events name users and objects).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self::Stdout);
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        Ok(Self::File {
            path: path.to_path_buf(),
            file: Mutex::new(options.open(path)?),
        })
    }

    pub fn emit(&self, event: &Event) {
        let Ok(mut line) = serde_json::to_vec(event) else {
            return;
        };
        match self {
            Self::Log => tracing::info!(
                target: "kairship::audit",
                event = %String::from_utf8_lossy(&line),
                user = %event.user.username,
                verb = %event.verb,
                code = event.response_status.code,
                "audit"
            ),
            Self::Stdout => {
                line.push(b'\n');
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&line).and_then(|()| out.flush());
            }
            Self::File { path, file } => {
                line.push(b'\n');
                if let Err(e) = file.lock().write_all(&line) {
                    tracing::error!(path = %path.display(), error = %e, "writing an audit event failed");
                }
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct User {
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl User {
    pub fn of(caller: &Caller) -> Self {
        Self {
            username: caller.user.name.clone(),
            uid: caller.user.uid.clone(),
            groups: caller.user.groups.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseStatus {
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `audit.k8s.io/v1` `Event`, at the `Metadata` level.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: &'static str,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: &'static str,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: User,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<User>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    pub response_status: ResponseStatus,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
    pub annotations: BTreeMap<String, String>,
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// A unique audit ID in the UUID text form kube-apiserver uses: a random prefix drawn once
/// per process and a counter, so no request pays for a system call.
pub fn new_id() -> String {
    use std::sync::atomic::AtomicU64;
    use std::sync::OnceLock;
    static PREFIX: OnceLock<[u8; 8]> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        use ring::rand::SecureRandom;
        let mut b = [0u8; 8];
        // The system's generator failing leaves the time: an ID, not a secret.
        if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
            b = jiff::Timestamp::now().as_nanosecond().to_le_bytes()[..8]
                .try_into()
                .unwrap_or_default();
        }
        b
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "{}-{}-{}-{}-{}",
        hex(&prefix[0..4]),
        hex(&prefix[4..6]),
        hex(&prefix[6..8]),
        hex(&n[0..2]),
        hex(&n[2..8])
    )
}

/// What is known of one request so far; shared by the layers and handlers after the
/// audit layer through the request's extensions.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    pub surface: &'static str,
    pub instance: Option<String>,
    pub verb: String,
    pub object: Option<ObjectRef>,
    /// The request changes something: audited whatever its outcome.
    pub writes: bool,
    /// Who the request acted as on the instance.
    pub impersonated: Option<User>,
    /// `authorization.k8s.io/decision` and `/reason`.
    pub decision: Option<(&'static str, String)>,
    /// A watch or another stream: the event is `ResponseStarted`.
    pub long_running: bool,
    /// Passed to the replica that owns the instance, which audits it (once).
    pub forwarded_to: Option<String>,
}

/// One request's audit record (cheap to clone: shared).
#[derive(Clone)]
pub struct Record {
    pub id: String,
    received: String,
    uri: String,
    source: Option<String>,
    user_agent: Option<String>,
    fields: Arc<Mutex<Fields>>,
}

/// The client's address, put on each request by the server.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// A verb for a request known only by its head (a refused authentication): the rule's
/// for gRPC and the proxy, the HTTP method's otherwise.
pub fn rough_verb<B>(req: &http::Request<B>, surface: super::Surface) -> String {
    use super::{proxied, rules, Surface};
    let path = req.uri().path();
    match surface {
        Surface::Grpc => rules::grpc(path).map_or("unknown", |r| r.verb).to_string(),
        Surface::Proxy => {
            let on = proxied(path).map_or("/", |(_, on)| on);
            rules::proxy(req.method(), on, super::watching(req))
                .verb
                .to_string()
        }
        Surface::Rest => req.method().as_str().to_ascii_lowercase(),
    }
}

/// The HTTP status of an answer and, for a failure, its Kubernetes reason and message:
/// gRPC's from its status headers (a failure is trailers-only), the others' from the
/// status line and what the chain recorded of its decision.
pub fn outcome(
    surface: super::Surface,
    resp: &axum::response::Response,
    record: &Record,
) -> (u16, Option<(String, String)>) {
    let grpc = match surface {
        super::Surface::Grpc => tonic::Status::from_header_map(resp.headers()),
        _ => None,
    };
    if let Some(status) = grpc.filter(|s| s.code() != tonic::Code::Ok) {
        let code = crate::error::http_status_of(status.code());
        return (code, Some((reason(code), status.message().to_string())));
    }
    let code = resp.status().as_u16();
    if code < 400 {
        return (code, None);
    }
    let message = record
        .fields
        .lock()
        .decision
        .as_ref()
        .map(|(_, why)| why.clone())
        .unwrap_or_default();
    (code, Some((reason(code), message)))
}

/// Kubernetes' `Status` reason for an HTTP status.
fn reason(code: u16) -> String {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
    .to_string()
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record").field("id", &self.id).finish()
    }
}

impl Record {
    /// A record for `req`, with what its head says.
    pub fn of_request<B>(req: &http::Request<B>, surface: super::Surface) -> Self {
        let uri = req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
        let peer = req.extensions().get::<Peer>().map(|p| p.0);
        let agent = req
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|a| truncated(a, MAX_USER_AGENT));
        Self::new(truncated(&uri, MAX_URI), peer, agent, surface.as_str())
    }

    pub fn new(
        uri: String,
        source: Option<std::net::SocketAddr>,
        user_agent: Option<String>,
        surface: &'static str,
    ) -> Self {
        Self {
            id: new_id(),
            received: now(),
            uri,
            source: source.map(|a| a.ip().to_string()),
            user_agent,
            fields: Arc::new(Mutex::new(Fields {
                surface,
                ..Fields::default()
            })),
        }
    }

    /// Fills in what a layer or handler learned.
    pub fn update(&self, f: impl FnOnce(&mut Fields)) {
        f(&mut self.fields.lock());
    }

    /// The object a handler wrote (its name is often known only from the body), as the
    /// instance names it.
    pub fn object(&self, resource: &str, api_group: &str, namespace: Option<&str>, name: &str) {
        self.update(|f| {
            let o = f.object.get_or_insert_with(ObjectRef::default);
            o.resource = resource.to_string();
            o.api_group = api_group.to_string();
            o.subresource = None;
            if namespace.is_some() {
                o.namespace = namespace.map(String::from);
            }
            if !name.is_empty() {
                o.name = Some(name.to_string());
            }
        });
    }

    /// The event for an answer with HTTP status `code` (and, when it failed, the
    /// Kubernetes reason and message), or none when nothing is to be audited: reads that
    /// were answered are not (kube-apiserver's policies usually keep them out too).
    pub fn event(&self, user: User, code: u16, failure: Option<(String, String)>) -> Option<Event> {
        let f = self.fields.lock().clone();
        let refused = matches!(code, 401 | 403 | 429);
        if (!f.writes && !refused) || f.forwarded_to.is_some() {
            return None;
        }
        let mut annotations = BTreeMap::new();
        annotations.insert("kairship.io/surface".to_string(), f.surface.to_string());
        if let Some(i) = &f.instance {
            annotations.insert("kairship.io/instance".to_string(), i.clone());
        }
        if let Some((decision, reason)) = &f.decision {
            annotations.insert(
                "authorization.k8s.io/decision".to_string(),
                decision.to_string(),
            );
            annotations.insert("authorization.k8s.io/reason".to_string(), reason.clone());
        }
        let (reason, message) = failure.unzip();
        Some(Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: "Metadata",
            audit_id: self.id.clone(),
            stage: if f.long_running && code < 300 {
                "ResponseStarted"
            } else {
                "ResponseComplete"
            },
            request_uri: self.uri.clone(),
            verb: f.verb,
            user,
            impersonated_user: f.impersonated,
            source_ips: self.source.iter().cloned().collect(),
            user_agent: self.user_agent.clone(),
            object_ref: f.object,
            response_status: ResponseStatus {
                metadata: serde_json::Map::new(),
                code,
                status: (code >= 400).then_some("Failure"),
                reason,
                message,
            },
            request_received_timestamp: self.received.clone(),
            stage_timestamp: now(),
            annotations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_audited_only_when_refused() {
        let r = Record::new("/x".into(), None, None, "grpc");
        r.update(|f| f.verb = "get".into());
        let user = User {
            username: "u".into(),
            uid: String::new(),
            groups: vec![],
        };
        assert!(r.event(user.clone(), 200, None).is_none());
        let e = r
            .event(user.clone(), 403, Some(("Forbidden".into(), "no".into())))
            .expect("refusal audited");
        assert_eq!(e.response_status.status, Some("Failure"));
        r.update(|f| f.writes = true);
        let e = r.event(user, 200, None).expect("write audited");
        let json = serde_json::to_value(&e).expect("json");
        assert_eq!(json["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(json["stage"], "ResponseComplete");
        assert!(json["auditID"].as_str().is_some_and(|id| id.len() == 36));
        assert_eq!(json["annotations"]["kairship.io/surface"], "grpc");
    }
}
