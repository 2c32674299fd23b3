//! The HTTP client of one instance: every request and watch of the instance multiplexed
//! over one HTTP/2 connection when the server offers it (kube-apiserver and the simulator
//! do), HTTP/1.1 otherwise. kube's default client speaks HTTP/1.1 only, where each open
//! watch holds a connection of its own: eleven caches made eleven sockets per instance
//! (22 file descriptors when the fleet runs in the same process), so 1,000 instances ran
//! out of open files.

use std::sync::Arc;
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

/// Host requests awaiting their answer's head at once; the rest wait their turn (within
/// their own deadlines). Over HTTP/1.1 each one in flight holds a connection: 2,000
/// instance actors of a replica starting together opened 8,000 connections to the host,
/// whose accept queue overflowed, and every host call (the Leases' too) timed out. A
/// watch holds a turn only until its head arrives. Lease calls never wait in this line
/// ([`Lanes`]): a renewal queued behind a burst would cost the replica its Leases.
const HOST_MAX_IN_FLIGHT: usize = 32;

/// A `kube::Client` for `config` that negotiates HTTP/2 (ALPN `h2`, falling back to
/// `http/1.1`), with the kubeconfig's TLS, credentials and server name.
pub fn build(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, true, WATCH_READ_TIMEOUT, None)
}

/// The host's client: HTTP/1.1 only, since on one HTTP/2 connection a missed keepalive
/// ping under a 1,000-instance start failed every host call at once (the Lease renewal
/// with them); at most [`HOST_IDLE_CONNECTIONS`] idle connections kept and
/// [`HOST_MAX_IN_FLIGHT`] requests in flight.
pub fn build_host(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, false, WATCH_READ_TIMEOUT, Some(HOST_MAX_IN_FLIGHT))
}

/// An instance's client for upgraded connections (exec, attach, port-forward): HTTP/1.1
/// only, each upgrade on a connection of its own that leaves the pool once upgraded.
pub fn build_upgrades(config: &kube::Config) -> Result<kube::Client, ClientError> {
    build_with(config, false, SESSION_READ_TIMEOUT, None)
}

fn build_with(
    config: &kube::Config,
    http2: bool,
    read_timeout: Duration,
    max_in_flight: Option<usize>,
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
        .service(Lanes {
            inner: client,
            bulk: max_in_flight.map(|n| Arc::new(tokio::sync::Semaphore::new(n))),
        });
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// Two lanes to one server: Lease calls (`coordination.k8s.io`) go at once, every other
/// call waits for one of `bulk`'s turns (held until its answer's head arrives).
#[derive(Clone)]
struct Lanes<S> {
    inner: S,
    bulk: Option<Arc<tokio::sync::Semaphore>>,
}

fn is_lease_call<B>(req: &http::Request<B>) -> bool {
    req.uri().path().contains("/apis/coordination.k8s.io/")
}

impl<S, B> tower::Service<http::Request<B>> for Lanes<S>
where
    S: tower::Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // The service made ready is the one called; a clone stays for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        match self.bulk.clone().filter(|_| !is_lease_call(&req)) {
            None => Box::pin(inner.call(req)),
            Some(bulk) => Box::pin(async move {
                // Never closed; a closed one would only lift the bound.
                let _turn = bulk.acquire_owned().await.ok();
                inner.call(req).await
            }),
        }
    }
}

/// The host's client from a kubeconfig file, else from the pod's service account or
/// `$KUBECONFIG` (kube's inference); the error names which and why.
pub async fn from_kubeconfig(path: Option<&std::path::Path>) -> Result<kube::Client, String> {
    let config = match path {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no host cluster: pass --kubeconfig ({e})"))?,
    };
    build_host(&config).map_err(|e| format!("building the host client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A plain-HTTP server answering every request after `delay`, counting the
    /// connections it accepted and the most requests it had in flight at once.
    async fn slow_server(
        delay: Duration,
    ) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (accepted, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let (a, m, done) = (accepted.clone(), most.clone(), answered.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let (m, in_flight, done) = (m.clone(), in_flight.clone(), done.clone());
                let svc = hyper::service::service_fn(move |_req| {
                    let (m, in_flight, done) = (m.clone(), in_flight.clone(), done.clone());
                    async move {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        m.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(b"{}")),
                        ))
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc),
                );
            }
        });
        (url, accepted, most, answered)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_host_calls_waits_its_turn_but_lease_calls_do_not() {
        let (url, accepted, most, answered) = slow_server(Duration::from_millis(100)).await;
        let config = kube::Config::new(url.parse().expect("url"));
        let host = build_host(&config).expect("host client");
        let get = |path: &'static str| {
            let host = host.clone();
            async move {
                let req = http::Request::get(path).body(Vec::new()).expect("request");
                host.request_text(req).await
            }
        };
        let burst = tokio::spawn(futures::future::join_all((0..320).map(|_| get("/version"))));
        tokio::time::sleep(Duration::from_millis(30)).await;
        get("/apis/coordination.k8s.io/v1/namespaces/k/leases/l")
            .await
            .expect("the Lease call is answered");
        let before_lease = answered.load(Ordering::SeqCst);
        let answers = burst.await.expect("burst");
        assert!(answers.iter().all(Result::is_ok), "every call is answered");
        let (most, accepted) = (most.load(Ordering::SeqCst), accepted.load(Ordering::SeqCst));
        // The bound, plus the Lease call beside it.
        assert!(
            most <= HOST_MAX_IN_FLIGHT + 1,
            "{most} host calls in flight at once"
        );
        assert!(
            accepted <= HOST_MAX_IN_FLIGHT * 2,
            "{accepted} connections for 321 calls"
        );
        assert!(most > 1, "the calls ran side by side, not one by one");
        // Ten rounds of 32 were queued; the Lease call went past them.
        assert!(
            before_lease < 160,
            "the Lease call waited behind {before_lease} of the burst's 320 calls"
        );
    }
}
