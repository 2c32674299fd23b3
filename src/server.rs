//! One Kairship process: the supervision tree (controller-manager role) and the API
//! (gRPC, and HTTPS with the proxy), started together and stopped together.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::actors::context::Settings;
use crate::actors::tree::{Election, Tree};
use crate::api;
use crate::api::router::Router;

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
    pub router: Router,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub probes_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
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
    let router = Router::with_auth(tree.handle(), config.auth);
    let (stop, rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.changed().await;
    };
    let grpc_router = router.clone();
    let grpc_stop = stopped(rx.clone());
    let grpc = tokio::spawn(async move {
        if let Err(e) = api::grpc::serve(grpc_listener, grpc_router, grpc_stop).await {
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
    let app = api::http::app(router.clone(), rest, config.chaos_reports.clone());
    let mut tasks = Vec::new();
    let probes_addr = probes.as_ref().map(|(_, a)| *a);
    if let Some((listener, _)) = probes {
        let app = api::http::probes(router.clone());
        tasks.push(tokio::spawn(api::http::serve_plain(
            listener,
            app,
            stopped(rx.clone()),
        )));
    }
    let https = tokio::spawn(api::http::serve_tls(
        http_listener,
        config.tls,
        app,
        stopped(rx),
    ));
    tasks.extend([grpc, https]);
    tracing::info!(grpc = %grpc_addr, https = %http_addr, "kairship API serving");
    Ok(Running {
        tree,
        router,
        grpc_addr,
        http_addr,
        probes_addr,
        stop,
        tasks,
    })
}

impl Running {
    /// Stops accepting requests, then stops the tree (releasing the lease).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), t).await;
        }
        self.tree.shutdown().await;
    }
}
