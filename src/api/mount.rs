//! Which routes pass the handler chain and which are public, on each port. Public routes
//! are named here one by one (`http::public`, gRPC health); every other request, gRPC or
//! HTTP, meets [`Chain::protect`]. gRPC is served on the gRPC port and, by its content
//! type, on the HTTPS port too.

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{from_fn, from_fn_with_state, Next};
use axum::response::Response;
use tower::ServiceExt;

use super::chain::{Chain, Surface};
use super::context::ApiContext;
use super::{grpc, http, rest};

/// The two ports' apps.
pub struct Mounted {
    pub https: axum::Router,
    pub grpc: axum::Router,
    /// gRPC health, told NOT_SERVING when the server drains.
    pub health: tonic_health::server::HealthReporter,
}

pub async fn mount(
    ctx: ApiContext,
    chain: Arc<Chain>,
    chaos_reports: Option<std::path::PathBuf>,
    https_port: u16,
) -> Result<Mounted, grpc::RoutesError> {
    let grpc::Routes {
        api,
        health: health_routes,
        reporter,
    } = grpc::routes(ctx.clone()).await?;
    let rest = rest::Rest::new(api.clone());
    // gRPC health by name (probes carry no token); everything else through the chain.
    let grpc_app = health_routes
        .fallback_service(chain.protect(api))
        .layer(from_fn_with_state(
            ctx.metrics.clone(),
            super::chain::observe::track,
        ));
    let protected = chain.protect(http::protected(ctx.clone(), rest, chaos_reports));
    let to_grpc = grpc_app.clone();
    let https = http::public(ctx.clone(), chain.sink.clone())
        .fallback_service(protected)
        .layer(from_fn_with_state(
            ctx.metrics.clone(),
            super::chain::observe::track,
        ))
        .layer(from_fn(move |req: Request, next: Next| {
            let to_grpc = to_grpc.clone();
            async move { by_content_type(to_grpc, req, next).await }
        }))
        .layer(from_fn_with_state(
            ctx.drain.clone(),
            crate::api::drain::close_keepalives,
        ))
        .layer(from_fn(|req: Request, next: Next| {
            super::kubeconfigs::mark(None, req, next)
        }));
    let grpc = grpc_app.layer(from_fn(move |req: Request, next: Next| {
        super::kubeconfigs::mark(Some(https_port), req, next)
    }));
    Ok(Mounted {
        https,
        grpc,
        health: reporter,
    })
}

/// gRPC on the HTTPS port: by its content type, to the gRPC app (which counts it).
async fn by_content_type(grpc: axum::Router, req: Request, next: Next) -> Response {
    match Surface::of(&req) {
        Surface::Grpc => match grpc.oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        },
        _ => next.run(req).await,
    }
}

/// Where and how the API is served.
pub struct ApiConfig {
    pub https: tokio::net::TcpListener,
    pub grpc: tokio::net::TcpListener,
    pub tls: Arc<rustls::ServerConfig>,
    /// TLS of the gRPC port; `None` serves it in plain text (the demo's loopback port,
    /// or `--grpc-insecure`). The HTTPS port serves gRPC with TLS either way.
    pub grpc_tls: Option<Arc<rustls::ServerConfig>>,
    pub audit: Arc<super::chain::audit::Sink>,
    pub limits: super::serve::ServerLimits,
    pub fairness: super::chain::fairness::Limits,
    pub chaos_reports: Option<std::path::PathBuf>,
    /// Each instance also at `<instance>.<domain>` on the HTTPS port (`--instance-domain`).
    pub instance_hosts: Option<Arc<super::instance_hosts::InstanceHosts>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Chain(#[from] super::chain::ChainError),
    #[error(transparent)]
    Routes(#[from] grpc::RoutesError),
}

/// Both API ports, serving until [`stop`](Self::stop) or the context's drain closes them.
pub struct Serving {
    https: tokio::task::JoinHandle<()>,
    grpc: tokio::task::JoinHandle<()>,
    stop: tokio::sync::watch::Sender<bool>,
    draining: tokio::task::JoinHandle<()>,
}

/// Serves the API of `ctx` as `config` says. HTTPS closes when the context's drain says
/// so (`api::drain`) or on [`Serving::stop`]; the gRPC port on `stop`.
pub async fn start(ctx: ApiContext, config: ApiConfig) -> Result<Serving, StartError> {
    // Kubeconfigs use the instance hosts this server serves, whatever the context had.
    let issuer = super::kubeconfigs::Issuer {
        hosts: config.instance_hosts.clone(),
        ..(*ctx.kubeconfigs).clone()
    };
    let ctx = ctx.with_kubeconfigs(issuer);
    let chain = Chain::new(ctx.clone(), config.audit, config.fairness)?;
    let https_port = config.https.local_addr().map(|a| a.port()).unwrap_or(443);
    let mounted = mount(ctx.clone(), chain, config.chaos_reports, https_port).await?;
    // gRPC health says NOT_SERVING from the moment the process starts shutting down, as
    // /readyz does.
    let draining = {
        let (drain, reporter) = (ctx.drain.clone(), mounted.health.clone());
        tokio::spawn(async move {
            drain.reached(crate::api::drain::Phase::Draining).await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
        })
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let grpc = tokio::spawn(super::serve::serve(
        config.grpc,
        config.grpc_tls,
        mounted.grpc,
        config.limits,
        None,
        until_stopped(stopped.clone()),
    ));
    let closing = {
        let (drain, stopped) = (ctx.drain.clone(), until_stopped(stopped));
        async move {
            tokio::select! {
                _ = drain.closing() => {}
                _ = stopped => {}
            }
        }
    };
    let https = tokio::spawn(super::serve::serve(
        config.https,
        Some(config.tls),
        mounted.https,
        config.limits,
        config.instance_hosts,
        closing,
    ));
    Ok(Serving {
        https,
        grpc,
        stop,
        draining,
    })
}

impl Serving {
    /// Waits for HTTPS to finish closing (the drain closes it), then stops the gRPC port.
    pub async fn stop(self) {
        let bound = super::serve::DRAIN_TIMEOUT + std::time::Duration::from_secs(2);
        let _ = self.stop.send(true);
        for (what, task) in [("HTTPS", self.https), ("gRPC", self.grpc)] {
            let abort = task.abort_handle();
            if tokio::time::timeout(bound, task).await.is_err() {
                tracing::warn!(server = what, "did not stop in time; stopped");
                abort.abort();
            }
        }
        self.draining.abort();
    }

    /// Stops accepting and drops every connection at once, as a crash would (tests).
    pub fn abort(self) {
        for task in [self.https, self.grpc, self.draining] {
            task.abort();
        }
    }
}
