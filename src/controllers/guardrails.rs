//! Keeps the instance's guardrails (`crd::guardrail`, its `spec.guardrails`) in the
//! instance: each applied by server-side apply as Kairship's field manager, forced (a
//! guardrail someone changed in the instance is put back), and each object labelled as a
//! guardrail that the list no longer names deleted. Runs on the leader when the list
//! changes (the actor restarts with the new spec), after a failure, and at the resync;
//! the `GuardrailsApplied` condition says what was applied and what was refused.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::crd::guardrail::{self, Guardrail, KINDS, LABEL, MANAGER};
use crate::status::GUARDRAILS_CONDITION as CONDITION;

/// How soon a pass with failures is tried again.
const RETRY_FAILED: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct Guardrails {
    /// Whether the last pass left every guardrail applied; `None` before the first.
    clean: Option<bool>,
    /// `--controller-resync-secs`, as the last look read it.
    resync: Duration,
}

/// What a pass did.
pub struct Pushed {
    applied: usize,
    pruned: usize,
    failed: Vec<String>,
}

impl Controller for Guardrails {
    const NAME: &'static str = "guardrails";
    type Found = Pushed;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, report: &mut Report) -> Next<Pushed> {
        let manifests = &scope.instance.spec.guardrails;
        let wanted = match guardrail::check(manifests) {
            Ok(w) => w,
            Err(e) => {
                // Nothing is applied or deleted from a list that does not check.
                report.say(CONDITION, Some(false), "Refused", format!("spec.{e}"));
                return Next::Wait(Action::await_change());
            }
        };
        let Some(client) = scope.client.filter(|_| scope.connected).cloned() else {
            return Next::Idle;
        };
        self.resync = scope.ctx.settings.controller_resync;
        // An empty list was pruned once; only a list in force is re-applied.
        if self.clean == Some(true) && (wanted.is_empty() || !scope.requeued()) {
            return Next::Idle;
        }
        if self.clean == Some(false) && !scope.requeued() {
            return Next::Idle;
        }
        let timeout = scope.ctx.settings.instance_call_timeout;
        Next::Start(Box::pin(async move {
            // Each call has its own timeout; the pass is bounded by their number.
            Ok(push(&client, &wanted, timeout).await)
        }))
    }

    fn record(&mut self, found: Pushed, report: &mut Report) -> Action {
        let clean = found.failed.is_empty();
        self.clean = Some(clean);
        match (found.applied, clean) {
            (0, true) if found.pruned == 0 => report.unsay(CONDITION),
            (n, true) => report.say(
                CONDITION,
                Some(true),
                "Applied",
                format!(
                    "{n} guardrail(s) applied{}",
                    match found.pruned {
                        0 => String::new(),
                        p => format!(", {p} no longer listed deleted"),
                    }
                ),
            ),
            (n, false) => report.say(
                CONDITION,
                Some(false),
                "Refused",
                format!(
                    "{n} guardrail(s) applied; refused: {}",
                    found.failed.join("; ")
                ),
            ),
        }
        Action::requeue(if clean { self.resync } else { RETRY_FAILED })
    }
}

/// Applies `wanted` and deletes the labelled objects it does not name; what failed is
/// named, the rest still done.
async fn push(client: &kube::Client, wanted: &[Guardrail], timeout: Duration) -> Pushed {
    let mut out = Pushed {
        applied: 0,
        pruned: 0,
        failed: Vec::new(),
    };
    let params = PatchParams::apply(MANAGER).force();
    for g in wanted {
        let api = api_for(client, g.kind, g.namespace.as_deref());
        let applied = tokio::time::timeout(
            timeout,
            api.patch(&g.name, &params, &Patch::Apply(&g.object)),
        )
        .await;
        match applied {
            Ok(Ok(_)) => out.applied += 1,
            Ok(Err(e)) => out.failed.push(format!("{}: {}", g.key(), reason(&e))),
            Err(_) => out
                .failed
                .push(format!("{}: no answer within {timeout:?}", g.key())),
        }
    }
    let keep: BTreeSet<(&str, Option<&str>, &str)> = wanted
        .iter()
        .map(|g| (g.kind.kind, g.namespace.as_deref(), g.name.as_str()))
        .collect();
    let selector = ListParams::default().labels(&format!("{LABEL}=true"));
    for kind in KINDS {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        let listed = match tokio::time::timeout(timeout, api.list_metadata(&selector)).await {
            Ok(Ok(l)) => l,
            // A kind this instance does not serve holds no guardrail.
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => continue,
            Ok(Err(e)) => {
                out.failed
                    .push(format!("listing {}s: {}", kind.kind, reason(&e)));
                continue;
            }
            Err(_) => {
                out.failed.push(format!(
                    "listing {}s: no answer within {timeout:?}",
                    kind.kind
                ));
                continue;
            }
        };
        for o in listed.items {
            let (ns, name) = (
                o.metadata.namespace.as_deref(),
                o.metadata.name.as_deref().unwrap_or_default(),
            );
            if keep.contains(&(kind.kind, ns, name)) {
                continue;
            }
            let api = api_for(client, kind, ns);
            match tokio::time::timeout(timeout, api.delete(name, &DeleteParams::default())).await {
                Ok(Ok(_)) => out.pruned += 1,
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => {}
                Ok(Err(e)) => {
                    out.failed
                        .push(format!("deleting {} {name}: {}", kind.kind, reason(&e)))
                }
                Err(_) => out.failed.push(format!(
                    "deleting {} {name}: no answer within {timeout:?}",
                    kind.kind
                )),
            }
        }
    }
    if !out.failed.is_empty() {
        tracing::warn!(failed = ?out.failed, "some guardrails were not applied");
    }
    out
}

fn api_for(
    client: &kube::Client,
    kind: &guardrail::Kind,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &kind.api_resource()),
        None => Api::all_with(client.clone(), &kind.api_resource()),
    }
}

/// The instance's own words for a refusal (an admission policy's message, a 422's causes).
fn reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::testing::{context, fresh, instance, mock, run, says, status, Look};

    fn vap(name: &str) -> serde_json::Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": name}, "spec": {"validations": [{"expression": "true"}]}})
    }

    /// An instance holding one labelled policy the list no longer names (`stale`), which
    /// refuses to apply `refused`.
    fn instance_api(refused: &'static str) -> (kube::Client, crate::controllers::testing::Calls) {
        mock(move |call| {
            let vaps = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
            if call.method == "GET" && call.path.starts_with(&format!("{vaps}?")) {
                return Some((
                    200,
                    json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                           "items": [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                                      "metadata": {"name": "stale", "labels": {LABEL: "true"}}}]}),
                ));
            }
            (call.method == "PATCH" && call.path.starts_with(&format!("{vaps}/{refused}?"))).then(
                || {
                    (
                        422,
                        status(422, "Invalid", "spec.validations: Required value"),
                    )
                },
            )
        })
    }

    #[tokio::test]
    async fn the_list_is_applied_by_server_side_apply_and_what_it_no_longer_names_deleted() {
        let (client, calls) = instance_api("none");
        let mut i = instance("team-a");
        i.spec.guardrails = vec![vap("no-latest")];
        let settings = crate::context::Settings {
            controller_resync: Duration::from_secs(300),
            ..Default::default()
        };
        let mut look = Look::new(i, context(client.clone(), settings)).connected(client);
        let (observed, mut report) = fresh();
        let mut c = Guardrails::default();
        let pushed = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("pushed");
        assert_eq!(
            c.record(pushed, &mut report),
            Action::requeue(Duration::from_secs(300))
        );
        let writes = calls.writes();
        assert_eq!(writes[0].method, "PATCH");
        assert!(
            writes[0]
                .path
                .contains("/validatingadmissionpolicies/no-latest?")
                && writes[0].path.contains("fieldManager=")
                && writes[0].path.contains("force=true"),
            "{}",
            writes[0].path
        );
        assert_eq!(writes[0].body["metadata"]["labels"][LABEL], "true");
        assert!(
            writes
                .iter()
                .any(|w| w.method == "DELETE"
                    && w.path.contains("/validatingadmissionpolicies/stale")),
            "{writes:?}"
        );
        let applied = "1 guardrail(s) applied, 1 no longer listed deleted";
        says(&report, CONDITION, Some(true), "Applied", applied);
        assert!(
            crate::controllers::testing::idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "a clean list waits for its resync"
        );
        look.requeued = true;
        assert!(!crate::controllers::testing::idle(&c.reconcile(
            &look.scope(),
            &observed,
            &mut report
        )));
    }

    #[tokio::test]
    async fn a_refused_guardrail_is_named_and_retried_sooner() {
        let (client, _) = instance_api("broken");
        let mut i = instance("team-a");
        i.spec.guardrails = vec![vap("no-latest"), vap("broken")];
        let look = Look::new(i, context(client.clone(), Default::default())).connected(client);
        let (observed, mut report) = fresh();
        let mut c = Guardrails::default();
        let pushed = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("pushed");
        assert_eq!(c.record(pushed, &mut report), Action::requeue(RETRY_FAILED));
        let named = "ValidatingAdmissionPolicy broken";
        says(&report, CONDITION, Some(false), "Refused", named);
    }

    #[tokio::test]
    async fn a_list_that_does_not_check_is_refused_without_a_call() {
        let (client, calls) = instance_api("none");
        let mut i = instance("team-a");
        i.spec.guardrails = vec![
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"}}),
        ];
        let look = Look::new(i, context(client.clone(), Default::default())).connected(client);
        let (observed, mut report) = fresh();
        let next = Guardrails::default().reconcile(&look.scope(), &observed, &mut report);
        assert!(crate::controllers::testing::idle(&next));
        let said = report.said(CONDITION).expect("condition");
        assert!(
            said.message.starts_with("spec.guardrails[0]"),
            "{}",
            said.message
        );
        assert!(calls.all().is_empty());
    }
}
