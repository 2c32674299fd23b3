//! Fleet operations (issue 55): rolling a change across many instances in waves, within
//! their maintenance windows, halting at the first failure. So far the pure parts: the
//! waves a rollout runs in (`plan`), maintenance windows (`window`), and what a rollout
//! does next given what Kairship sees of each instance (`decide`). The resources and the
//! executor that backs up, changes and rolls back instances build on these.

pub mod decide;
pub mod plan;
pub mod window;
