//! Fleet operations (issue 55): rolling a change across many instances in waves, within
//! their maintenance windows, halting at the first failure and rolling the failed instance
//! back. The pure parts: the waves a rollout runs in (`plan`), maintenance windows
//! (`schedule::window`), what a rollout would do to each instance (`findings`), what changes in
//! Karmada's CRDs between two releases (`crd_diff`) and which of each instance's objects
//! those changes touch (`affected`), the alerts that halt it (`alerts`), what it does next
//! given what Kairship sees (`decide`), and a `FleetRollout`'s passes and each instance's
//! own steps (`engine`). The leader's `runner` writes each pass; each instance's
//! `rollout-steps` controller (`controllers::rollout_steps`) carries out its steps.

pub mod affected;
pub mod alerts;
pub mod crd_diff;
pub mod decide;
pub mod engine;
pub mod findings;
pub mod plan;
pub mod runner;
