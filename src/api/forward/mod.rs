//! Any replica answers any request: in a sharded fleet, a request for an instance another
//! replica owns is passed to that owner, whole and streaming (watches, logs, gRPC streams,
//! and upgraded connections such as exec), over one pooled HTTP/2 connection per peer.
//!
//! The caller's identity travels as the caller sent it (its bearer token), so the owner
//! authenticates, audits and authorizes the request itself, exactly as if it had come
//! there first: a peer adds no trust of its own, and nothing it sends can widen what the
//! caller may do. The forwarding replica only authenticated the caller (so strangers
//! cannot use it to reach peers) and does not audit the request (the owner does, once).
//! Peers are reached over TLS verified against the serving CA, for the Service's name.

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

use crate::actors::shards::Shards;
use crate::crd::Instance;
use crate::error::ApiError;
pub use route::Route;

/// Marks a request a peer forwarded (its value: that peer's name). A forwarded request is
/// never forwarded again; a caller setting it only loses forwarding.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static(FORWARDED_BY_NAME);
pub const FORWARDED_BY_NAME: &str = "kairship-forwarded-by";

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
            config,
        }))
    }

    pub fn config(&self) -> &ForwardConfig {
        &self.config
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

    /// Passes `req` to `replica` at `address` and answers what it answers.
    pub async fn send(
        &self,
        me: &str,
        replica: &str,
        address: &str,
        mut req: Request,
    ) -> Result<Response, ApiError> {
        let path = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let uri: http::Uri = format!("{}{path}", address.trim_end_matches('/'))
            .parse()
            .map_err(|e| {
                ApiError::Internal(format!("replica {replica:?}'s address {address:?}: {e}"))
            })?;
        let upgrading = req.headers().contains_key(header::UPGRADE);
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
        let outgoing = http::Request::from_parts(parts, body);
        let client = if upgrading {
            &self.upgrades
        } else {
            &self.pooled
        };
        let within = self.config.head_timeout;
        let mut answer = match tokio::time::timeout(within, client.request(outgoing)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                return Err(ApiError::Unavailable(format!(
                    "replica {replica:?}, which runs this instance, cannot be reached: {e}"
                )))
            }
            Err(_) => {
                return Err(ApiError::Unavailable(format!(
                "replica {replica:?}, which runs this instance, did not answer within {within:?}"
            )))
            }
        };
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

/// Where `instance` is answered (`lookup` finds it in the Instance cache), waiting up to
/// `wait` while it changes hands.
pub async fn place(
    shards: &Shards,
    lookup: impl Fn(&str) -> Option<Arc<Instance>>,
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
