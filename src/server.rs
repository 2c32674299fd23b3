//! One Kairship process: the supervision tree (controller-manager role) and the API
//! (gRPC, and HTTPS with the proxy), started together and stopped together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::actors::tree::{Election, Tree};
use crate::api;
use crate::api::context::ApiContext;
use crate::api::drain::{Drain, DrainControl};
use crate::context::Settings;

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
    /// TLS of the gRPC port; `None` serves it in plain text (the demo's loopback port,
    /// or `--grpc-insecure`). gRPC is also served, always with TLS, on the HTTPS port.
    pub grpc_tls: Option<Arc<rustls::ServerConfig>>,
    /// Where audit events go.
    pub audit: Arc<crate::api::chain::audit::Sink>,
    /// The server's limits and the per-caller bounds of the chain.
    pub limits: api::serve::ServerLimits,
    pub fairness: api::chain::fairness::Limits,
    /// Loaded before anything starts, so a bad auth source stops the process early.
    pub auth: Arc<crate::auth::Auth>,
    /// Where `kairship chaos run` writes its report, shown by the console.
    pub chaos_reports: Option<std::path::PathBuf>,
    /// Each instance also at `<instance>.<domain>` (`--instance-domain`).
    pub instance_hosts: Option<Arc<crate::api::instance_hosts::InstanceHosts>>,
    /// What handed-out kubeconfigs name (`--external-url`, `--kubeconfig-ca-file`); the
    /// instance hosts they use are `instance_hosts`.
    pub kubeconfigs: crate::api::kubeconfigs::Issuer,
    /// On shutdown, how long `/readyz` fails while everything is still served, so
    /// endpoints drop this replica before its listeners close (kube-apiserver's
    /// `--shutdown-delay-duration`).
    pub shutdown_delay: std::time::Duration,
    /// How requests for instances other replicas own reach them (sharded fleets).
    pub forward: Option<crate::api::forward::ForwardConfig>,
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
    #[error("setting up the API: {0}")]
    Api(String),
}

pub struct Running {
    pub tree: Tree,
    pub ctx: ApiContext,
    pub grpc_addr: SocketAddr,
    pub http_addr: SocketAddr,
    pub probes_addr: Option<SocketAddr>,
    drain: DrainControl,
    shutdown_delay: Duration,
    api: api::mount::Serving,
    probes: Option<(watch::Sender<bool>, JoinHandle<()>)>,
    /// The sharded replica's check that peers can verify it (ends with this).
    self_check: Option<AbortOnDrop>,
}

/// A background task that ends when its owner is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How often a sharded replica checks that its peers can verify it.
const SELF_CHECK_EVERY: Duration = Duration::from_secs(30);

/// How long a stopping sharded replica serves on while its instances move to the others
/// (measured: a third of a second); past it they move when its Lease would have expired.
const HAND_OVER_BOUND: Duration = Duration::from_secs(15);

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
    let own_address = config
        .settings
        .shards
        .as_ref()
        .and_then(|s| s.address.clone());
    let tree = Tree::start_with(
        config.host,
        config.election,
        &config.identity,
        config.settings,
    )
    .await?;
    let (drain, draining) = Drain::new();
    let mut ctx = ApiContext::with_auth(tree.handle(), config.auth)
        .with_drain(draining)
        .with_kubeconfigs(config.kubeconfigs);
    if let Some(f) = config.forward {
        ctx = ctx.with_forwarder(
            crate::api::forward::Forwarder::new(f).map_err(|e| ServerError::Api(e.to_string()))?,
        );
    }
    let serving = api::mount::start(
        ctx.clone(),
        api::mount::ApiConfig {
            https: http_listener,
            grpc: grpc_listener,
            tls: config.tls,
            grpc_tls: config.grpc_tls,
            audit: config.audit,
            limits: config.limits,
            fairness: config.fairness,
            chaos_reports: config.chaos_reports,
            instance_hosts: config.instance_hosts,
        },
    )
    .await
    .map_err(|e| ServerError::Api(e.to_string()))?;
    // Sharded: whether peers can verify this replica, checked now and every 30 s.
    let self_check = ctx.forwarder.clone().zip(own_address).map(|(f, address)| {
        AbortOnDrop(tokio::spawn(async move {
            loop {
                f.check_self(&address).await;
                tokio::time::sleep(SELF_CHECK_EVERY).await;
            }
        }))
    });
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
    tracing::info!(grpc = %grpc_addr, https = %http_addr, "kairship API serving");
    Ok(Running {
        tree,
        ctx,
        grpc_addr,
        http_addr,
        probes_addr,
        drain,
        shutdown_delay: config.shutdown_delay,
        api: serving,
        probes,
        self_check,
    })
}

impl Running {
    /// The graceful shutdown (`api::drain`): not ready, still serving for the shutdown
    /// delay (and, sharded, until this replica's instances are handed over); then HTTPS
    /// closes and drains (watches end cleanly), then the gRPC port; then the tree stops
    /// (releasing the lease) and last the probes.
    pub async fn shutdown(mut self) {
        drop(self.self_check.take());
        self.drain
            .run(self.shutdown_delay, self.tree.hand_over(HAND_OVER_BOUND))
            .await;
        self.api.stop().await;
        self.tree.shutdown().await;
        if let Some((stop, probes)) = self.probes {
            let _ = stop.send(true);
            finish("probes", probes, Duration::from_secs(5)).await;
        }
        tracing::info!("kairship API stopped");
    }
}
