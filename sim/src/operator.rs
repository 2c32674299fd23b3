//! The karmada-operator double on the host: a `Karmada` object provisions a new simulated
//! instance, writes the Secret `<name>-admin-config` (key `karmada.config`) and reports
//! `status.secretRef` with a `Ready` condition; deleting the object tears it down.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::fleet::Fleet;
use crate::patch::PatchKind;
use crate::resources::ResourceDef;
use crate::store::meta::{meta_str, now_rfc3339};
use crate::store::{EventType, Filter, WatchFrom};
use kairship_wire::status::ApiResult;

pub const FINALIZER: &str = "operator.karmada.io/finalizer";
pub const KARMADA_VERSION: &str = "v1.12.0";

/// Watches `Karmada` objects on the host until the fleet stops.
pub async fn run(fleet: Fleet) {
    let host = fleet.host().clone();
    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    loop {
        let Some(def) = host
            .store
            .lookup("operator.karmada.io", "v1alpha1", "karmadas")
        else {
            // Someone deleted the CRD; wait for it to come back.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        };
        let Ok(start) = host
            .store
            .watch(&def, &Filter::default(), WatchFrom::Current)
        else {
            continue;
        };
        for ev in start.initial {
            reconcile(&fleet, &def, &ev.object.value, &in_flight);
        }
        let mut live = start.live;
        let key = def.key();
        loop {
            match live.recv().await {
                Ok(ev) if *ev.resource == key && ev.kind != EventType::Deleted => {
                    reconcile(&fleet, &def, &ev.object.value, &in_flight)
                }
                Ok(_) => {}
                // Fell behind: start over from the current state.
                Err(_) => break,
            }
        }
    }
}

fn instance_name(fleet: &Fleet, ns: &str, name: &str) -> String {
    match fleet.instance(name) {
        Some(i) if i.managed_by.as_ref() != Some(&(ns.to_string(), name.to_string())) => {
            format!("{ns}-{name}")
        }
        _ => name.to_string(),
    }
}

fn reconcile(
    fleet: &Fleet,
    def: &Arc<ResourceDef>,
    obj: &Value,
    in_flight: &Arc<Mutex<HashSet<String>>>,
) {
    let (Some(ns), Some(name)) = (meta_str(obj, "namespace"), meta_str(obj, "name")) else {
        return;
    };
    let (ns, name) = (ns.to_string(), name.to_string());
    let finalizers: Vec<String> = obj
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let ours = finalizers.iter().any(|f| f == FINALIZER);
    let result = if meta_str(obj, "deletionTimestamp").is_some() {
        if ours {
            teardown(fleet, def, &ns, &name, finalizers)
        } else {
            Ok(())
        }
    } else if !ours {
        let mut f = finalizers;
        f.push(FINALIZER.to_string());
        patch(
            fleet,
            def,
            &ns,
            &name,
            json!({"metadata": {"finalizers": f}}),
            false,
        )
    } else if !is_ready(obj) && in_flight.lock().insert(format!("{ns}/{name}")) {
        let (fleet, def, in_flight, name) =
            (fleet.clone(), def.clone(), in_flight.clone(), name.clone());
        let generation = obj
            .pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1));
        tokio::spawn(async move {
            match provision(&fleet, &def, &ns, &name, generation).await {
                Err(e) => {
                    warn!(karmada = %name, namespace = %ns, error = %e, "provisioning failed");
                    let status = json!({"status": {"conditions": [condition(false, "InstallFailed", &e.to_string())]}});
                    let _ = patch(&fleet, &def, &ns, &name, status, true);
                }
                Ok(()) => upgrade_until_current(&fleet, &def, &ns, &name).await,
            }
            in_flight.lock().remove(&format!("{ns}/{name}"));
        });
        Ok(())
    } else if is_ready(obj)
        && obj.pointer("/status/observedGeneration") != obj.pointer("/metadata/generation")
        && in_flight.lock().insert(format!("{ns}/{name}"))
    {
        let (fleet, def, in_flight, name) =
            (fleet.clone(), def.clone(), in_flight.clone(), name.clone());
        tokio::spawn(async move {
            upgrade_until_current(&fleet, &def, &ns, &name).await;
            in_flight.lock().remove(&format!("{ns}/{name}"));
        });
        Ok(())
    } else {
        Ok(())
    };
    if let Err(e) = result {
        warn!(karmada = %name, error = %e, "reconciling Karmada object");
    }
}

fn is_ready(obj: &Value) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn condition(ready: bool, reason: &str, message: &str) -> Value {
    json!({"type": "Ready", "status": if ready { "True" } else { "False" }, "reason": reason, "message": message, "lastTransitionTime": now_rfc3339()})
}

fn patch(
    fleet: &Fleet,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    body: Value,
    status: bool,
) -> ApiResult<()> {
    fleet
        .host()
        .store
        .patch(
            def,
            Some(ns),
            name,
            PatchKind::Merge,
            body.to_string().as_bytes(),
            status,
        )
        .map(|_| ())
}

async fn provision(
    fleet: &Fleet,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    generation: Value,
) -> Result<(), crate::Error> {
    info!(karmada = %name, namespace = %ns, "provisioning simulated Karmada control plane");
    let progressing = json!({"status": {"conditions": [condition(false, "Progressing", "installing karmada control plane")]}});
    patch(fleet, def, ns, name, progressing, true)?;
    tokio::time::sleep(fleet.config().provision_delay).await;
    let inst_name = instance_name(fleet, ns, name);
    let inst = match fleet.instance(&inst_name) {
        Some(i) => i,
        None => {
            fleet
                .add_instance(
                    &inst_name,
                    fleet.config().clusters,
                    Some((ns.to_string(), name.to_string())),
                )
                .await?
        }
    };
    let secret_name = format!("{name}-admin-config");
    let config =
        serde_json::to_vec(&inst.kubeconfig()).map_err(|e| crate::Error::Invalid(e.to_string()))?;
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name, "namespace": ns, "labels": {"karmada.io/bootstrapping": "secret-admin-config"}},
        "data": {"karmada.config": base64::engine::general_purpose::STANDARD.encode(config)},
    });
    let host = fleet.host();
    let secrets = host
        .store
        .lookup("", "v1", "secrets")
        .ok_or_else(|| crate::Error::Invalid("secrets are not served".into()))?;
    match host.store.create(&secrets, Some(ns), secret.clone()) {
        Err(e) if e.code == 409 => {
            host.store
                .update(&secrets, Some(ns), &secret_name, secret, false)?;
        }
        other => {
            other?;
        }
    }
    let current = host
        .store
        .get(def, Some(ns), name)
        .map(|o| o.value.clone())
        .unwrap_or_default();
    let status = json!({"status": {
        "observedGeneration": generation,
        "conditions": [condition(true, "Completed", "karmada init job is completed")],
        "secretRef": {"namespace": ns, "name": secret_name},
        "karmadaVersion": wanted_version(&current),
        "kubernetesVersion": "v1.31.3",
        "apiServerService": {"name": format!("{name}-karmada-apiserver"), "port": 5443},
    }});
    patch(fleet, def, ns, name, status, true)?;
    info!(karmada = %name, instance = %inst_name, "simulated Karmada control plane ready");
    Ok(())
}

/// The version a Karmada spec asks for: its components' image tag, as karmada-operator
/// installs them (controller-manager first, then the API server).
pub fn wanted_version(obj: &Value) -> String {
    ["karmadaControllerManager", "karmadaScheduler"]
        .iter()
        .find_map(|c| {
            obj.pointer(&format!("/spec/components/{c}/imageTag"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        })
        .unwrap_or(KARMADA_VERSION)
        .to_string()
}

/// Upgrades until the object's generation stops moving: spec changes that land during an
/// install or upgrade are picked up before the in-flight guard lets go.
async fn upgrade_until_current(fleet: &Fleet, def: &ResourceDef, ns: &str, name: &str) {
    loop {
        let obj = match fleet.host().store.get(def, Some(ns), name) {
            Ok(now)
                if now.value.pointer("/status/observedGeneration")
                    != now.value.pointer("/metadata/generation")
                    && is_ready(&now.value)
                    && meta_str(&now.value, "deletionTimestamp").is_none() =>
            {
                now.value.clone()
            }
            _ => return,
        };
        if let Err(e) = upgrade(fleet, def, ns, name, &obj).await {
            warn!(karmada = %name, namespace = %ns, error = %e, "upgrade failed");
            return;
        }
    }
}

/// A spec change on a ready control plane: Ready=False/Upgrading, then the new version.
async fn upgrade(
    fleet: &Fleet,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    obj: &Value,
) -> Result<(), crate::Error> {
    let version = wanted_version(obj);
    let generation = obj
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    info!(karmada = %name, namespace = %ns, version = %version, "upgrading simulated Karmada control plane");
    let upgrading = json!({"status": {"conditions": [condition(false, "Upgrading", &format!("upgrading karmada control plane to {version}"))]}});
    patch(fleet, def, ns, name, upgrading, true)?;
    tokio::time::sleep(fleet.config().provision_delay).await;
    let done = json!({"status": {
        "observedGeneration": generation,
        "karmadaVersion": version,
        "conditions": [condition(true, "Completed", "karmada init job is completed")],
    }});
    patch(fleet, def, ns, name, done, true)?;
    info!(karmada = %name, version = %version, "simulated Karmada control plane upgraded");
    Ok(())
}

fn teardown(
    fleet: &Fleet,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    finalizers: Vec<String>,
) -> ApiResult<()> {
    let inst = fleet
        .instances()
        .into_iter()
        .find(|i| i.managed_by.as_ref() == Some(&(ns.to_string(), name.to_string())));
    if let Some(i) = inst {
        fleet.remove_instance(&i.name);
    }
    if let Some(secrets) = fleet.host().store.lookup("", "v1", "secrets") {
        match fleet.host().store.delete(
            &secrets,
            Some(ns),
            &format!("{name}-admin-config"),
            Default::default(),
        ) {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    let rest: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
    info!(karmada = %name, namespace = %ns, "simulated Karmada control plane removed");
    patch(
        fleet,
        def,
        ns,
        name,
        json!({"metadata": {"finalizers": rest}}),
        false,
    )
}
