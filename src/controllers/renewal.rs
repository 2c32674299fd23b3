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
