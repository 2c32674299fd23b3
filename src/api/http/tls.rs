//! Serving an axum app over rustls, with a bounded handshake and a graceful shutdown:
//! once `shutdown` resolves the listener closes, every connection is asked to finish
//! (HTTP/2 GOAWAY, HTTP/1.1 closed after its answer) and requests in flight get
//! `DRAIN_TIMEOUT` to complete before the rest are cut.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::ServiceExt;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish once the server closes (kube-apiserver
/// gives non-watch requests a minute; Kairship's own bound on requests is shorter).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn serve_tls(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            // Finished connections leave the set as they go.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            _ = &mut shutdown => break,
        };
        // As Go's servers do: a response's last partial segment must not wait for the
        // client's delayed ACK (40 ms).
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, mut stop) = (acceptor.clone(), app.clone(), stop_rx.clone());
        connections.spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "tls handshake failed"),
                Err(_) => return tracing::debug!(%peer, "tls handshake timed out"),
            };
            let svc =
                hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    app.clone().oneshot(req.map(axum::body::Body::new))
                });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
    }
    // Refuse new connections from here on.
    drop(listener);
    let _ = stop_tx.send(true);
    let open = connections.len();
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    match drained {
        Ok(()) => tracing::info!(connections = open, "HTTPS connections drained"),
        Err(_) => {
            tracing::warn!(
                left = connections.len(),
                after_secs = DRAIN_TIMEOUT.as_secs(),
                "HTTPS connections still open after the drain timeout; closing them"
            );
            connections.abort_all();
        }
    }
}
