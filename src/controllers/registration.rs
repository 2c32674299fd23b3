//! The instance registry controller: one `InstanceRegistration` per instance in the host,
//! so global management can bind roles to it. Written by the leader only: at once when the
//! instance connects or its endpoint changes, and every `--controller-resync-secs` after,
//! so one deleted or changed by hand is put back.

use kube::api::{Api, PostParams};
use kube::Resource;

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::context::{Context, Counters};
use crate::crd::{Instance, InstanceMode, InstanceRegistration, InstanceRegistrationSpec};
use crate::host::error::{bounded, fenced, gone_is_fine, HostError};

#[derive(Default)]
pub struct Registration {
    /// The endpoint last registered.
    written: Option<Option<String>>,
    /// `--controller-resync-secs`, as the last look read it.
    resync: std::time::Duration,
}

impl Controller for Registration {
    const NAME: &'static str = "registration";
    type Found = Option<String>;

    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        _: &mut Report,
    ) -> Next<Self::Found> {
        let endpoint = observed.endpoint.clone();
        self.resync = scope.ctx.settings.controller_resync;
        if !scope.connected || (self.written.as_ref() == Some(&endpoint) && !scope.requeued()) {
            return Next::Idle;
        }
        let (ctx, instance) = (scope.ctx.clone(), scope.instance.clone());
        Next::Start(Box::pin(async move {
            ensure(&ctx, &instance, endpoint.clone()).await?;
            Ok(endpoint)
        }))
    }

    fn record(&mut self, found: Self::Found, _: &mut Report) -> Action {
        self.written = Some(found);
        Action::requeue(self.resync)
    }
}

pub async fn ensure(
    ctx: &Context,
    instance: &Instance,
    endpoint: Option<String>,
) -> Result<(), HostError> {
    let name = instance.metadata.name.clone().unwrap_or_default();
    let uid = instance.metadata.uid.clone().unwrap_or_default();
    let spec = InstanceRegistrationSpec {
        instance_name: name.clone(),
        instance_uid: uid,
        mode: match instance.spec.mode {
            InstanceMode::External => "External".into(),
            InstanceMode::Managed => "Managed".into(),
        },
        api_endpoint: endpoint,
    };
    let api: Api<InstanceRegistration> = Api::all(ctx.host.clone());
    let timeout = ctx.settings.request_timeout;
    let params = PostParams::default();
    match bounded("reading registration", timeout, api.get_opt(&name)).await? {
        Some(existing) if existing.spec == spec => return Ok(()),
        Some(mut existing) => {
            existing.spec = spec;
            // The resourceVersion read above is the replace's precondition.
            let write = ctx
                .leadership
                .fenced(timeout, api.replace(&name, &params, &existing))
                .await;
            fenced("updating registration", write)?;
        }
        None => {
            let mut reg = InstanceRegistration::new(&name, spec);
            // Owned by the Instance, so a real host garbage-collects it too.
            reg.metadata.owner_references = instance.controller_owner_ref(&()).map(|o| vec![o]);
            let write = ctx
                .leadership
                .fenced(timeout, api.create(&params, &reg))
                .await;
            fenced("creating registration", write)?;
        }
    }
    Counters::bump(&ctx.counters.registration_writes);
    Ok(())
}

/// Removes the registration of a deleted instance.
pub async fn remove(ctx: &Context, name: &str) -> Result<(), HostError> {
    let api: Api<InstanceRegistration> = Api::all(ctx.host.clone());
    let params = Default::default();
    let write = ctx
        .leadership
        .fenced(ctx.settings.request_timeout, api.delete(name, &params))
        .await;
    gone_is_fine(fenced("deleting registration", write).map(drop))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::controllers::testing::{context, fresh, idle, instance, mock, run, Look};
    use crate::controllers::ControllerError;

    #[tokio::test]
    async fn registers_once_connected_then_only_at_the_resync_or_a_new_endpoint() {
        let (host, calls) = mock(|_| None);
        let settings = crate::context::Settings {
            controller_resync: Duration::from_secs(300),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-a"), context(host.clone(), settings));
        let (mut observed, mut report) = fresh();
        observed.endpoint = Some("https://10.0.0.1:5443".into());
        let mut c = Registration::default();
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "nothing before the instance is connected"
        );

        look = look.connected(host.clone());
        let found = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("registered");
        let writes = calls.writes();
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0].method, "POST");
        assert_eq!(
            writes[0].path,
            "/apis/kairship.io/v1alpha1/instanceregistrations?"
        );
        let spec = &writes[0].body["spec"];
        assert_eq!(spec["instanceName"], "team-a");
        assert_eq!(spec["instanceUid"], "uid-team-a");
        assert_eq!(spec["apiEndpoint"], "https://10.0.0.1:5443");
        assert_eq!(
            writes[0].body["metadata"]["ownerReferences"][0]["uid"], "uid-team-a",
            "owned by the Instance, for the garbage collector"
        );
        assert_eq!(
            c.record(found, &mut report),
            Action::requeue(Duration::from_secs(300))
        );

        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "a change elsewhere does not write it again"
        );
        look.requeued = true;
        assert!(
            !idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "the resync does"
        );
        look.requeued = false;
        observed.endpoint = Some("https://10.0.0.2:5443".into());
        assert!(
            !idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "a new endpoint does"
        );
    }

    #[tokio::test]
    async fn an_unchanged_registration_is_not_written_and_a_changed_one_is_replaced() {
        let (host, calls) = mock(|call| {
            (call.method == "GET").then(|| {
                (
                    200,
                    serde_json::json!({
                        "apiVersion": "kairship.io/v1alpha1", "kind": "InstanceRegistration",
                        "metadata": {"name": "team-a", "resourceVersion": "7"},
                        "spec": {"instanceName": "team-a", "instanceUid": "uid-team-a",
                                 "mode": "External", "apiEndpoint": "https://old:5443"},
                    }),
                )
            })
        });
        let ctx = context(host.clone(), Default::default());
        let i = instance("team-a");
        ensure(&ctx, &i, Some("https://old:5443".into()))
            .await
            .expect("same");
        assert!(calls.writes().is_empty(), "{:?}", calls.writes());
        ensure(&ctx, &i, Some("https://new:5443".into()))
            .await
            .expect("replaced");
        let writes = calls.writes();
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].method, "PUT");
        assert_eq!(
            writes[0].body["metadata"]["resourceVersion"], "7",
            "the read is the precondition"
        );
        assert_eq!(writes[0].body["spec"]["apiEndpoint"], "https://new:5443");
    }

    #[tokio::test]
    async fn a_refused_write_is_a_typed_host_error() {
        let (host, _) = mock(|call| {
            (call.method == "POST").then(|| {
                (
                    403,
                    crate::controllers::testing::status(403, "Forbidden", "no"),
                )
            })
        });
        let look = Look::new(
            instance("team-a"),
            context(host.clone(), Default::default()),
        )
        .connected(host);
        let (observed, mut report) = fresh();
        let mut c = Registration::default();
        match run(c.reconcile(&look.scope(), &observed, &mut report)).await {
            Err(ControllerError::Call(e)) => assert_eq!(e.code(), Some(403)),
            other => panic!("expected the host's 403, got {other:?}"),
        }
    }
}
