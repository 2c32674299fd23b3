//! The Kubernetes wire format, shared by Kairship and its simulator so neither has to
//! depend on the other: what a request path addresses ([`routes`]), label and field
//! selectors ([`selectors`]), `meta/v1 Status` errors ([`status`]), server-side Tables
//! ([`table`]), resources as CRDs define them ([`resource`]), kubeconfig files
//! ([`kubeconfig`]), rustls serving configuration ([`tls`]), watch event lines ([`watch`])
//! the fault API's client ([`fault_client`]), structured label selectors
//! ([`label_selector`]), which policy claims a template by Karmada's rules
//! ([`policy_claim`]) and what Kairship's roles mean inside an instance ([`roles`]).

pub mod fault_client;
pub mod kubeconfig;
pub mod label_selector;
pub mod policy_claim;
pub mod resource;
pub mod roles;
pub mod routes;
pub mod selectors;
pub mod status;
pub mod table;
pub mod tls;
pub mod watch;
