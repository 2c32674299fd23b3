//! The `MembersReady` condition: how many of the instance's member clusters are Ready, from
//! the statistics the actor keeps of its Cluster cache, so `kubectl describe instance`,
//! the console and a rollout's checks see a member going NotReady without reading
//! metrics. No call is made: it looks again when the counts change.

use std::hash::Hasher;

use super::{Action, Controller, Next, Observed, Report, Scope};

/// The condition's type.
pub const CONDITION: &str = "MembersReady";

#[derive(Default)]
pub struct MembersReady;

impl Controller for MembersReady {
    const NAME: &'static str = "members-ready";
    const LEADER_ONLY: bool = false;
    type Found = ();

    fn reconcile(&mut self, _: &Scope<'_>, observed: &Observed, report: &mut Report) -> Next<()> {
        match observed
            .stats
            .as_ref()
            .map(|s| (s.clusters_ready, s.clusters_total))
        {
            // Not counted yet (caches syncing): nothing said, the last word stands.
            None => {}
            Some((_, 0)) => report.say(CONDITION, None, "NoMembers", "no member cluster joined"),
            Some((ready, total)) if ready == total => report.say(
                CONDITION,
                Some(true),
                "AllReady",
                format!("{total} of {total} member clusters Ready"),
            ),
            Some((ready, total)) => report.say(
                CONDITION,
                Some(false),
                "MembersNotReady",
                format!("{ready} of {total} member clusters Ready"),
            ),
        }
        Next::Wait(Action::await_change())
    }

    fn record(&mut self, _: (), _: &mut Report) -> Action {
        Action::await_change()
    }

    fn watches(&self, _: &Scope<'_>, observed: &Observed, key: &mut dyn Hasher) {
        let counts = observed
            .stats
            .as_ref()
            .map(|s| (s.clusters_ready, s.clusters_total));
        let (ready, total) = counts.unwrap_or((-1, -1));
        key.write_i64(ready);
        key.write_i64(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{context, fresh, instance, mock, Look};
    use crate::crd::InstanceStats;

    #[tokio::test]
    async fn says_how_many_members_are_ready_once_counted() {
        let (host, calls) = mock(|_| None);
        let look = Look::new(instance("team-a"), context(host, Default::default()));
        let (mut observed, mut report) = fresh();
        let mut c = MembersReady;
        let said = |c: &mut MembersReady, o: &Observed, r: &mut Report| {
            c.reconcile(&look.scope(), o, r);
            r.said(CONDITION)
                .map(|s| (s.status, s.reason.clone(), s.message.clone()))
        };
        assert_eq!(
            said(&mut c, &observed, &mut report),
            None,
            "not counted yet"
        );
        let counts = |ready, total| InstanceStats {
            clusters_ready: ready,
            clusters_total: total,
            ..Default::default()
        };
        observed.stats = Some(counts(3, 3));
        assert_eq!(
            said(&mut c, &observed, &mut report),
            Some((
                Some(true),
                "AllReady".into(),
                "3 of 3 member clusters Ready".into()
            ))
        );
        observed.stats = Some(counts(2, 3));
        assert_eq!(
            said(&mut c, &observed, &mut report),
            Some((
                Some(false),
                "MembersNotReady".into(),
                "2 of 3 member clusters Ready".into()
            ))
        );
        observed.stats = Some(counts(0, 0));
        assert_eq!(
            said(&mut c, &observed, &mut report).map(|s| s.0),
            Some(None),
            "Unknown without members"
        );
        assert!(
            calls.all().iter().all(|c| !c.is_write()),
            "no call of its own"
        );
    }
}
