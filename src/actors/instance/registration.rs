//! The instance registry controller: one `InstanceRegistration` per instance in the host,
//! so global management can bind roles to it. Written by the leader only.

use kube::api::{Api, PostParams};
use kube::Resource;

use crate::actors::context::{Context, Counters};
use crate::crd::{Instance, InstanceMode, InstanceRegistration, InstanceRegistrationSpec};

pub async fn ensure(
    ctx: &Context,
    instance: &Instance,
    endpoint: Option<String>,
) -> Result<(), String> {
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
    let bounded = |what: &'static str| move |_| format!("{what} registration timed out");
    match tokio::time::timeout(timeout, api.get_opt(&name))
        .await
        .map_err(bounded("reading"))?
    {
        Ok(Some(existing)) if existing.spec == spec => Ok(()),
        Ok(Some(mut existing)) => {
            existing.spec = spec;
            // The resourceVersion read above is the replace's precondition.
            let params = PostParams::default();
            ctx.leadership
                .fenced(timeout, api.replace(&name, &params, &existing))
                .await
                .map_err(|e| format!("updating registration: {e}"))?
                .map_err(|e| format!("updating registration: {e}"))?;
            Counters::bump(&ctx.counters.registration_writes);
            Ok(())
        }
        Ok(None) => {
            let mut reg = InstanceRegistration::new(&name, spec);
            // Owned by the Instance, so a real host garbage-collects it too.
            reg.metadata.owner_references = instance.controller_owner_ref(&()).map(|o| vec![o]);
            let params = PostParams::default();
            ctx.leadership
                .fenced(timeout, api.create(&params, &reg))
                .await
                .map_err(|e| format!("creating registration: {e}"))?
                .map_err(|e| format!("creating registration: {e}"))?;
            Counters::bump(&ctx.counters.registration_writes);
            Ok(())
        }
        Err(e) => Err(format!("reading registration: {e}")),
    }
}

/// Removes the registration of a deleted instance.
pub async fn remove(ctx: &Context, name: &str) -> Result<(), String> {
    let api: Api<InstanceRegistration> = Api::all(ctx.host.clone());
    let params = Default::default();
    match ctx
        .leadership
        .fenced(ctx.settings.request_timeout, api.delete(name, &params))
        .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(()),
        Ok(Err(e)) => Err(format!("deleting registration: {e}")),
        Err(e) => Err(format!("deleting registration: {e}")),
    }
}
