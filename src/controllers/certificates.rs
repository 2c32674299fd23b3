//! The `certificates` controller: reads the instance's certificates and their expiry
//! (`crate::certificates`) for its status.

use super::{Controller, Scope, Work};
use crate::certificates::check;
use crate::crd::CertificateStatus;
use crate::status::Observed;

/// Reads the certificates every `--certificate-check-secs` once connected, and every
/// [`RECHECK_EVERY`](crate::certificates::renewal::RECHECK_EVERY) for a while after a renewal, so the
/// new serving certificate shows soon. Leader only: its findings go to the status.
#[derive(Default)]
pub struct Certificates;

impl Controller for Certificates {
    const NAME: &'static str = "certificates";
    type Found = Vec<CertificateStatus>;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &mut Observed) -> Option<Work<Self::Found>> {
        let inputs = scope.certificate_inputs?.clone();
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
        if !scope.due(Self::NAME, every) {
            return None;
        }
        let host = scope.ctx.host.clone();
        Some(Box::pin(async move { Ok(check(&host, &inputs).await) }))
    }

    fn record(&mut self, found: Self::Found, observed: &mut Observed) {
        observed.certificates = found;
    }
}
