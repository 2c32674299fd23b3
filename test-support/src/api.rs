//! One replica's API (gRPC in plain text, HTTPS) served on loopback ports over a tree,
//! for the API tests and the benchmarks that measure callers' latency.

use std::path::PathBuf;
use std::time::Duration;

use kairship::api::context::ApiContext;
use tonic::transport::Channel;

/// One replica's API on real sockets: gRPC in plain text, HTTPS with `cert`.
pub struct Served {
    pub serving: kairship::api::mount::Serving,
    pub grpc_addr: std::net::SocketAddr,
    pub https: String,
    pub channel: Channel,
}

/// Serves `ctx` (once ready) on two loopback ports (HTTPS on `https_listener` when given),
/// auditing to `audit`.
pub async fn serve(
    ctx: ApiContext,
    cert: &kairship_wire::tls::ServingCert,
    audit: &std::path::Path,
    chaos_dir: Option<PathBuf>,
    https_listener: Option<tokio::net::TcpListener>,
) -> Served {
    ctx.ready().await;
    let ctx = ctx.with_kubeconfigs(kairship::api::kubeconfigs::Issuer {
        ca_pem: Some(cert.ca_pem.clone()),
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let https_listener = match https_listener {
        Some(l) => l,
        None => tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind"),
    };
    let https = format!("https://{}", https_listener.local_addr().expect("addr"));
    let serving = kairship::api::mount::start(
        ctx,
        kairship::api::mount::ApiConfig {
            https: https_listener,
            grpc: listener,
            tls: cert.server_config.clone(),
            grpc_tls: None,
            audit: std::sync::Arc::new(
                kairship::api::chain::audit::Sink::open(audit).expect("audit log"),
            ),
            limits: Default::default(),
            fairness: Default::default(),
            chaos_reports: chaos_dir,
            instance_hosts: Some(std::sync::Arc::new(
                kairship::api::instance_hosts::InstanceHosts::new(
                    kairship::api::instance_hosts::DEMO_DOMAIN,
                )
                .expect("the demo's domain"),
            )),
        },
    )
    .await
    .expect("the API starts");
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(15))
        .connect()
        .await
        .expect("connect");
    Served {
        serving,
        grpc_addr: addr,
        https,
        channel,
    }
}
