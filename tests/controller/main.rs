//! The supervision tree and the controller-manager against the simulated fleet: instances
//! reach Running with correct stats, managed instances go through the Karmada object,
//! pause/delete clean up, panics are restarted with backoff and past the limit degrade
//! only their instance, a down instance does not stop the others, and leader election
//! lets exactly one replica write. `paused_clock` checks the restart policy's timing on
//! tokio's paused clock, with the host answered in memory.

mod cluster_profiles;
mod clusterpedia;
mod controllers;
use kairship_test_support::fleet as common;
use kairship_test_support::harness;
mod leader;
mod lifecycle;
mod partition;
mod paused_clock;
mod shards;
mod supervision;
