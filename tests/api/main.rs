//! The gRPC API over a real socket with the generated tonic clients, against the
//! supervision tree and the simulated fleet.

mod alerts;
mod auth;
mod backups;
mod budget;
mod cache_watch;
mod classes;
mod docs;
use kairship_test_support::fleet as common;
mod grpc;
mod guardrails;
mod ha_settings;
use kairship_test_support::harness;
mod hibernation;
mod impersonation;
mod instance_hosts;
mod metrics;
mod placement;
mod policies;
mod proxy;
mod rbac;
mod renewal;
mod request_path;
mod rest;
mod roles;
mod rollout_crds;
mod rollout_fleet;
mod rollouts;
mod routing;
mod search;
mod server;
mod shards;
mod tables;
mod trace;
mod upgrade;
mod usage;
mod webhook_replicas;
