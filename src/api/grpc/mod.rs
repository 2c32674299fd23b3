//! The tonic server: every service, server reflection (v1 and v1alpha) and
//! `grpc.health.v1`, on one address.

mod access;
mod cluster;
mod instance;
mod policy;
mod search;
mod supervisor;
mod workload;

use std::future::Future;
use std::time::Duration;

use super::context::ApiContext;
use super::request::{OnInstance, Surface};
use crate::auth::Role;
use crate::error::ApiError;
use crate::proto;

/// The request path's start for a gRPC method (and REST, which calls them): the caller
/// from the `authorization` metadata, authorized for `need` on `instance`, routed there.
pub(crate) async fn on_instance<T>(
    ctx: &ApiContext,
    req: &tonic::Request<T>,
    need: Role,
    instance: &str,
    action: &str,
) -> Result<OnInstance, ApiError> {
    let caller = ctx.caller(req.metadata())?;
    let surface = Surface::of_grpc(req.metadata(), req.remote_addr());
    ctx.on_instance(caller, surface, need, instance, action)
        .await
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("building reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves gRPC on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    ctx: ApiContext,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let (health_reporter, health) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<proto::instance_service_server::InstanceServiceServer<instance::Instances>>()
        .await;
    health_reporter
        .set_serving::<proto::cluster_service_server::ClusterServiceServer<cluster::Clusters>>()
        .await;
    health_reporter
        .set_serving::<proto::workload_service_server::WorkloadServiceServer<workload::Workloads>>()
        .await;
    health_reporter
        .set_serving::<proto::policy_service_server::PolicyServiceServer<policy::Policies>>()
        .await;
    health_reporter.set_serving::<proto::supervisor_service_server::SupervisorServiceServer<supervisor::Supervisor>>().await;
    health_reporter
        .set_serving::<proto::access_service_server::AccessServiceServer<access::Access>>()
        .await;
    health_reporter
        .set_serving::<proto::search_service_server::SearchServiceServer<search::Search>>()
        .await;
    // Not serving from the moment the process starts shutting down, as /readyz.
    let draining = {
        let (drain, reporter) = (ctx.drain.clone(), health_reporter.clone());
        tokio::spawn(async move {
            drain.reached(crate::api::drain::Phase::Draining).await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
        })
    };
    // Without TCP_NODELAY a small unary answer written in pieces waits on the client's
    // delayed ACK (~40 ms per call); tonic sets it only on listeners it binds itself.
    let incoming = tonic::transport::server::TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(Duration::from_secs(60)));
    let served = tonic::transport::Server::builder()
        .timeout(Duration::from_secs(60))
        .layer(crate::metrics::GrpcLayer(ctx.metrics.clone()))
        .add_service(health)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(proto::instance_service_server::InstanceServiceServer::new(
            instance::Instances(ctx.clone()),
        ))
        .add_service(proto::cluster_service_server::ClusterServiceServer::new(
            cluster::Clusters(ctx.clone()),
        ))
        .add_service(proto::workload_service_server::WorkloadServiceServer::new(
            workload::Workloads(ctx.clone()),
        ))
        .add_service(proto::policy_service_server::PolicyServiceServer::new(
            policy::Policies(ctx.clone()),
        ))
        .add_service(
            proto::supervisor_service_server::SupervisorServiceServer::new(supervisor::Supervisor(
                ctx.clone(),
            )),
        )
        .add_service(proto::access_service_server::AccessServiceServer::new(
            access::Access(ctx.clone()),
        ))
        .add_service(proto::search_service_server::SearchServiceServer::new(
            search::Search(ctx),
        ))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    draining.abort();
    served?;
    Ok(())
}
