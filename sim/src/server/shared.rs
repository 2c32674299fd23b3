//! Many simulated API servers behind one listening socket, as a real fleet sits behind one
//! ingress: the TLS server name a client asks for (SNI, a kubeconfig's `tls-server-name`)
//! picks the server, its certificate and its handler. A fleet then costs one socket per
//! connection instead of a listener per instance as well, so its size is bounded by
//! memory and not by the open-files limit.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{debug, Instrument};

use super::{ApiServer, HANDSHAKE_TIMEOUT};

type Routes = Arc<RwLock<HashMap<String, Weak<ApiServer>>>>;

/// The listener and the servers it routes to, by name.
pub struct SharedListener {
    addr: SocketAddr,
    routes: Routes,
    stop: watch::Sender<bool>,
}

/// Chooses the certificate of the server a client names; a name no server has gets no
/// certificate, so its handshake fails as an ingress without that host's would.
#[derive(Debug)]
struct ByName(Routes);

impl ResolvesServerCert for ByName {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let name = hello.server_name()?;
        let server = self.0.read().get(name)?.upgrade()?;
        (!server.is_shut_down()).then(|| server.tls.key.clone())
    }
}

impl SharedListener {
    /// Binds `addr` and routes its connections until dropped.
    pub async fn bind(addr: SocketAddr) -> std::io::Result<Arc<Self>> {
        let routes: Routes = Default::default();
        let config = kairship_wire::tls::server_config_resolving(Arc::new(ByName(routes.clone())))
            .map_err(std::io::Error::other)?;
        let listener = listen(addr)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let span = tracing::info_span!("shared-listener", %addr);
        tokio::spawn(accept_loop(listener, config, routes.clone(), stopped).instrument(span));
        Ok(Arc::new(Self { addr, routes, stop }))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `server` here from now on, reached by its name.
    pub fn add(&self, server: &Arc<ApiServer>) {
        *server.addr.lock() = Some(self.addr);
        server
            .by_name
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.routes
            .write()
            .insert(server.name.clone(), Arc::downgrade(server));
    }

    /// Stops routing to the server of `name` (its open connections end with its shutdown).
    pub fn remove(&self, name: &str) {
        self.routes.write().remove(name);
    }

    /// Closes the listener; connections end with their servers' shutdown.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// Connections the kernel queues for the accept loop. Every instance's clients connect
/// here: 10,000 instances starting together overflowed tokio's default of 1,024, and the
/// refused handshakes came back only after TCP's SYN retries (1 s, 3 s, 7 s...).
const BACKLOG: u32 = 8192;

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    // The kernel caps it at net.core.somaxconn (4,096 here).
    socket.listen(BACKLOG)
}

impl Drop for SharedListener {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    routes: Routes,
    mut stopped: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (tcp, peer) = tokio::select! {
            a = super::accept(&listener) => a,
            _ = stopped.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let routes = routes.clone();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return debug!(%peer, error = %e, "tls handshake failed"),
                Err(_) => return debug!(%peer, "tls handshake timed out"),
            };
            let server = tls
                .get_ref()
                .1
                .server_name()
                .and_then(|n| routes.read().get(n).and_then(Weak::upgrade));
            let Some(server) = server else {
                return debug!(%peer, "connection for a server no longer routed here");
            };
            // A server that is down closes its connections, as the one behind an ingress
            // whose backend died would.
            if server.faults.is_down() || server.is_shut_down() {
                return;
            }
            let span = tracing::info_span!("apiserver", server = %server.name);
            server.serve_connection(tls).instrument(span).await;
        });
    }
}
