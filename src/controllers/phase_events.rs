//! The `phase-events` controller: a Kubernetes Event on the Instance each time its phase
//! changes (Running, Degraded, Unreachable, ...), with why, so `kubectl describe instance`
//! and `kubectl get events` tell an SRE what happened and when, as any operator's objects
//! do. Events of a cluster-scoped object live in `default`, as kube-apiserver's own do.
//! Leader only; the first phase the leader finds past Pending when it starts leading (or
//! the actor starts) is its starting point, not an event, so neither a leadership change
//! nor a restart repeats every instance's phase.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{Controller, Scope, Work};
use crate::actors::context::Context;
use crate::actors::host_error::fenced;
use crate::actors::instance::status::Observed;
use crate::crd::Phase;

/// Where the events of cluster-scoped objects go.
pub const NAMESPACE: &str = "default";
/// Who the events say reported them.
pub const COMPONENT: &str = "kairship";

#[derive(Default)]
pub struct PhaseEvents {
    /// The phase last reported (or found when this replica began leading).
    reported: Option<Phase>,
}

impl Controller for PhaseEvents {
    const NAME: &'static str = "phase-events";
    type Found = Phase;

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<Work<Phase>> {
        let phase = observed.lifecycle.phase();
        let Some(before) = self.reported else {
            // Connecting after a start is no news; the first phase after it is the baseline.
            self.reported = (phase != Phase::Pending).then_some(phase);
            return None;
        };
        if before == phase {
            return None;
        }
        let why = observed.lifecycle.why().map(str::to_string);
        let event = event(scope, before, phase, why);
        let (ctx, name) = (scope.ctx.clone(), scope.name.to_string());
        Some(Box::pin(async move {
            create(&ctx, event, &format!("the phase event of instance {name}")).await?;
            Ok(phase)
        }))
    }

    fn record(&mut self, phase: Phase, _: &mut Observed) {
        self.reported = Some(phase);
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

/// Records `event`, fenced to the leader's term; `what` names it in the error.
pub async fn create(ctx: &Context, event: Event, what: &str) -> Result<(), String> {
    let api: Api<Event> = Api::namespaced(ctx.host.clone(), NAMESPACE);
    let timeout = ctx.settings.host_call_timeout;
    let write = ctx
        .leadership
        .fenced(timeout, api.create(&PostParams::default(), &event))
        .await;
    fenced(format!("recording {what}"), write)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// A cluster-scoped Kairship object an Event is about.
pub struct About<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

/// An Event on `about` (in [`NAMESPACE`]), reported by this replica (`reporter`).
pub fn event_on(
    about: &About<'_>,
    reason: &str,
    message: &str,
    warning: bool,
    reporter: &str,
) -> Event {
    let now = jiff::Timestamp::now();
    let at = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    // kube-apiserver refuses an Event whose message passes 1 KiB... in bytes, so cut on a
    // character boundary below it.
    let message: String = message.chars().take(1000).collect();
    let value = json!({
        "metadata": {
            "name": format!("{}.{:x}", about.name, now.as_nanosecond()),
            "namespace": NAMESPACE,
        },
        "involvedObject": {
            "apiVersion": "kairship.io/v1alpha1",
            "kind": about.kind,
            "name": about.name,
            "uid": about.uid,
        },
        "reason": reason,
        "message": message,
        "type": if warning { "Warning" } else { "Normal" },
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": reporter,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    });
    // Every field above is one Event has: this cannot fail.
    serde_json::from_value(value).unwrap_or_default()
}
