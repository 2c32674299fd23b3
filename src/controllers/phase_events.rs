//! The `phase-events` controller: a Kubernetes Event on the Instance each time its phase
//! changes (Running, Degraded, Unreachable, ...), with why, so `kubectl describe instance`
//! and `kubectl get events` tell an SRE what happened and when, as any operator's objects
//! do. Events of a cluster-scoped object live in `default`, as kube-apiserver's own do.
//! Leader only; the first phase the leader finds past Pending when it starts leading (or
//! the actor starts) is its starting point, not an event, so neither a leadership change
//! nor a restart repeats every instance's phase.

use k8s_openapi::api::core::v1::Event;

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::context::events::{create, event_on, About};
use crate::crd::Phase;

#[derive(Default)]
pub struct PhaseEvents {
    /// The phase last reported (or found when this replica began leading).
    reported: Option<Phase>,
}

impl Controller for PhaseEvents {
    const NAME: &'static str = "phase-events";
    type Found = Phase;

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &Observed, _: &mut Report) -> Next<Phase> {
        // The phase is watched: a change calls this at once.
        let phase = observed.lifecycle.phase();
        let Some(before) = self.reported else {
            // Connecting after a start is no news; the first phase after it is the baseline.
            self.reported = (phase != Phase::Pending).then_some(phase);
            return Next::Wait(Action::await_change());
        };
        if before == phase {
            return Next::Wait(Action::await_change());
        }
        let why = observed.lifecycle.why().map(str::to_string);
        let event = event(scope, before, phase, why);
        let (ctx, name) = (scope.ctx.clone(), scope.name.to_string());
        Next::Start(Box::pin(async move {
            create(&ctx, event, &format!("the phase event of instance {name}")).await?;
            Ok(phase)
        }))
    }

    fn record(&mut self, phase: Phase, _: &mut Report) -> Action {
        self.reported = Some(phase);
        Action::await_change()
    }
}

/// The Event for a change from `before` to `phase`.
fn event(scope: &Scope<'_>, before: Phase, phase: Phase, why: Option<String>) -> Event {
    let warning = matches!(phase, Phase::Degraded | Phase::Unreachable);
    let message = match why {
        Some(why) => format!("{before:?} to {phase:?}: {why}"),
        None => format!("{before:?} to {phase:?}"),
    };
    let about = About {
        kind: "Instance",
        name: scope.name,
        uid: scope.instance.metadata.uid.as_deref(),
    };
    event_on(
        &about,
        &format!("{phase:?}"),
        &message,
        warning,
        scope.ctx.leadership.identity(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::testing::{context, fresh, idle, instance, mock, run, Look};
    use crate::status::lifecycle::Lifecycle;

    #[tokio::test]
    async fn an_event_for_each_change_of_phase_after_the_first_one_seen() {
        let (host, calls) = mock(|_| None);
        let look = Look::new(instance("team-a"), context(host, Default::default()));
        let (mut observed, mut report) = fresh();
        let mut c = PhaseEvents::default();
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "Pending is no news"
        );
        observed.lifecycle = Lifecycle::Serving;
        assert!(
            matches!(
                c.reconcile(&look.scope(), &observed, &mut report),
                Next::Wait(a) if a == Action::await_change()
            ),
            "the first phase is the baseline"
        );
        assert!(calls.writes().is_empty());

        observed.lifecycle = Lifecycle::Unreachable {
            synced: true,
            why: "connection refused".into(),
        };
        let phase = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("recorded");
        assert_eq!(c.record(phase, &mut report), Action::await_change());
        let writes = calls.writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0].path, "/api/v1/namespaces/default/events?");
        let e = &writes[0].body;
        assert_eq!(e["involvedObject"]["kind"], "Instance");
        assert_eq!(e["involvedObject"]["name"], "team-a");
        assert_eq!(e["involvedObject"]["uid"], "uid-team-a");
        assert_eq!(e["reason"], "Unreachable");
        assert_eq!(e["type"], "Warning");
        assert_eq!(e["message"], "Running to Unreachable: connection refused");
        assert_eq!(e["reportingInstance"], "test-replica");
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "the same phase again is no news"
        );
    }

    #[tokio::test]
    async fn a_follower_records_nothing() {
        let (host, calls) = mock(|_| None);
        let mut ctx = context(host, Default::default());
        ctx.leadership = crate::host::leader::Leadership::never("follower");
        let c = create(&ctx, Event::default(), "an event").await;
        assert!(
            matches!(c, Err(crate::host::error::HostError::Fenced { .. })),
            "{c:?}"
        );
        assert!(calls.writes().is_empty(), "a fenced write never leaves");
    }
}
