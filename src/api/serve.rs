//! The one HTTP server of every API port (HTTPS; gRPC, with TLS or, on loopback or when
//! told, in plain text): HTTP/1.1 and HTTP/2 over hyper, with the handler chain's first
//! layer, the server's limits: a bound on open connections, on the TLS handshake, on
//! reading a request's headers, on idle connections and on HTTP/2 streams per connection;
//! and a graceful shutdown: once `shutdown` resolves the listener closes, every connection
//! is asked to finish (HTTP/2 GOAWAY, HTTP/1.1 closed after its answer) and requests in
//! flight get `DRAIN_TIMEOUT` to complete before the rest are cut.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::api::chain::audit::Peer;
use crate::api::chain::fairness::hold_until_done;
use crate::api::instance_hosts::InstanceHosts;
use crate::api::request_info::Edge;

/// How long requests in flight may take to finish once the server closes (kube-apiserver
/// gives non-watch requests a minute; Kairship's own bound on requests is shorter).
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// The server's own limits (the chain's outermost layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Connections open at once from one client address.
    pub max_connections_per_client: usize,
    pub handshake_timeout: Duration,
    /// A request's headers must arrive within this of its first byte (HTTP/1.1;
    /// slow-header attacks). Waiting for the next request is the idle timeout's business.
    pub header_read_timeout: Duration,
    /// A connection with nothing in flight for this long is closed. Longer than the 90 s
    /// after which Go's, client-go's and hyper's clients drop idle pooled connections
    /// themselves, so a server-side close never races a client reusing one.
    pub idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection (kube-apiserver's default, 250... here
    /// fewer: one connection should not hold a caller's whole budget).
    pub max_streams: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_connections_per_client: 512,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_streams: 250,
        }
    }
}

/// Requests in flight on one connection, whether it has been idle since the last look,
/// and since when the bytes of a request whose headers are not complete have been coming.
struct Activity {
    in_flight: AtomicUsize,
    seen: AtomicBool,
    opened: Instant,
    /// Milliseconds after `opened`, plus one, of the first byte of an incomplete request
    /// head; 0 when none is coming.
    head_since: AtomicU64,
    /// HTTP/2: bytes between requests are frames (pings, settings), not a head.
    http2: AtomicBool,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            seen: AtomicBool::new(false),
            opened: Instant::now(),
            head_since: AtomicU64::new(0),
            http2: AtomicBool::new(false),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Bytes read while nothing is in flight begin the next request's head.
    fn read(&self) {
        if self.http2.load(Ordering::Acquire) || self.in_flight.load(Ordering::Acquire) > 0 {
            return;
        }
        let now = self.now();
        let _ = self
            .head_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
    }

    /// HTTP/2: a header block began (a HEADERS frame without END_HEADERS).
    fn head_opened(&self) {
        let now = self.now();
        let _ = self
            .head_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
    }

    /// HTTP/2: the open header block ended (its CONTINUATION with END_HEADERS).
    fn head_closed(&self) {
        self.head_since.store(0, Ordering::Release);
    }

    /// A request's head is complete.
    fn request(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
    }

    /// How long the current incomplete head has been coming.
    fn head_for(&self) -> Option<Duration> {
        match self.head_since.load(Ordering::Acquire) {
            0 => None,
            since => Some(Duration::from_millis(self.now().saturating_sub(since))),
        }
    }
}

/// The connection's stream, telling `Activity` when bytes arrive.
struct Watched<I> {
    inner: I,
    activity: Arc<Activity>,
    first: bool,
    /// HTTP/2's frames as they are read, once the connection is HTTP/2.
    frames: Option<H2Frames>,
}

/// Follows HTTP/2 frame headers in the bytes read, to time header blocks: a HEADERS
/// frame without END_HEADERS opens one that only a CONTINUATION with END_HEADERS closes,
/// and hyper holds no request until then, so the header timeout must see it here (a
/// client sending half a header block was held 40 s; HTTP/1.1's heads are timed by bytes).
struct H2Frames {
    /// Bytes of the client preface ("PRI * HTTP/2.0...") still to skip.
    preface_left: usize,
    header: [u8; 9],
    header_len: usize,
    payload_left: usize,
}

impl H2Frames {
    const HEADERS: u8 = 0x1;
    const CONTINUATION: u8 = 0x9;
    const END_HEADERS: u8 = 0x4;

    fn new() -> Self {
        Self {
            preface_left: 24,
            header: [0; 9],
            header_len: 0,
            payload_left: 0,
        }
    }

    fn feed(&mut self, mut bytes: &[u8], activity: &Activity) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (9 - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
            self.header_len += n;
            bytes = &bytes[n..];
            if self.header_len < 9 {
                continue;
            }
            self.header_len = 0;
            let h = self.header;
            self.payload_left =
                usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
            let (kind, end) = (h[3], h[4] & Self::END_HEADERS != 0);
            match (kind, end) {
                (Self::HEADERS, false) => activity.head_opened(),
                (Self::CONTINUATION, true) => activity.head_closed(),
                _ => {}
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let got = &buf.filled()[before..];
        if matches!(polled, Poll::Ready(Ok(()))) && !got.is_empty() {
            if std::mem::take(&mut self.first) && got.starts_with(b"PRI ") {
                self.activity.http2.store(true, Ordering::Release);
                self.frames = Some(H2Frames::new());
            }
            let this = &mut *self;
            match this.frames.as_mut() {
                Some(frames) => frames.feed(got, &this.activity),
                None => this.activity.read(),
            }
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.seen.store(true, Ordering::Release);
    }
}

/// Connections open per client address.
#[derive(Default, Clone)]
struct PerClient(Arc<parking_lot::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>);

/// One connection of a client, counted until dropped.
struct ClientSlot(PerClient, std::net::IpAddr);

impl PerClient {
    fn take(&self, ip: std::net::IpAddr, max: usize) -> Option<ClientSlot> {
        let mut open = self.0.lock();
        let n = open.entry(ip).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ClientSlot(self.clone(), ip))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.0 .0.lock();
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// Serves `app` on `listener` (TLS when `tls` is given) until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: axum::Router,
    limits: ServerLimits,
    hosts: Option<Arc<InstanceHosts>>,
    shutdown: impl Future<Output = ()> + Send,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let clients = PerClient::default();
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = limits.max_connections, "too many connections; closed");
            drop(tcp);
            continue;
        };
        let Some(per_client) = clients.take(peer.ip(), limits.max_connections_per_client) else {
            tracing::debug!(%peer, limit = limits.max_connections_per_client, "too many connections from one address; closed");
            drop(tcp);
            continue;
        };
        // As Go's servers do: a response's last partial segment must not wait for the
        // client's delayed ACK (40 ms).
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, stop) = (acceptor.clone(), app.clone(), stop_rx.clone());
        let hosts = hosts.clone();
        connections.spawn(async move {
            let _slot = (slot, per_client);
            let edge = |sni| EdgeOf { limits, hosts, sni };
            match acceptor {
                None => connection(tcp, peer, app, edge(None), stop).await,
                Some(acceptor) => {
                    let handshake = acceptor.accept(tcp);
                    match tokio::time::timeout(limits.handshake_timeout, handshake).await {
                        Ok(Ok(s)) => {
                            let sni = s.get_ref().1.server_name().map(Arc::<str>::from);
                            connection(s, peer, app, edge(sni), stop).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "tls handshake failed"),
                        Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                    }
                }
            }
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
        Ok(()) => tracing::debug!(connections = open, "connections drained"),
        Err(_) => {
            tracing::warn!(
                left = connections.len(),
                after_secs = DRAIN_TIMEOUT.as_secs(),
                "connections still open after the drain timeout; closing them"
            );
            connections.abort_all();
        }
    }
}

/// What the edge knows of a connection: the server's limits, the instance hosts it
/// serves and the TLS server name the client asked for.
struct EdgeOf {
    limits: ServerLimits,
    hosts: Option<Arc<InstanceHosts>>,
    sni: Option<Arc<str>>,
}

/// One connection, HTTP/1.1 or HTTP/2, until it ends, idles out or the server stops.
async fn connection<I>(
    io: I,
    peer: std::net::SocketAddr,
    app: axum::Router,
    edge: EdgeOf,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let EdgeOf { limits, hosts, sni } = edge;
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: io,
        activity: activity.clone(),
        first: true,
        frames: None,
    });
    let svc = {
        let activity = activity.clone();
        hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
            activity.request();
            let held = InFlight(activity.clone());
            let mut req = req.map(axum::body::Body::new);
            req.extensions_mut().insert(Peer(peer));
            // One decoded request from here on, or a refusal of a path that is not plain
            // or of a host the connection was not opened for.
            let edge = Edge {
                hosts: hosts.as_deref(),
                sni: sni.as_deref(),
            };
            let req = crate::api::request_info::at_edge(req, edge);
            let app = app.clone();
            async move {
                let resp = match req {
                    Ok(req) => app.oneshot(req).await?,
                    Err(r) => {
                        tracing::debug!(%peer, error = %r.error, "refused at the edge");
                        crate::api::chain::refusal(r.surface, &r.error)
                    }
                };
                // In flight until the body is sent: a watch keeps its connection busy.
                Ok::<_, std::convert::Infallible>(hold_until_done(resp, held))
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // hyper's own header timeout also runs while a keep-alive connection waits for its
    // next request, closing idle connections after 10 s under clients that reuse them
    // (a chaos run's healthy request failed so); the loop below times heads instead.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let conn = builder.serve_connection_with_upgrades(io, svc);
    tokio::pin!(conn);
    let check = (limits.idle_timeout / 3)
        .min(limits.header_read_timeout / 2)
        .max(Duration::from_millis(100));
    let mut idle_for = Duration::ZERO;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep(check) => {
                let busy = activity.in_flight.load(Ordering::Acquire) > 0;
                let recent = activity.seen.swap(false, Ordering::AcqRel);
                idle_for = match busy || recent {
                    true => Duration::ZERO,
                    false => idle_for + check,
                };
                if activity.head_for().is_some_and(|t| t >= limits.header_read_timeout) {
                    tracing::debug!(%peer, "request headers incomplete after the header timeout; closed");
                    return;
                }
                if idle_for >= limits.idle_timeout {
                    tracing::debug!(%peer, "idle connection closed");
                    break;
                }
            }
        }
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![
            (payload >> 16) as u8,
            (payload >> 8) as u8,
            payload as u8,
            kind,
            flags,
            0,
            0,
            0,
            1,
        ];
        f.extend(std::iter::repeat_n(0u8, payload));
        f
    }

    #[test]
    fn an_unfinished_http2_header_block_is_timed() {
        let activity = Activity::new();
        let mut frames = H2Frames::new();
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, 6)); // SETTINGS
        bytes.extend(frame(0x1, 0, 10)); // HEADERS, no END_HEADERS
                                         // Split anywhere: frame headers are followed across reads.
        for chunk in bytes.chunks(5) {
            frames.feed(chunk, &activity);
        }
        assert!(
            activity.head_for().is_some(),
            "the open header block is timed"
        );
        frames.feed(&frame(0x9, 0x4, 3), &activity); // CONTINUATION, END_HEADERS
        assert!(activity.head_for().is_none());
        frames.feed(&frame(0x1, 0x4 | 0x1, 3), &activity); // a whole HEADERS frame
        assert!(activity.head_for().is_none());
    }
}
