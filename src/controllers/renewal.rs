//! The `renewal` controller: renews a managed instance's leaf certificates before they
//! expire (`crate::certificates::renewal`).

use std::time::Instant;

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};
use crate::certificates::renewal::{due, renew, Done, RETRY_AFTER};

/// The leader's automatic renewals: once the first of a managed instance's leaves expires
/// within `--certificate-auto-renew-days` (as the certificates controller last read them),
/// one attempt at a time, and after each attempt none before [`RETRY_AFTER`] and a fresh
/// certificate check.
#[derive(Default)]
pub struct Renewal;

impl Controller for Renewal {
    const NAME: &'static str = "renewal";
    type Found = Done;

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &Observed, _: &mut Report) -> Next<Done> {
        let settings = &scope.ctx.settings;
        let (Some(window), Some((ns, name))) = (settings.certificate_auto_renew, scope.operator())
        else {
            return Next::Idle;
        };
        let checked = scope.succeeded_at(super::certificates::Certificates::NAME);
        let certificates = observed
            .reports
            .get(super::certificates::Certificates::NAME)
            .and_then(|r| r.certificates.as_deref())
            .unwrap_or_default();
        if !allows(scope.finished_at(Self::NAME), checked)
            || !due(certificates, scope.name, window, jiff::Timestamp::now())
        {
            // Looked at again when the certificates are read anew (they are watched).
            return Next::Wait(Action::requeue(RETRY_AFTER));
        }
        let (host, timeout) = (scope.ctx.host.clone(), settings.host_call_timeout);
        tracing::info!("a leaf certificate expires within {window:?}: renewing");
        Next::Start(Box::pin(async move {
            renew(&host, &ns, &name, timeout).await.map_err(|e| {
                ControllerError::Failed(format!("renewing the certificates before expiry: {e}"))
            })
        }))
    }

    fn record(&mut self, done: Done, _: &mut Report) -> Action {
        tracing::info!(
            renewed = done.renewed.len(),
            rolled = ?done.rolled,
            "certificates renewed before expiry; the components roll onto them"
        );
        Action::requeue(RETRY_AFTER)
    }

    fn watches(&self, scope: &Scope<'_>, _: &Observed, key: &mut dyn std::hash::Hasher) {
        // Each fresh read of the certificates is a change.
        let read = scope.succeeded_at(super::certificates::Certificates::NAME);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&read, &mut h);
        key.write_u64(std::hash::Hasher::finish(&h));
    }
}

/// Whether an automatic attempt may start, given when the last ended and when the
/// certificates were last read.
fn allows(last: Option<Instant>, checked_at: Option<Instant>) -> bool {
    match last {
        None => true,
        Some(t) => t.elapsed() >= RETRY_AFTER && checked_at.is_some_and(|c| c > t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_attempt_then_none_before_the_wait_and_a_fresh_check() {
        assert!(allows(None, None));
        assert!(
            !allows(Some(Instant::now()), Some(Instant::now())),
            "not again at once"
        );
    }
}

#[cfg(test)]
mod host_tests {
    use std::time::Duration;

    use super::*;
    use crate::controllers::testing::{context, fresh, instance, mock, run, Look};
    use crate::crd::CertificateStatus;

    #[tokio::test]
    async fn renews_only_once_a_leaf_expires_within_the_window() {
        let (host, calls) = mock(|_| None);
        let settings = crate::context::Settings {
            certificate_auto_renew: Some(Duration::from_secs(30 * 86_400)),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-m"), context(host, settings));
        look.certificate_inputs = Some(crate::certificates::Inputs {
            operator: Some(("karmada-system".into(), "team-m".into())),
            ..Default::default()
        });
        let (mut observed, mut report) = fresh();
        let mut c = Renewal;
        assert!(
            matches!(
                c.reconcile(&look.scope(), &observed, &mut report),
                Next::Wait(a) if a == Action::requeue(RETRY_AFTER)
            ),
            "no certificates read yet: nothing due"
        );
        let soon = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24)).to_string();
        let read = Report {
            certificates: Some(vec![CertificateStatus {
                name: "team-m-karmada-cert/apiserver.crt".into(),
                subject: "CN=karmada-apiserver".into(),
                not_before: None,
                not_after: soon,
            }]),
            ..Default::default()
        };
        observed
            .reports
            .put(super::super::certificates::Certificates::NAME, read);
        let e = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect_err("the mocked host has no Karmada object");
        assert!(
            e.to_string()
                .starts_with("renewing the certificates before expiry"),
            "{e}"
        );
        let asked = calls.all();
        assert!(
            asked.iter().any(|c| c.path
                == "/apis/operator.karmada.io/v1alpha1/namespaces/karmada-system/karmadas/team-m"),
            "{asked:?}"
        );
        assert!(
            calls.writes().is_empty(),
            "nothing written for an object not found"
        );
    }
}
