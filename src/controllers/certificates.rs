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
    /// A read was started: the next waits for its requeue, not for any watched change.
    read: bool,
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
        if self.read && !scope.requeued() {
            return Next::Idle;
        }
        (self.every, self.read) = (every, true);
        let host = scope.ctx.host.clone();
        Next::Start(Box::pin(async move { Ok(check(&host, &inputs).await) }))
    }

    fn record(&mut self, found: Self::Found, report: &mut Report) -> Action {
        report.certificates = Some(found);
        Action::requeue(self.every)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use base64::Engine;
    use serde_json::json;

    use super::*;
    use crate::certificates::Inputs;
    use crate::controllers::testing::{context, fresh, idle, instance, mock, run, Look};

    fn pem(cn: &str) -> String {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().expect("key");
        p.self_signed(&key).expect("cert").pem()
    }

    #[tokio::test]
    async fn reads_the_operators_secrets_into_its_report_and_comes_back_at_its_cadence() {
        let apiserver = base64::engine::general_purpose::STANDARD.encode(pem("karmada-apiserver"));
        let (host, calls) = mock(move |call| {
            call.path
                .starts_with("/api/v1/namespaces/karmada-system/secrets/team-m-karmada-cert")
                .then(|| {
                    (
                        200,
                        json!({"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "team-m-karmada-cert", "namespace": "karmada-system"},
                               "data": {"apiserver.crt": apiserver, "apiserver.key": "c2VjcmV0"}}),
                    )
                })
        });
        let settings = crate::context::Settings {
            certificate_check_every: Duration::from_secs(600),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-m"), context(host, settings));
        let (observed, mut report) = fresh();
        let mut c = Certificates::default();
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "nothing to read before a connect says where"
        );
        look.certificate_inputs = Some(Inputs {
            operator: Some(("karmada-system".into(), "team-m".into())),
            ..Default::default()
        });
        let found = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("read");
        assert_eq!(
            c.record(found, &mut report),
            Action::requeue(Duration::from_secs(600))
        );
        let read = report.certificates.clone().unwrap_or_default();
        assert_eq!(read.len(), 1, "the .crt, not the key: {read:?}");
        assert_eq!(read[0].name, "team-m-karmada-cert/apiserver.crt");
        assert!(read[0].subject.contains("karmada-apiserver"));
        assert!(calls.writes().is_empty(), "it only reads");
        let asked: Vec<String> = calls.all().into_iter().map(|c| c.path).collect();
        assert!(
            asked.iter().any(|p| p.contains("team-m-karmada-etcd-cert"))
                && asked
                    .iter()
                    .any(|p| p.contains("team-m-karmada-webhook-cert")),
            "each of karmada-operator's certificate Secrets: {asked:?}"
        );
        assert!(
            crate::controllers::testing::idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "read again at its cadence, not at every watched change"
        );
    }
}
