//! The apiserver: gRPC services (tonic) with reflection and health, REST, the kubectl
//! proxy and the console, every protected request through one handler chain (`chain`),
//! served by one server (`serve`) with its routes mounted in `mount`, each request decoded
//! once at its edge (`request_info`). Requests are routed
//! by instance name to that instance's actor; reads come from its caches, writes go to its
//! karmada-apiserver.

pub mod answer;
pub mod body;
pub mod chain;
pub mod console;
pub mod context;
pub mod convert;
pub mod drain;
pub mod forward;
pub mod grpc;
pub mod http;
pub mod instance_hosts;
pub mod kubeconfigs;
pub mod member;
pub mod mount;
pub mod objects;
pub mod openapi;
pub mod override_diff;
pub mod paging;
pub mod proxy;
pub mod request;
pub mod request_info;
pub mod rest;
pub mod serve;
pub mod transcode;
pub mod webhooks;

/// The prefix of Kairship's own API paths (REST, the proxy, the webhook).
pub const API_PREFIX: &str = "/apis/kairship.io/v1alpha1";
