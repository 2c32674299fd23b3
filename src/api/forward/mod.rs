//! Any replica answers any request: in a sharded fleet, a request for an instance another
//! replica owns is passed to that owner, whole and streaming (watches, logs, gRPC streams,
//! and upgraded connections such as exec), over one pooled HTTP/2 connection per peer.
//!
//! The caller's identity travels as the caller sent it (its bearer token), so the owner
//! authenticates, audits and authorizes the request itself, exactly as if it had come
//! there first: a peer adds no trust of its own, and nothing it sends can widen what the
//! caller may do. The forwarding replica authenticated and authorized the caller first
//! (strangers, and callers with no role on the instance, never reach a peer) and does not
//! audit what it passes on (the owner does, once). Peers are reached over TLS verified
//! against the serving CA, for the Service's name. While an instance changes hands, or its
//! owner is gone, a request waits for the next owner (`pass`).

pub mod peers;
pub mod route;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::{header, HeaderName, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use crate::crd::Instance;
use crate::error::ApiError;
use crate::host::shards::Shards;
pub use route::Route;

/// Marks a request a peer forwarded (its value: that peer's name). A forwarded request is
/// never forwarded again; a caller setting it only loses forwarding.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static(FORWARDED_BY_NAME);
pub const FORWARDED_BY_NAME: &str = "kairship-forwarded-by";

/// On a 421 answer to a forwarded request: the replica it reached does not own the
/// instance (any more) and did nothing with it; the forwarding peer sends it again.
pub const MISDIRECTED: HeaderName = HeaderName::from_static("kairship-misdirected");

/// The answer to a forwarded request this replica does not own, for the peer that sent it
/// (whatever the surface: only a peer reads it).
fn misdirected(why: &str) -> Response {
    let mut answer = Response::new(Body::from(why.to_string()));
    *answer.status_mut() = StatusCode::MISDIRECTED_REQUEST;
    if let Ok(v) = http::HeaderValue::from_str(why) {
        answer.headers_mut().insert(MISDIRECTED, v);
    }
    answer
}

/// How peers are reached and how long a request may wait for them.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// PEM of the CA that signed the replicas' serving certificate.
    pub ca_pem: String,
    /// The name their certificate is for (the Service's), whatever address is dialled.
    pub server_name: String,
    /// How long the owner may take to answer a request's head.
    pub head_timeout: Duration,
    /// How long a request for an instance that is changing hands waits for its new owner.
    pub handoff_wait: Duration,
}

impl ForwardConfig {
    /// How long a request waits for a moving instance's new owner unless told: the Lease
    /// (a dead owner's instances wait that long) and as long again for the new owners to
    /// record a large share. At 10,000 instances over 5 replicas on two cores, a killed
    /// replica's 2,051 instances were all recorded 7.4 s after its 15 s Lease lapsed;
    /// with the Lease plus 2 s, reads that came right after the kill got 503.
    pub fn default_handoff_wait(lease: Duration) -> Duration {
        lease * 2 + Duration::from_secs(2)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("the peer CA: {0}")]
    Ca(String),
    #[error("the peer server name {0:?} is not a DNS name or IP address")]
    ServerName(String),
}

type PeerClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Body>;

pub struct Forwarder {
    config: ForwardConfig,
    /// A gRPC channel per peer address, for fleet-wide answers gathered from the owners.
    channels: parking_lot::Mutex<std::collections::HashMap<String, tonic::transport::Channel>>,
    /// HTTP/2 where the peer offers it (one connection per peer, multiplexed).
    pooled: PeerClient,
    /// HTTP/1.1 only, for upgraded connections (exec, attach, port-forward).
    upgrades: PeerClient,
    /// Why peers cannot verify this replica, as its own check last found (`check_self`).
    unverifiable: parking_lot::RwLock<Option<String>>,
}

/// Headers of one hop: not passed on (HTTP/2 refuses them). `te: trailers` is gRPC's and
/// is kept.
const HOP_HEADERS: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

impl Forwarder {
    pub fn new(config: ForwardConfig) -> Result<Arc<Self>, ForwardError> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(config.ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| ForwardError::Ca(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| ForwardError::Ca(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ForwardError::Ca("no certificate in it".into()));
        }
        let server = rustls::pki_types::ServerName::try_from(config.server_name.clone())
            .map_err(|_| ForwardError::ServerName(config.server_name.clone()))?;
        let client = |http2: bool| -> Result<PeerClient, ForwardError> {
            let tls = rustls::ClientConfig::builder_with_provider(kairship_wire::tls::provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| ForwardError::Ca(e.to_string()))?
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            http.set_nodelay(true);
            http.set_connect_timeout(Some(config.head_timeout));
            let builder = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_only()
                .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(
                    server.clone(),
                ));
            let https = match http2 {
                true => builder.enable_http1().enable_http2().wrap_connector(http),
                false => builder.enable_http1().wrap_connector(http),
            };
            Ok(Client::builder(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .http2_keep_alive_interval(Duration::from_secs(20))
                .http2_keep_alive_timeout(Duration::from_secs(10))
                .build(https))
        };
        Ok(Arc::new(Self {
            channels: Default::default(),
            pooled: client(true)?,
            upgrades: client(false)?,
            unverifiable: Default::default(),
            config,
        }))
    }

    pub fn config(&self) -> &ForwardConfig {
        &self.config
    }

    /// Dials this replica's own published `address` as a peer would (the peer CA, the
    /// peer server name) and asks its `/healthz`: a replica its peers cannot verify (a
    /// certificate another CA signed, or not for the server name) says so in `/readyz`
    /// rather than have every request forwarded to it fail. Logged when it changes.
    pub async fn check_self(&self, address: &str) {
        let found = match self.healthz(address).await {
            Ok(()) => None,
            Err(e) => Some(format!(
                "verifying this replica as a peer would, at its own address {address}, fails: {e}. \
                 Replicas configured alike cannot verify it, nor it them: its serving certificate \
                 must be signed by the peer CA (--peer-ca-file, or the CA after it in --tls-cert-file) \
                 and name {:?} (--peer-server-name)",
                self.config.server_name
            )),
        };
        let mut now = self.unverifiable.write();
        if *now != found {
            match &found {
                Some(why) => tracing::error!("{why}"),
                None => tracing::info!(%address, "peers can verify this replica"),
            }
            *now = found;
        }
    }

    /// Why peers cannot verify this replica, if its last check found so.
    pub fn unverifiable(&self) -> Option<String> {
        self.unverifiable.read().clone()
    }

    async fn healthz(&self, address: &str) -> Result<(), String> {
        let address = crate::host::shards::peer_address(address)?;
        let uri: http::Uri = format!("{address}/healthz")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let req = http::Request::get(uri)
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(self.config.head_timeout, self.pooled.request(req)).await {
            Ok(Ok(a)) if a.status().is_success() => Ok(()),
            Ok(Ok(a)) => Err(format!("/healthz answered {}", a.status())),
            Ok(Err(e)) => Err(crate::error::chain(&e)),
            Err(_) => Err(format!("no answer within {:?}", self.config.head_timeout)),
        }
    }

    /// The gRPC channel to the peer at `address` (connected on first use, then shared);
    /// channels to addresses no longer in `current` are dropped.
    pub fn channel(
        &self,
        address: &str,
        current: &[String],
    ) -> Result<tonic::transport::Channel, ApiError> {
        use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
        let mut channels = self.channels.lock();
        channels.retain(|a, _| current.contains(a));
        if let Some(c) = channels.get(address) {
            return Ok(c.clone());
        }
        let unusable = |e: &dyn std::fmt::Display| {
            ApiError::Internal(format!("a peer's address {address:?}: {e}"))
        };
        // Callers' credentials go to peers: over https only, whatever a Lease says.
        crate::host::shards::peer_address(address).map_err(|e| unusable(&e))?;
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.config.ca_pem))
            .domain_name(self.config.server_name.clone());
        let channel = Endpoint::from_shared(address.to_string())
            .map_err(|e| unusable(&e))?
            .tls_config(tls)
            .map_err(|e| unusable(&e))?
            .connect_timeout(self.config.head_timeout)
            .timeout(self.config.head_timeout)
            .connect_lazy();
        channels.insert(address.to_string(), channel.clone());
        Ok(channel)
    }

    /// Passes `req` to `replica` at `address` and answers what it answers. `read`: the
    /// request only reads, so it may be sent again when its connection broke before the
    /// owner answered.
    async fn try_send(
        &self,
        me: &str,
        replica: &str,
        address: &str,
        mut req: Request,
        (read, patience): (bool, Duration),
    ) -> Result<Response, Unsent> {
        let address = crate::host::shards::peer_address(address).map_err(|e| {
            Unsent::Failed(ApiError::Unavailable(format!(
                "replica {replica:?}'s address {address:?} is refused: {e}"
            )))
        })?;
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let uri: http::Uri = format!("{}{path}", address.trim_end_matches('/'))
            .parse()
            .map_err(|e| {
                Unsent::Failed(ApiError::Internal(format!(
                    "replica {replica:?}'s address {address:?}: {e}"
                )))
            })?;
        let upgrading = req.headers().contains_key(header::UPGRADE);
        let idempotent = read && !upgrading;
        let caller_side = upgrading.then(|| hyper::upgrade::on(&mut req));
        let (mut parts, body) = req.into_parts();
        parts.uri = uri;
        let upgrade = parts.headers.get(header::UPGRADE).cloned();
        for h in HOP_HEADERS {
            parts.headers.remove(h);
        }
        if let Some(u) = upgrade {
            // An upgrade is HTTP/1.1's: its own two headers go on.
            parts.headers.insert(header::UPGRADE, u);
            parts.headers.insert(
                header::CONNECTION,
                http::HeaderValue::from_static("Upgrade"),
            );
            parts.version = http::Version::HTTP_11;
        }
        if let Ok(v) = http::HeaderValue::from_str(me) {
            parts.headers.insert(FORWARDED_BY, v);
        }
        // The length is the body's own, as it goes out (a body of unknown length is
        // framed by HTTP/2 or chunked).
        use http_body::Body as _;
        match body.size_hint().exact() {
            Some(n) => {
                parts.headers.insert(header::CONTENT_LENGTH, n.into());
            }
            None => {
                parts.headers.remove(header::CONTENT_LENGTH);
            }
        }
        let outgoing = http::Request::from_parts(parts, body);
        let client = if upgrading {
            &self.upgrades
        } else {
            &self.pooled
        };
        let within = self.config.head_timeout + patience;
        let mut answer = match tokio::time::timeout(within, client.request(outgoing)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                let why = hop_failure(replica, &e);
                // No connection (nothing of the request left this replica), or one that
                // broke before the owner answered a request that may be sent twice.
                return Err(match e.is_connect() || idempotent {
                    true => Unsent::NotConnected(why),
                    false => Unsent::Failed(ApiError::Unavailable(why)),
                });
            }
            Err(_) => {
                return Err(Unsent::Failed(ApiError::Unavailable(format!(
                "replica {replica:?}, which runs this instance, did not answer within {within:?}"
            ))))
            }
        };
        if answer.status() == StatusCode::MISDIRECTED_REQUEST {
            if let Some(why) = answer.headers().get(MISDIRECTED) {
                return Err(Unsent::NotConnected(format!(
                    "replica {replica:?} does not run this instance now: {}",
                    String::from_utf8_lossy(why.as_bytes())
                )));
            }
        }
        if let (Some(caller_side), StatusCode::SWITCHING_PROTOCOLS) = (caller_side, answer.status())
        {
            let owner_side = hyper::upgrade::on(&mut answer);
            tokio::spawn(async move {
                if let Ok((a, b)) = tokio::try_join!(caller_side, owner_side) {
                    let (mut a, mut b) = (TokioIo::new(a), TokioIo::new(b));
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                }
            });
            let (parts, _) = answer.into_parts();
            return Ok(Response::from_parts(parts, Body::empty()));
        }
        let (parts, body) = answer.into_parts();
        Ok(Response::from_parts(parts, Body::new(body)))
    }
}

/// What went wrong on the hop to `replica`, in words that tell a refused connection from
/// a refused certificate, a dropped connection and a request this replica could not send.
fn hop_failure(replica: &str, e: &hyper_util::client::legacy::Error) -> String {
    let mut causes = Vec::new();
    let mut hyper_error = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            hyper_error.get_or_insert(h);
        }
        causes.push(s.to_string());
        source = s.source();
    }
    let cause = causes.last().cloned().unwrap_or_else(|| e.to_string());
    let tls = causes.iter().any(|c| {
        c.contains("certificate") || c.contains("handshake") || c.contains("invalid peer")
    });
    let what = match hyper_error {
        _ if e.is_connect() && tls => "its certificate was not accepted (a peer must present one of the serving CA for the Service's name)",
        _ if e.is_connect() => "it cannot be reached",
        Some(h) if h.is_canceled() || h.is_incomplete_message() => {
            "it closed the connection before answering"
        }
        Some(h) if h.is_user() || h.is_body_write_aborted() => {
            "this replica could not send the request to it"
        }
        Some(h) if h.is_timeout() => "it did not answer in time",
        Some(h) if h.is_parse() => "its answer is not HTTP",
        _ => "the connection to it failed",
    };
    format!("replica {replica:?}, which runs this instance: {what}: {cause}")
}

/// Why a request got no answer from a peer.
enum Unsent {
    /// No connection to the peer (it stopped or died), a peer that no longer owns the
    /// instance and did nothing, or a read whose connection broke before any answer: the
    /// request can go to the next owner.
    NotConnected(String),
    Failed(ApiError),
}

impl Unsent {
    fn into_error(self) -> ApiError {
        match self {
            Unsent::NotConnected(why) => ApiError::Unavailable(why),
            Unsent::Failed(e) => e,
        }
    }
}

/// Bodies up to this size are held while a request is forwarded, so it can be sent again
/// to the instance's next owner when its owner cannot be reached (kube-apiserver's own
/// bound on a request body is 3 MiB).
const REPLAYABLE_BODY: usize = 3 << 20;

/// What became of a request for an instance in a sharded fleet.
pub enum Passed {
    /// This replica answers it.
    Here(Request),
    /// The owner, `replica`, answered.
    Answered { replica: String, answer: Response },
    /// A peer forwarded it, and this replica does not own the instance: the peer's answer.
    Misdirected(Response),
}

/// Answers `req` for `instance` here, or passes it to the instance's owner. While the
/// instance changes hands, or its owner cannot be reached (its pod stopped or died and
/// its Lease has yet to expire), the request waits for the next owner, at most the
/// forwarder's handoff bound; `forwarding` is told each replica it is passed to. `read`:
/// the request only reads (the chain's rules say so), so it is sent again also when its
/// connection broke before an answer. `patience`: how much longer than the head timeout
/// the owner may take (it holds requests for a hibernated instance while it wakes).
pub async fn pass(
    forwarder: Option<&Forwarder>,
    shards: &Shards,
    lookup: impl Fn(&str) -> Option<Arc<Instance>>,
    instance: &str,
    (req, read): (Request, bool),
    patience: Duration,
    forwarding: impl Fn(&str),
) -> Result<Passed, ApiError> {
    let forwarded = req.headers().contains_key(FORWARDED_BY);
    let wait = forwarder.map_or(Duration::ZERO, |f| f.config().handoff_wait);
    let deadline = tokio::time::Instant::now() + wait;
    let mut req = Some(req);
    let mut replay: Option<(http::request::Parts, bytes::Bytes)> = None;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let (replica, address) = match place(shards, &lookup, instance, forwarded, left).await? {
            Route::Local => return Ok(Passed::Here(take(&mut req, &replay)?)),
            Route::Peer { replica, address } => (replica, address),
            Route::Moving(why) => return Err(ApiError::Unavailable(why)),
            Route::Misdirected(why) => return Ok(Passed::Misdirected(misdirected(&why))),
        };
        let Some(forwarder) = forwarder else {
            return Err(ApiError::Unavailable(format!(
                "instance {instance:?} runs on replica {replica:?}, and this replica cannot reach its peers (no peer CA configured)"
            )));
        };
        // The first time it goes out, a small body is read whole (the owner would read it
        // anyway), so the request can be sent again; streamed and upgraded ones cannot.
        if replay.is_none() {
            if let Some(r) = req.take() {
                match replayable(r).await? {
                    Ok(kept) => replay = Some(kept),
                    Err(streamed) => req = Some(streamed),
                }
            }
        }
        forwarding(&replica);
        tracing::debug!(instance, replica = %replica, "forwarding to the instance's owner");
        let outgoing = take(&mut req, &replay)?;
        match forwarder
            .try_send(shards.me(), &replica, &address, outgoing, (read, patience))
            .await
        {
            Ok(answer) => return Ok(Passed::Answered { replica, answer }),
            Err(Unsent::NotConnected(why))
                if replay.is_some() && tokio::time::Instant::now() < deadline =>
            {
                tracing::debug!(instance, replica = %replica, error = %why, "owner unreachable; waiting for the next");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into_error()),
        }
    }
}

/// The request to send now: the one not yet sent, else a copy of the kept one.
fn take(
    req: &mut Option<Request>,
    replay: &Option<(http::request::Parts, bytes::Bytes)>,
) -> Result<Request, ApiError> {
    if let Some(r) = req.take() {
        return Ok(r);
    }
    match replay {
        Some((parts, body)) => Ok(Request::from_parts(parts.clone(), Body::from(body.clone()))),
        None => Err(ApiError::Internal(
            "a forwarded request was sent already".into(),
        )),
    }
}

/// `req` read whole when it can be sent twice (no upgrade, a body of known size within
/// `REPLAYABLE_BODY`); else `req` back untouched.
async fn replayable(
    req: Request,
) -> Result<Result<(http::request::Parts, bytes::Bytes), Request>, ApiError> {
    use http_body::Body as _;
    let small = req
        .body()
        .size_hint()
        .exact()
        .is_some_and(|n| n <= REPLAYABLE_BODY as u64);
    if !small || req.headers().contains_key(header::UPGRADE) {
        return Ok(Err(req));
    }
    let (parts, body) = req.into_parts();
    let bytes = crate::api::body::read_limited(body, REPLAYABLE_BODY, "the request body").await?;
    Ok(Ok((parts, bytes)))
}

/// Where `instance` is answered (`lookup` finds it in the Instance cache), waiting up to
/// `wait` while it changes hands.
async fn place(
    shards: &Shards,
    lookup: &impl Fn(&str) -> Option<Arc<Instance>>,
    instance: &str,
    forwarded: bool,
    wait: Duration,
) -> Result<Route, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let i = lookup(instance);
        let r = route::route(
            shards.me(),
            i.as_deref(),
            &shards.live(),
            |r| shards.address(r),
            forwarded,
        );
        match r {
            Route::Moving(why) if tokio::time::Instant::now() >= deadline => {
                return Err(ApiError::Unavailable(format!(
                    "instance {instance:?} is moving between Kairship's replicas ({why}); retry shortly"
                )))
            }
            Route::Moving(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            r => return Ok(r),
        }
    }
}
