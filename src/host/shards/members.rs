//! Who is alive: each replica holds a Lease of its own (`<prefix>-<replica>`, kept by the
//! same elector as the leader Lease, so a replica's writes are fenced by it exactly as the
//! leader's are), and every replica lists those Leases. A Lease counts as live while its
//! holder and renew time keep changing: the change is timed on the local clock, as
//! client-go's elector does, so replicas' clocks need not agree.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

/// One shard Lease as listed: its name, holder and renew time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub name: String,
    pub holder: Option<String>,
    pub renew_time: Option<String>,
}

/// What was seen of each Lease and when it last changed.
#[derive(Debug)]
pub struct Liveness {
    prefix: String,
    lease_duration: Duration,
    last: HashMap<String, (Seen, Instant)>,
}

impl Liveness {
    /// Tracks Leases named `<prefix>-<replica>`.
    pub fn new(prefix: &str, lease_duration: Duration) -> Self {
        Self {
            prefix: format!("{prefix}-"),
            lease_duration,
            last: HashMap::new(),
        }
    }

    /// The Lease name of `replica`.
    pub fn lease_name(prefix: &str, replica: &str) -> String {
        format!("{prefix}-{replica}")
    }

    /// Takes in a listing made at `now` and answers the live replicas, by name. A Lease seen
    /// for the first time counts as changed now; one that is gone, released (no holder) or
    /// unchanged for a lease duration is not live.
    pub fn observe(&mut self, now: Instant, listed: &[Seen]) -> BTreeSet<String> {
        let names: BTreeSet<&str> = listed.iter().map(|s| s.name.as_str()).collect();
        self.last.retain(|n, _| names.contains(n.as_str()));
        let mut live = BTreeSet::new();
        for seen in listed {
            let Some(replica) = seen.name.strip_prefix(&self.prefix) else {
                continue;
            };
            let changed_at = match self.last.get(&seen.name) {
                Some((before, at)) if before == seen => *at,
                _ => now,
            };
            self.last
                .insert(seen.name.clone(), (seen.clone(), changed_at));
            let held = seen.holder.as_deref().is_some_and(|h| !h.is_empty());
            if held && now.duration_since(changed_at) < self.lease_duration {
                live.insert(replica.to_string());
            }
        }
        live
    }
}

impl Liveness {
    /// The replicas whose Lease changed within a lease duration of `now` (renewed, or
    /// released on a graceful stop), as of the last listing: their records stand.
    pub fn recent(&self, now: Instant) -> BTreeSet<String> {
        self.last
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) < self.lease_duration)
            .filter_map(|(name, _)| name.strip_prefix(&self.prefix).map(str::to_string))
            .collect()
    }
}

/// Each shard Lease's holder as last watched, to tell the changes that move instances (a
/// replica joining, or releasing its Lease on a graceful stop) from renewals, which come
/// every retry period from every replica and change nothing but the renew time.
#[derive(Debug, Default)]
pub struct Holders {
    prefix: String,
    holders: HashMap<String, Option<String>>,
}

impl Holders {
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: format!("{prefix}-"),
            holders: HashMap::new(),
        }
    }

    /// Takes in one watched Lease (`holder` is `None` once it is deleted or released) and
    /// answers whether the replicas may have changed: a shard Lease's holder is new or
    /// different.
    pub fn changed(&mut self, name: &str, holder: Option<&str>) -> bool {
        if !name.starts_with(&self.prefix) {
            return false;
        }
        let holder = holder.filter(|h| !h.is_empty()).map(str::to_string);
        match self.holders.get(name) {
            Some(before) if *before == holder => false,
            _ => {
                self.holders.insert(name.to_string(), holder);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(replica: &str, holder: &str, renew: u32) -> Seen {
        Seen {
            name: Liveness::lease_name("kairship-shard", replica),
            holder: (!holder.is_empty()).then(|| holder.to_string()),
            renew_time: Some(format!("t{renew}")),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_live_while_it_is_renewed_and_not_once_it_stops_or_is_released() {
        let mut l = Liveness::new("kairship-shard", Duration::from_secs(15));
        let t0 = Instant::now();
        let live = l.observe(t0, &[lease("a", "a_1", 0), lease("b", "b_1", 0)]);
        assert_eq!(live, ["a", "b"].map(String::from).into());
        // a renews, b does not: b is live until a lease duration after it was last seen
        // changing, on this replica's clock.
        tokio::time::advance(Duration::from_secs(14)).await;
        let live = l.observe(
            Instant::now(),
            &[lease("a", "a_1", 14), lease("b", "b_1", 0)],
        );
        assert_eq!(live, ["a", "b"].map(String::from).into());
        tokio::time::advance(Duration::from_secs(2)).await;
        let live = l.observe(
            Instant::now(),
            &[lease("a", "a_1", 16), lease("b", "b_1", 0)],
        );
        assert_eq!(live, ["a"].map(String::from).into());
        // A released Lease (no holder) is gone at once; a new holder of b's Lease (b's pod
        // restarted) is live from when it is seen.
        let live = l.observe(Instant::now(), &[lease("a", "", 16), lease("b", "b_2", 16)]);
        assert_eq!(live, ["b"].map(String::from).into());
        // Leases of other names (the leader's) are not replicas.
        let other = Seen {
            name: "kairship-controller-manager".into(),
            holder: Some("x".into()),
            renew_time: None,
        };
        let live = l.observe(Instant::now(), &[other, lease("b", "b_2", 17)]);
        assert_eq!(live, ["b"].map(String::from).into());
        assert_eq!(t0.elapsed(), Duration::from_secs(16));
    }

    #[test]
    fn joins_and_releases_are_changes_and_renewals_are_not() {
        let mut h = Holders::new("kairship-shard");
        assert!(h.changed("kairship-shard-a", Some("a_1")), "a joins");
        assert!(!h.changed("kairship-shard-a", Some("a_1")), "a renews");
        assert!(h.changed("kairship-shard-a", Some("")), "a releases");
        assert!(!h.changed("kairship-shard-a", None), "a's release, deleted");
        assert!(
            h.changed("kairship-shard-a", Some("a_2")),
            "a's pod restarted"
        );
        assert!(
            !h.changed("kairship-controller-manager", Some("x")),
            "not a shard"
        );
    }
}
