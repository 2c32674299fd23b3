//! Leader-only writes the manager makes on behalf of instances: the finalizer, deletion
//! cleanup (managed Karmada object, registration, then the finalizer), and the status of
//! instances whose actor cannot run. Each runs in its own task with a timeout.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use ractor::ActorRef;
use serde_json::json;
use tracing::{info, warn};

use super::messages::ManagerMsg;
use crate::context::{Context, Counters};
use crate::controllers::{clusterpedia, registration};
use crate::crd::{Condition, Instance, InstanceMode, Phase, FINALIZER};
use crate::host::error::{bounded, fenced, gone_is_fine, HostError};
use crate::host::karmada::{karmada_resource, owned};

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

async fn patch_instance(
    ctx: &Context,
    name: &str,
    patch: serde_json::Value,
    status: bool,
) -> Result<(), HostError> {
    let api: Api<Instance> = Api::all(ctx.host.clone());
    let p = Patch::Merge(patch);
    let call = async {
        if status {
            api.patch_status(name, &PatchParams::default(), &p).await
        } else {
            api.patch(name, &PatchParams::default(), &p).await
        }
    };
    let what = if status {
        format!("patching the status of instance {name}")
    } else {
        format!("patching instance {name}")
    };
    let write = ctx
        .leadership
        .fenced(ctx.settings.request_timeout, call)
        .await;
    gone_is_fine(fenced(what, write).map(drop))
}

pub fn add_finalizer(ctx: &Context, name: &str) {
    let (ctx, name) = (ctx.clone(), name.to_string());
    tokio::spawn(async move {
        // A JSON merge patch replaces the list; read it fresh to keep other finalizers.
        let api: Api<Instance> = Api::all(ctx.host.clone());
        let Ok(Ok(Some(current))) =
            tokio::time::timeout(ctx.settings.request_timeout, api.get_opt(&name)).await
        else {
            return;
        };
        let mut finalizers = current.metadata.finalizers.unwrap_or_default();
        if finalizers.iter().any(|f| f == FINALIZER) {
            return;
        }
        finalizers.push(FINALIZER.to_string());
        let rv = current.metadata.resource_version;
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": rv}});
        match patch_instance(&ctx, &name, patch, false).await {
            Ok(()) => {}
            // Another event's attempt got there first; the next event checks again.
            Err(e) if e.is_conflict() => {
                tracing::debug!(instance = %name, "finalizer update raced")
            }
            Err(e) => {
                warn!(instance = %name, error = %e, "adding finalizer failed; retried on the next event")
            }
        }
    });
}

fn status_patch(phase: Phase, reason: &str, message: &str) -> serde_json::Value {
    let cond = Condition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: now(),
        observed_generation: None,
    };
    json!({"status": {"phase": phase, "conditions": [cond]}})
}

pub fn write_degraded(ctx: &Context, name: &str, why: &str) {
    write_status(ctx, name, status_patch(Phase::Degraded, "Degraded", why));
}

pub fn write_invalid(ctx: &Context, name: &str, why: &str) {
    write_status(ctx, name, status_patch(Phase::Degraded, "InvalidSpec", why));
}

fn write_status(ctx: &Context, name: &str, patch: serde_json::Value) {
    let (ctx, name) = (ctx.clone(), name.to_string());
    tokio::spawn(async move {
        match patch_instance(&ctx, &name, patch, true).await {
            Ok(()) => Counters::bump(&ctx.counters.status_writes),
            Err(e) => warn!(instance = %name, error = %e, "writing status failed"),
        }
    });
}

/// Removes what the instance owns, then its finalizer; reports back to the manager.
pub fn spawn_cleanup(ctx: Context, instance: Instance, manager: ActorRef<ManagerMsg>) {
    let name = instance.metadata.name.clone().unwrap_or_default();
    tokio::spawn(async move {
        let result = cleanup(&ctx, &instance, &name).await;
        let _ = manager.send_message(ManagerMsg::CleanedUp(name, result));
    });
}

async fn cleanup(ctx: &Context, instance: &Instance, name: &str) -> Result<(), HostError> {
    let _ = patch_instance(
        ctx,
        name,
        status_patch(Phase::Terminating, "Terminating", "cleaning up"),
        true,
    )
    .await;
    if instance.spec.mode == InstanceMode::Managed {
        let ns = ctx.settings.managed_namespace_of(instance);
        delete_karmada(ctx, &ns, name).await?;
    }
    registration::remove(ctx, name).await?;
    crate::controllers::cluster_profiles::remove(ctx, name).await?;
    if let Some(namespace) = &ctx.settings.clusterpedia {
        clusterpedia::remove(ctx, name, namespace).await?;
    }
    // Fresh read: the resourceVersion guards the finalizer list against concurrent edits.
    let api: Api<Instance> = Api::all(ctx.host.clone());
    let timeout = ctx.settings.request_timeout;
    let Some(fresh) = bounded(
        format!("reading instance {name}"),
        timeout,
        api.get_opt(name),
    )
    .await?
    else {
        return Ok(());
    };
    let rest: Vec<String> = fresh
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != FINALIZER)
        .collect();
    let rv = fresh.metadata.resource_version.clone();
    patch_instance(
        ctx,
        name,
        json!({"metadata": {"finalizers": rest, "resourceVersion": rv}}),
        false,
    )
    .await?;
    info!(instance = %name, "instance cleaned up");
    Ok(())
}

/// Deletes the instance's `Karmada` object if Kairship created it (labelled with the
/// instance's name); someone else's same-named object is left alone. The delete is
/// conditional on the uid just read, so an object replaced meanwhile is not removed.
async fn delete_karmada(ctx: &Context, ns: &str, name: &str) -> Result<(), HostError> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.host.clone(), ns, &karmada_resource());
    let timeout = ctx.settings.request_timeout;
    let Some(current) = bounded(
        format!("reading Karmada {ns}/{name}"),
        timeout,
        api.get_opt(name),
    )
    .await?
    else {
        return Ok(());
    };
    if !owned(&current, name) {
        warn!(instance = %name, namespace = %ns, "Karmada object of this name is not Kairship's; left in place");
        return Ok(());
    }
    // A suspended object's deletion waits for it to be resumed (a hibernated instance's
    // is suspended): resume it first, or the operator never tears it down.
    if current.data.pointer("/spec/suspend") == Some(&serde_json::Value::Bool(true)) {
        let resume = serde_json::json!({"spec": {"suspend": false}});
        let write = ctx
            .leadership
            .fenced(
                timeout,
                api.patch(name, &PatchParams::default(), &Patch::Merge(&resume)),
            )
            .await;
        fenced(format!("resuming Karmada {ns}/{name}"), write)?;
    }
    let params = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: current.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let write = ctx
        .leadership
        .fenced(timeout, api.delete(name, &params))
        .await;
    gone_is_fine(fenced(format!("deleting Karmada {ns}/{name}"), write).map(drop))?;
    info!(instance = %name, "managed Karmada object deleted");
    Ok(())
}
