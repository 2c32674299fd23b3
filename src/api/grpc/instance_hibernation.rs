//! `InstanceService.HibernateInstance` and `WakeInstance`: a command recorded on the
//! Instance (`hibernation::runner::COMMAND_ANNOTATION`), which the leader's next pass
//! weighs with the instance's schedules and requests (the latest wins) and acts on.

use kube::api::{Api, Patch, PatchParams};

use crate::api::context::ApiContext;
use crate::api::convert;
use crate::crd::{Instance, InstanceMode};
use crate::error::ApiError;
use crate::hibernation::runner::COMMAND_ANNOTATION;
use crate::proto;

pub async fn command(
    ctx: &ApiContext,
    name: &str,
    hibernate: bool,
    visible: &(dyn Fn(&str) -> bool + Sync),
) -> Result<proto::Instance, ApiError> {
    let instance = ctx.instance(name)?;
    if instance.spec.mode != InstanceMode::Managed {
        return Err(ApiError::FailedPrecondition(format!(
            "instance {name:?} is External: Kairship cannot scale a control plane it does not run"
        )));
    }
    if instance.metadata.deletion_timestamp.is_some() {
        return Err(ApiError::FailedPrecondition(format!(
            "instance {name:?} is being deleted"
        )));
    }
    let verb = if hibernate { "hibernate" } else { "wake" };
    let value = format!("{verb} {}", jiff::Timestamp::now());
    let patch = serde_json::json!({"metadata": {"annotations": {COMMAND_ANNOTATION: value}}});
    let api: Api<Instance> = Api::all(ctx.tree.host().clone());
    let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
    let written = ctx
        .host_call(
            &format!("instance {name:?}"),
            api.patch(name, &params, &patch),
        )
        .await?;
    tracing::info!(instance = %name, command = verb, "hibernation command recorded");
    Ok(convert::instance(&written, visible))
}
