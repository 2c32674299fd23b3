//! Moving an instance between replicas, release then acquire: the owner is recorded on the
//! Instance (an annotation naming the replica), a replica takes an instance only when the
//! ring gives it that instance and no other live replica has it recorded, and it takes it
//! with a write conditional on the resourceVersion it read, so of two replicas that both
//! think so, one wins. A replica the ring no longer gives an instance stops its actor first
//! and then clears the record; a dead owner's record is overridden once its Lease lapses.

use std::collections::BTreeSet;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::crd::Instance;

/// The annotation naming the replica that owns an Instance.
pub const OWNER_ANNOTATION: &str = "kairship.io/owner";

/// The replica recorded as the owner of `i`, if any.
pub fn recorded(i: &Instance) -> Option<&str> {
    i.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OWNER_ANNOTATION))
        .map(String::as_str)
        .filter(|o| !o.is_empty())
}

/// What this replica does about one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It is ours and recorded so: run its actor.
    Run,
    /// It is ours by the ring, recorded for no live replica: record us (conditionally).
    Acquire,
    /// It is ours by the ring, but a live replica still has it: wait for its release.
    Wait,
    /// It is recorded ours, the ring says otherwise: stop the actor, then clear the record.
    Release,
    /// Neither ours nor recorded ours: no actor here.
    Away,
}

/// The step for an instance whose ring owner is `ring_owner`, recorded for `recorded`, as
/// seen by replica `me` with `live` replicas alive (`me` among them only while its own
/// Lease is held: a replica that lost its Lease owns nothing). `holding`: replicas whose
/// Lease changed within a lease duration, live or not: one that released its Lease (a
/// graceful stop) may still be stopping an instance's actor, so its record stands until
/// it clears it itself, or until its Lease would have lapsed.
pub fn step(
    me: &str,
    ring_owner: Option<&str>,
    recorded: Option<&str>,
    live: &BTreeSet<String>,
    holding: &BTreeSet<String>,
) -> Step {
    let mine_by_ring = ring_owner == Some(me) && live.contains(me);
    match (mine_by_ring, recorded) {
        (true, Some(r)) if r == me => Step::Run,
        (true, Some(r)) if live.contains(r) || holding.contains(r) => Step::Wait,
        (true, _) => Step::Acquire,
        (false, Some(r)) if r == me => Step::Release,
        (false, _) => Step::Away,
    }
}

/// Records `to` (or nobody) as the owner of `i`, only if its record is still the one `i`
/// shows: the write is conditional on the resourceVersion, and a 409 caused by anything
/// else (status writes change it all the time) is retried on a fresh read, a few times;
/// a record another replica changed meanwhile is an error, and the next look decides again.
pub async fn record(
    api: &Api<Instance>,
    i: &Instance,
    to: Option<&str>,
) -> Result<(), kube::Error> {
    const ATTEMPTS: usize = 5;
    let name = i.metadata.name.as_deref().unwrap_or_default();
    let seen = recorded(i).map(str::to_string);
    let mut version = i.metadata.resource_version.clone();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let patch = json!({
            "metadata": {
                "resourceVersion": version,
                "annotations": { OWNER_ANNOTATION: to },
            }
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < ATTEMPTS => {
                let fresh = api.get(name).await?;
                if recorded(&fresh) != seen.as_deref() {
                    return Err(kube::Error::Api(e));
                }
                version = fresh.metadata.resource_version;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// `step` where every live replica is also holding, and no other.
    fn step(me: &str, ring: Option<&str>, rec: Option<&str>, l: &BTreeSet<String>) -> Step {
        super::step(me, ring, rec, l, l)
    }

    #[test]
    fn a_released_lease_holds_its_records_until_they_are_cleared() {
        // a released its Lease (a graceful stop) and is no longer live, but may still be
        // stopping the actor: b waits for a to clear its record.
        let (only_b, released) = (live(&["b"]), live(&["a", "b"]));
        assert_eq!(
            super::step("b", Some("b"), Some("a"), &only_b, &released),
            Step::Wait
        );
        assert_eq!(
            super::step("b", Some("b"), None, &only_b, &released),
            Step::Acquire
        );
        // a's Lease lapsed too (it died mid-way): b takes it over.
        assert_eq!(
            super::step("b", Some("b"), Some("a"), &only_b, &only_b),
            Step::Acquire
        );
        // a itself gives it up.
        assert_eq!(
            super::step("a", Some("b"), Some("a"), &only_b, &released),
            Step::Release
        );
    }

    #[test]
    fn an_instance_moves_only_once_its_old_owner_released_it_or_died() {
        let both = live(&["a", "b"]);
        // Unowned: the ring's owner takes it, the other stays away.
        assert_eq!(step("a", Some("a"), None, &both), Step::Acquire);
        assert_eq!(step("b", Some("a"), None, &both), Step::Away);
        assert_eq!(step("a", Some("a"), Some("a"), &both), Step::Run);
        // The ring moves it to b (a joined view): b waits while a holds it, a releases.
        assert_eq!(step("b", Some("b"), Some("a"), &both), Step::Wait);
        assert_eq!(step("a", Some("b"), Some("a"), &both), Step::Release);
        assert_eq!(step("b", Some("b"), None, &both), Step::Acquire);
        // a died: once its Lease lapses, b overrides its record.
        assert_eq!(
            step("b", Some("b"), Some("a"), &live(&["b"])),
            Step::Acquire
        );
        // A replica without its own Lease owns nothing, even what is recorded its own.
        assert_eq!(
            step("a", Some("a"), Some("a"), &live(&["b"])),
            Step::Release
        );
        assert_eq!(step("a", Some("a"), None, &live(&["b"])), Step::Away);
    }
}
