//! Serving an axum app over rustls, with a bounded handshake and graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::ServiceExt;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn serve_tls(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
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
            _ = &mut shutdown => break,
        };
        // As Go's servers do: a response's last partial segment must not wait for the
        // client's delayed ACK (40 ms).
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, mut stop) = (acceptor.clone(), app.clone(), stop_rx.clone());
        tokio::spawn(async move {
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
                _ = conn.as_mut() => {}
                _ = stop.changed() => {}
            }
        });
    }
    let _ = stop_tx.send(true);
}
