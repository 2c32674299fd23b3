//! A Kubernetes-API simulator of a Karmada fleet, in the spirit of kwok.
//!
//! It serves a host API (the global services cluster) and one Karmada API per instance,
//! each on its own loopback port with its own certificate, token, store and
//! resourceVersion sequence. It simulates member clusters, plays karmada-operator for
//! `Karmada` objects, and injects faults per instance. It is a test and demo double:
//! Kairship must work unchanged against a real Kubernetes and Karmada.
//!
//! Layout: [`store`] keeps objects and history; [`server`] speaks HTTP; [`resources`]
//! says what is served; [`fleet`] puts servers together with [`clusters`],
//! [`operator`] and the plain-HTTP [`admin`] API for faults. The wire format it shares
//! with Kairship (paths, selectors, `Status`, Tables, CRDs, TLS) is the `kairship-wire`
//! crate.

pub mod admin;
pub mod clusters;
pub mod components;
pub mod faults;
pub mod fleet;
pub mod karmada;
mod launch;
pub mod openapi;
pub mod operator;
mod operator_certs;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod server;
pub mod store;

pub use fleet::{Fleet, FleetConfig};

/// Failures starting or running the simulator (as opposed to API errors it answers).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] kairship_wire::status::ApiError),
    #[error(transparent)]
    Tls(#[from] kairship_wire::tls::TlsError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}
