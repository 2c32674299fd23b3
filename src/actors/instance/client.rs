//! The HTTP client of one instance: every request and watch of the instance multiplexed
//! over one HTTP/2 connection when the server offers it (kube-apiserver and the simulator
//! do), HTTP/1.1 otherwise. kube's default client speaks HTTP/1.1 only, where each open
//! watch holds a connection of its own: eleven caches made eleven sockets per instance
//! (22 file descriptors when the fleet runs in the same process), so 1,000 instances ran
//! out of open files.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

/// How often an idle HTTP/2 connection is pinged, and how long an answer may take: with
/// every watch on one connection, a dead peer must be noticed without a socket read
/// timeout (which would also cut quiet watches).
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(20);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(295);
/// An exec or port-forward session may be quiet for long: kubelet's own default idle
/// bound for streaming connections (`streamingConnectionIdleTimeout`).
const SESSION_READ_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("TLS settings of the kubeconfig: {0}")]
    Tls(#[source] kube::Error),
    #[error("tls-server-name {0:?} is not a valid server name")]
    ServerName(String),
    #[error("credentials of the kubeconfig: {0}")]
    Auth(#[source] kube::Error),
}

/// Idle connections the host client keeps: 1,000 actors reading their kubeconfig Secrets
/// at start otherwise left a thousand pooled sockets open for hyper's 90 s idle timeout.
const HOST_IDLE_CONNECTIONS: usize = 32;

/// A `kube::Client` for `config` that negotiates HTTP/2 (ALPN `h2`, falling back to
/// `http/1.1`), with the kubeconfig's TLS, credentials and server name.
pub fn build(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, true, WATCH_READ_TIMEOUT)
}

/// The host's client: HTTP/1.1 only, since on one HTTP/2 connection a missed keepalive
/// ping under a 1,000-instance start failed every host call at once (the Lease renewal
/// with them); at most [`HOST_IDLE_CONNECTIONS`] idle connections kept.
pub fn build_host(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, false, WATCH_READ_TIMEOUT)
}

/// An instance's client for upgraded connections (exec, attach, port-forward): HTTP/1.1
/// only, each upgrade on a connection of its own that leaves the pool once upgraded.
pub fn build_upgrades(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, false, SESSION_READ_TIMEOUT)
}

fn build_with(
    config: &kube::Config,
    http2: bool,
    read_timeout: Duration,
) -> Result<kube::Client, ClientError> {
    // ALPN (`h2`, then `http/1.1`) is set by the connector builder from the versions enabled.
    let tls = config.rustls_client_config().map_err(ClientError::Tls)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(config.connect_timeout);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let server = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|_| ClientError::ServerName(name.clone()))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(server))
        }
        None => builder,
    };
    let https = if http2 {
        builder.enable_http1().enable_http2().wrap_connector(http)
    } else {
        builder.enable_http1().wrap_connector(http)
    };
    // A socket that reads nothing for longer than a watch lasts (kube's watcher asks for
    // 290 s) is dead; over HTTP/2 the pings below keep live ones from reaching it.
    let mut https = hyper_timeout::TimeoutConnector::new(https);
    https.set_read_timeout(Some(read_timeout));
    https.set_write_timeout(config.write_timeout);
    let mut client = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    if !http2 {
        client.pool_max_idle_per_host(HOST_IDLE_CONNECTIONS);
    }
    let client = client
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .http2_keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(https);
    let auth = config.auth_layer().map_err(ClientError::Auth)?;
    // Impersonation a kubeconfig asks for (`as`, `as-groups`) travels as headers.
    let headers = config.extra_headers_layer().map_err(ClientError::Auth)?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .service(client);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}
