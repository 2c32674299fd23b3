//! The apiserver: gRPC services (tonic) with reflection and health. Requests are routed
//! by instance name to that instance's actor; reads come from its caches, writes go to its
//! karmada-apiserver.

pub mod body;
pub mod context;
pub mod convert;
pub mod drain;
pub mod grpc;
pub mod http;
pub mod objects;
pub mod openapi;
pub mod override_diff;
pub mod paging;
pub mod request;
pub mod rest;
