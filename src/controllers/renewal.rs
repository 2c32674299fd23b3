//! The `renewal` controller: renews a managed instance's leaf certificates before they
//! expire (`crate::certificates::renewal`).

use std::time::Instant;

use super::{Controller, Scope, Work};
use crate::certificates::renewal::{due, renew, Done, RETRY_AFTER};
use crate::status::Observed;

/// The leader's automatic renewals: once the first of a managed instance's leaves expires
/// within `--certificate-auto-renew-days` (as the certificates controller last read them),
/// one attempt at a time, and after each attempt none before [`RETRY_AFTER`] and a fresh
/// certificate check.
#[derive(Default)]
pub struct Renewal;

impl Controller for Renewal {
    const NAME: &'static str = "renewal";
    type Found = Done;

    fn reconcile(&mut self, scope: &Scope<'_>, observed: &mut Observed) -> Option<Work<Done>> {
        let settings = &scope.ctx.settings;
        let (window, (ns, name)) = (settings.certificate_auto_renew?, scope.operator()?);
        let checked = scope.succeeded_at(super::certificates::Certificates::NAME);
        if !allows(scope.finished_at(Self::NAME), checked)
            || !due(
                &observed.certificates,
                scope.name,
                window,
                jiff::Timestamp::now(),
            )
        {
            return None;
        }
        let (host, timeout) = (scope.ctx.host.clone(), settings.host_call_timeout);
        tracing::info!("a leaf certificate expires within {window:?}: renewing");
        Some(Box::pin(async move {
            renew(&host, &ns, &name, timeout)
                .await
                .map_err(|e| format!("renewing the certificates before expiry: {e}"))
        }))
    }

    fn record(&mut self, done: Done, _: &mut Observed) {
        tracing::info!(
            renewed = done.renewed.len(),
            rolled = ?done.rolled,
            "certificates renewed before expiry; the components roll onto them"
        );
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
