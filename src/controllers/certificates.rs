//! The `certificates` controller: reads the instance's certificates and their expiry
//! (`crate::certificates`) for its status.

use std::time::Duration;

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::certificates::check;
use crate::crd::CertificateStatus;

/// Reads the certificates every `--certificate-check-secs` once connected, and every
/// [`RECHECK_EVERY`](crate::certificates::renewal::RECHECK_EVERY) for a while after a renewal, so the
/// new serving certificate shows soon. Leader only: its findings go to the status.
#[derive(Default)]
pub struct Certificates {
    /// How long until the next read, as the last look worked it out.
    every: Duration,
}

impl Controller for Certificates {
    const NAME: &'static str = "certificates";
    type Found = Vec<CertificateStatus>;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<Self::Found> {
        let Some(inputs) = scope.certificate_inputs.cloned() else {
            return Next::Idle;
        };
        let settings = &scope.ctx.settings;
        let every = match crate::certificates::renewal::recently_renewed(
            scope.instance,
            jiff::Timestamp::now(),
        ) {
            true => {
                crate::certificates::renewal::RECHECK_EVERY.min(settings.certificate_check_every)
            }
            false => settings.certificate_check_every,
        };
        self.every = every;
        let host = scope.ctx.host.clone();
        Next::Start(Box::pin(async move { Ok(check(&host, &inputs).await) }))
    }

    fn record(&mut self, found: Self::Found, report: &mut Report) -> Action {
        report.certificates = Some(found);
        Action::requeue(self.every)
    }

    fn watches(&self, scope: &Scope<'_>, _: &Observed, key: &mut dyn std::hash::Hasher) {
        // A reconnect reads them anew (a new CA, a new endpoint).
        key.write_u8(u8::from(scope.certificate_inputs.is_some()));
    }
}
