//! Client conformance of the simulator: kubectl, the Python `kubernetes` client and the
//! `kube` crate, each driving a simulated fleet started by the test, plus faults and bad
//! input. One binary, one module per concern.

mod bad_input;
use kairship_test_support::fleet as common;
mod faults;
mod karmada;
mod kube_client;
mod kubectl;
mod python;
mod shared_listener;
