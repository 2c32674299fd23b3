//! One Kairship process: the supervision tree (controller-manager role) and the API
//! (gRPC, and HTTPS with the proxy), started together and stopped together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::actors::context::Settings;
use crate::actors::tree::{Election, Tree};
use crate::api;
use crate::api::context::ApiContext;
use crate::api::drain::{Drain, DrainControl};

pub struct ServerConfig {
    pub host: kube::Client,
    pub identity: String,
    pub election: Election,
    pub settings: Settings,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    /// Plain-HTTP `/metrics`, `/healthz` and `/readyz` for probes and scrapers.
    pub probes_addr: Option<SocketAddr>,
    pub tls: Arc<rustls::ServerConfig>,
    /// Loaded before anything starts, so a bad auth source stops the process early.
    pub auth: Arc<crate::auth::Auth>,
    /// Where `kairship chaos run` writes its report, shown by the console.
    pub chaos_reports: Option<std::path::PathBuf>,
    /// On shutdown, how long `/readyz` fails while everything is still served, so
    /// endpoints drop this replica before its listeners close (kube-apiserver's
    /// `--shutdown-delay-duration`).
    pub shutdown_delay: std::time::Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("binding {what} on {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tree(#[from] crate::actors::tree::TreeError),
    #[error("setting up REST: {0}")]
    Rest(String),
}

pub struct Running {
    pub tree: Tree,
    pub ctx: ApiContext,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub probes_addr: Option<SocketAddr>,
    drain: DrainControl,
    shutdown_delay: Duration,
    https: JoinHandle<()>,
    grpc: (watch::Sender<bool>, JoinHandle<()>),
    probes: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

/// Resolves when `tx` says stop (or is gone).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Waits for a server task to finish within `bound`, then stops it.
async fn finish(what: &str, task: JoinHandle<()>, bound: Duration) {
    let abort = task.abort_handle();
    if tokio::time::timeout(bound, task).await.is_err() {
        tracing::warn!(server = what, "did not stop in time; stopped");
        abort.abort();
    }
}

async fn bind(
    what: &'static str,
    addr: SocketAddr,
) -> Result<(TcpListener, SocketAddr), ServerError> {
    let l = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { what, addr, source })?;
    let local = l
        .local_addr()
        .map_err(|source| ServerError::Bind { what, addr, source })?;
    Ok((l, local))
}

pub async fn start(config: ServerConfig) -> Result<Running, ServerError> {
    // Bind first: a taken port is reported before anything else starts.
    let (grpc_listener, grpc_addr) = bind("the gRPC address", config.grpc_addr).await?;
    let (http_listener, http_addr) = bind("the HTTPS address", config.http_addr).await?;
    let probes = match config.probes_addr {
        Some(addr) => Some(bind("the probes address", addr).await?),
        None => None,
    };
    let tree = Tree::start_with(
        config.host,
        config.election,
        &config.identity,
        config.settings,
    )
    .await?;
    let (drain, draining) = Drain::new();
    let ctx = ApiContext::with_auth(tree.handle(), config.auth).with_drain(draining.clone());
    let (grpc_stop, rx) = watch::channel(false);
    let grpc_ctx = ctx.clone();
    let grpc = tokio::spawn(async move {
        if let Err(e) = api::grpc::serve(grpc_listener, grpc_ctx, stopped(rx)).await {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    });
    // REST calls this process's own gRPC server, so both share one implementation.
    let mut local = grpc_addr;
    if local.ip().is_unspecified() {
        local.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let channel = tonic::transport::Channel::from_shared(format!("http://{local}"))
        .map_err(|e| ServerError::Rest(e.to_string()))?
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect_lazy();
    let rest = api::rest::Rest::new(channel).map_err(|e| ServerError::Rest(e.to_string()))?;
    let app = api::http::app(ctx.clone(), rest, config.chaos_reports.clone());
    let probes_addr = probes.as_ref().map(|(_, a)| *a);
    // The probes answer to the end, so the kubelet sees "not ready" while this drains.
    let probes = probes.map(|(listener, _)| {
        let (stop, rx) = watch::channel(false);
        let app = api::http::probes(ctx.clone());
        (
            stop,
            tokio::spawn(api::http::serve_plain(listener, app, stopped(rx))),
        )
    });
    let https = tokio::spawn(api::http::serve_tls(
        http_listener,
        config.tls,
        app,
        async move { draining.closing().await },
    ));
    tracing::info!(grpc = %grpc_addr, https = %http_addr, "kairship API serving");
    Ok(Running {
        tree,
        ctx,
        grpc_addr,
        http_addr,
        probes_addr,
        drain,
        shutdown_delay: config.shutdown_delay,
        https,
        grpc: (grpc_stop, grpc),
        probes,
    })
}

impl Running {
    /// The graceful shutdown (`api::drain`): not ready, still serving for the shutdown
    /// delay; then HTTPS closes and drains (watches end cleanly), then gRPC, whose
    /// listener REST's in-flight calls still used; then the tree stops (releasing the
    /// lease) and last the probes.
    pub async fn shutdown(self) {
        let bound = api::http::tls::DRAIN_TIMEOUT + Duration::from_secs(2);
        self.drain.run(self.shutdown_delay).await;
        finish("HTTPS", self.https, bound).await;
        let (stop, grpc) = self.grpc;
        let _ = stop.send(true);
        finish("gRPC", grpc, bound).await;
        self.tree.shutdown().await;
        if let Some((stop, probes)) = self.probes {
            let _ = stop.send(true);
            finish("probes", probes, Duration::from_secs(5)).await;
        }
        tracing::info!("kairship API stopped");
    }
}
