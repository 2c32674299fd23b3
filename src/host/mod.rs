//! Kairship's footing on the host cluster, below everything that runs per instance: the
//! clients it builds, the typed errors of its calls, what it may touch there (the scope),
//! Lease-based leadership and shards, and the watches of its own objects (Instances,
//! InstanceClasses, FleetRollouts) every part reads.

pub mod backoff;
pub mod client;
pub mod error;
pub mod instance_informer;
pub mod karmada;
pub mod kubeconfig;
pub mod leader;
pub mod member_index;
pub mod rollouts;
pub mod scope;
pub mod shards;
pub mod watched;
