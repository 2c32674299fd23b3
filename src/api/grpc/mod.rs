//! The gRPC services (one file each), server reflection (v1 and v1alpha) and
//! `grpc.health.v1`, as routes `api::mount` puts behind the handler chain (health beside
//! it) on the gRPC port and on the HTTPS port.

mod access;
mod beside;
mod cluster;
mod cluster_join;
mod cluster_register;
mod cluster_remove;
mod failover;
mod instance;
mod instance_backups;
mod instance_components;
mod instance_hibernation;
mod instance_kubeconfig;
mod instance_renewal;
mod log_stream;
mod member_proxy;
mod policy;
mod rollout;
mod search;
mod search_peers;
mod supervisor;
mod trace;
mod workload;
mod workload_pods;
mod workload_promote;

use super::chain::Authorized;
use super::context::ApiContext;
use super::request::OnInstance;
use crate::error::ApiError;
use crate::proto;

/// The request path's start for a gRPC method on one instance (and REST, which calls
/// them): the authorization the chain gave the request, for the instance its message
/// names, routed there.
pub(crate) async fn on_instance<T>(
    ctx: &ApiContext,
    req: &tonic::Request<T>,
    instance: &str,
) -> Result<OnInstance, ApiError> {
    let authorized = Authorized::of(req)?;
    ctx.on_instance(&authorized, instance).await
}

#[derive(Debug, thiserror::Error)]
pub enum RoutesError {
    #[error("building reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}

/// The gRPC services as routes: `api` (every service of the API and server reflection,
/// mounted behind the handler chain) and `health` (`grpc.health.v1`, public, as probes
/// need), with the reporter that says NOT_SERVING once the server drains.
pub struct Routes {
    pub api: axum::Router,
    pub health: axum::Router,
    pub reporter: tonic_health::server::HealthReporter,
}

pub async fn routes(ctx: ApiContext) -> Result<Routes, RoutesError> {
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<proto::instance_service_server::InstanceServiceServer<instance::Instances>>()
        .await;
    reporter
        .set_serving::<proto::cluster_service_server::ClusterServiceServer<cluster::Clusters>>()
        .await;
    reporter
        .set_serving::<proto::workload_service_server::WorkloadServiceServer<workload::Workloads>>()
        .await;
    reporter
        .set_serving::<proto::policy_service_server::PolicyServiceServer<policy::Policies>>()
        .await;
    reporter.set_serving::<proto::supervisor_service_server::SupervisorServiceServer<supervisor::Supervisor>>().await;
    reporter
        .set_serving::<proto::access_service_server::AccessServiceServer<access::Access>>()
        .await;
    reporter
        .set_serving::<proto::search_service_server::SearchServiceServer<search::Search>>()
        .await;
    let mut builder = tonic::service::Routes::builder();
    builder
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
            search::Search(ctx.clone()),
        ))
        .add_service(proto::rollout_service_server::RolloutServiceServer::new(
            rollout::Rollouts(ctx),
        ));
    let api = builder.routes().into_axum_router();
    let health = tonic::service::Routes::new(health).into_axum_router();
    Ok(Routes {
        api,
        health,
        reporter,
    })
}
