//! The karmada-operator double on the host, following the real operator (v1.18): it
//! persists its defaults into a new `Karmada` object's spec (each component's image tag),
//! runs its install workflow on every new generation (`Ready=False` reason `Progressing`,
//! then `Ready=True` reason `Completed`, the whole condition list rewritten each time),
//! writes the Secret `<name>-karmada-admin-config` (key `karmada.config`) and reports
//! `status.secretRef`, and keeps the components' Deployments and etcd's StatefulSet, each
//! ready with one Running Pod (which runs nothing) whose container has the resources the
//! component's spec names (`components`); like the real one it never writes
//! `observedGeneration` nor the version it installed, and leaves a resource with
//! `spec.suspend: true` alone, its deletion included. Deleting the object tears the
//! instance down.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::components::{component_name, components, COMPONENTS, MAX_REPLICAS};
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
    let done: Done = Arc::default();
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
            reconcile(&fleet, &def, &ev.object.value, &in_flight, &done);
        }
        let mut live = start.live;
        let key = def.key();
        loop {
            match live.recv().await {
                Ok(ev) if *ev.resource == key && ev.kind != EventType::Deleted => {
                    reconcile(&fleet, &def, &ev.object.value, &in_flight, &done)
                }
                Ok(_) => {}
                // Fell behind: start over from the current state.
                Err(_) => break,
            }
        }
    }
}

/// The generation each object's workflow last completed (the real operator keeps this in
/// its work queue, not in the object).
type Done = Arc<Mutex<std::collections::HashMap<String, i64>>>;

/// The Secret with the admin kubeconfig, named as karmada-operator names it.
pub fn admin_secret_name(name: &str) -> String {
    if name.contains("karmada") {
        format!("{name}-admin-config")
    } else {
        format!("{name}-karmada-admin-config")
    }
}

fn generation(obj: &Value) -> i64 {
    obj.pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1)
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
    done: &Done,
) {
    let (Some(ns), Some(name)) = (meta_str(obj, "namespace"), meta_str(obj, "name")) else {
        return;
    };
    let (ns, name) = (ns.to_string(), name.to_string());
    let key = format!("{ns}/{name}");
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
    // Suspended (v1.14+): the operator does not act on the object at all, its deletion
    // included, until it is resumed; a resumed spec is a new generation, run then.
    if obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        info!(karmada = %name, namespace = %ns, "suspended; not reconciled");
        return;
    }
    let result = if meta_str(obj, "deletionTimestamp").is_some() {
        done.lock().remove(&key);
        if ours {
            teardown(fleet, def, &ns, &name, finalizers)
        } else {
            Ok(())
        }
    } else if !ours {
        // The finalizer and the operator's defaults, in one write (a new generation).
        let mut f = finalizers;
        f.push(FINALIZER.to_string());
        patch(
            fleet,
            def,
            &ns,
            &name,
            json!({"metadata": {"finalizers": f}, "spec": defaults(obj)}),
            false,
        )
    } else if done.lock().get(&key) != Some(&generation(obj))
        && in_flight.lock().insert(key.clone())
    {
        let (fleet, def, in_flight, done, name) = (
            fleet.clone(),
            def.clone(),
            in_flight.clone(),
            done.clone(),
            name.clone(),
        );
        tokio::spawn(async move {
            run_until_current(&fleet, &def, &ns, &name, &done).await;
            in_flight.lock().remove(&key);
        });
        Ok(())
    } else {
        Ok(())
    };
    if let Err(e) = result {
        warn!(karmada = %name, error = %e, "reconciling Karmada object");
    }
}

/// What the operator fills into a spec that leaves it out: each component's image tag.
fn defaults(obj: &Value) -> Value {
    let components: serde_json::Map<String, Value> = [
        "karmadaAggregatedAPIServer",
        "karmadaControllerManager",
        "karmadaScheduler",
        "karmadaWebhook",
        "karmadaMetricsAdapter",
    ]
    .iter()
    .filter(|c| {
        obj.pointer(&format!("/spec/components/{c}/imageTag"))
            .is_none()
    })
    .map(|c| (c.to_string(), json!({"imageTag": KARMADA_VERSION})))
    .collect();
    json!({"components": components})
}

/// Runs the install workflow until the object's generation stops moving: spec changes
/// that land during a run are picked up before the in-flight guard lets go.
async fn run_until_current(fleet: &Fleet, def: &ResourceDef, ns: &str, name: &str, done: &Done) {
    let key = format!("{ns}/{name}");
    loop {
        let obj = match fleet.host().store.get(def, Some(ns), name) {
            Ok(now)
                if done.lock().get(&key) != Some(&generation(&now.value))
                    && meta_str(&now.value, "deletionTimestamp").is_none() =>
            {
                now.value.clone()
            }
            _ => return,
        };
        let generation = generation(&obj);
        match install(fleet, def, ns, name, &obj).await {
            Ok(()) => {
                done.lock().insert(key.clone(), generation);
            }
            Err(e) => {
                warn!(karmada = %name, namespace = %ns, error = %e, "install workflow failed");
                let status =
                    json!({"status": {"conditions": [condition(false, "Failed", &e.to_string())]}});
                let _ = patch(fleet, def, ns, name, status, true);
                // The real operator requeues with backoff; the double waits for a new spec.
                done.lock().insert(key.clone(), generation);
                return;
            }
        }
    }
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

async fn install(
    fleet: &Fleet,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    obj: &Value,
) -> Result<(), crate::Error> {
    let version = wanted_version(obj);
    info!(karmada = %name, namespace = %ns, version = %version, "running the simulated install workflow");
    let progressing = json!({"status": {"conditions": [condition(false, "Progressing", "karmada init job is in progressing")]}});
    patch(fleet, def, ns, name, progressing, true)?;
    tokio::time::sleep(fleet.config().provision_delay).await;
    if let Some(url) = obj
        .pointer("/spec/crdTarball/httpSource/url")
        .and_then(Value::as_str)
    {
        // The double cannot download; it refuses what the real one could never fetch.
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(crate::Error::Invalid(format!(
                "failed to download CRD tar, err: unsupported protocol scheme in {url:?}"
            )));
        }
    }
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
    let secret_name = admin_secret_name(name);
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
    // The certificates first, generated once and then kept, as the operator keeps its
    // Secret (its admin kubeconfig comes last).
    let certs = crate::operator_certs::secret(ns, name)
        .map_err(|e| crate::Error::Invalid(format!("generating certificates: {e}")))?;
    match host.store.create(&secrets, Some(ns), certs) {
        Err(e) if e.code == 409 => {}
        other => {
            other?;
        }
    }
    match host.store.create(&secrets, Some(ns), secret.clone()) {
        Err(e) if e.code == 409 => {
            host.store
                .update(&secrets, Some(ns), &secret_name, secret, false)?;
        }
        other => {
            other?;
        }
    }
    components(fleet, ns, name, obj)?;
    let status = json!({"status": {
        "conditions": [condition(true, "Completed", "karmada init job is completed")],
        "secretRef": {"namespace": ns, "name": secret_name},
        "apiServerService": {"name": format!("{name}-karmada-apiserver"), "port": 5443},
    }});
    patch(fleet, def, ns, name, status, true)?;
    info!(karmada = %name, instance = %inst_name, version = %version, "simulated Karmada control plane ready");
    Ok(())
}

/// The version a Karmada spec asks for: its components' image tag, as karmada-operator
/// installs them (controller-manager first, then the scheduler).
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
            &admin_secret_name(name),
            Default::default(),
        ) {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
        let certs = crate::operator_certs::secret_name(name);
        match fleet
            .host()
            .store
            .delete(&secrets, Some(ns), &certs, Default::default())
        {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    for (plural, _, component, _) in COMPONENTS {
        let object = component_name(name, component);
        let pods = (0..MAX_REPLICAS).map(|i| ("", "pods", format!("{object}-{i}")));
        for (group, plural, object) in std::iter::once(("apps", plural, object.clone())).chain(pods)
        {
            if let Some(def) = fleet.host().store.lookup(group, "v1", plural) {
                match fleet
                    .host()
                    .store
                    .delete(&def, Some(ns), &object, Default::default())
                {
                    Err(e) if e.code != 404 => return Err(e),
                    _ => {}
                }
            }
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
