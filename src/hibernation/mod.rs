//! Hibernation of managed instances (issue 56): when an instance should be asleep, from
//! its schedules (cron in a time zone, Gardener's shape), commands, requests and
//! idleness ([`decide`]), with the cron reading it rests on (`schedule::cron`). Scaling the
//! control plane down and up through karmada-operator, and waking on request, build on
//! these decisions: the leader's passes ([`runner`]) through the host calls in [`scale`].

pub mod decide;
pub mod runner;
pub mod scale;
