//! The instance registry controller: one `InstanceRegistration` per instance in the host,
//! so global management can bind roles to it. Written by the leader only: at once when the
//! instance connects or its endpoint changes, and every `--controller-resync-secs` after,
//! so one deleted or changed by hand is put back.

use kube::api::{Api, PostParams};
use kube::Resource;

use super::{Controller, Scope, Work};
use crate::context::{Context, Counters};
use crate::crd::{Instance, InstanceMode, InstanceRegistration, InstanceRegistrationSpec};
use crate::host::error::{bounded, fenced, gone_is_fine, HostError};
use crate::status::Observed;

#[derive(Default)]
pub struct Registration {
    /// The endpoint last registered.
    written: Option<Option<String>>,
}

impl Controller for Registration {
    const NAME: &'static str = "registration";
    type Found = Option<String>;

    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &mut Observed,
    ) -> Option<Work<Self::Found>> {
        let endpoint = observed.endpoint.clone();
        let resync = scope.ctx.settings.controller_resync;
        if !scope.connected
            || (self.written.as_ref() == Some(&endpoint) && !scope.due(Self::NAME, resync))
        {
            return None;
        }
        let (ctx, instance) = (scope.ctx.clone(), scope.instance.clone());
        Some(Box::pin(async move {
            ensure(&ctx, &instance, endpoint.clone())
                .await
                .map_err(|e| e.to_string())?;
            Ok(endpoint)
        }))
    }

    fn record(&mut self, found: Self::Found, _: &mut Observed) {
        self.written = Some(found);
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
    let read = tokio::time::timeout(timeout, api.get_opt(&name)).await;
    let params = PostParams::default();
    match bounded("reading registration", timeout, read)? {
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
