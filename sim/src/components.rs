//! A managed control plane's components in the host: the Deployments and etcd's
//! StatefulSet karmada-operator keeps (`operator`), their pods (which run nothing), and
//! the host's own Deployment and StatefulSet controllers for them ([`follow_replicas`]):
//! when someone other than the operator changes a component's replicas (Kairship putting
//! the instance to sleep), its pods and status follow, as kube-controller-manager's would.
//! An instance is down while its karmada-apiserver has no pod, up once it has one.

use serde_json::{json, Value};
use tracing::{info, warn};

use crate::faults::{Fault, FaultMode};
use crate::fleet::Fleet;
use crate::store::meta::{meta_str, now_rfc3339};
use crate::store::{EventType, Filter, WatchFrom};

/// The Deployments (and etcd's StatefulSet) the real operator runs for a control plane,
/// named and labelled as it names them, at `version`, with the replicas the Karmada spec
/// asks for (at its pointer; 1 by default), every replica ready.
pub(crate) const COMPONENTS: [(&str, &str, &str, &str); 6] = [
    (
        "statefulsets",
        "StatefulSet",
        "etcd",
        "/spec/components/etcd/local",
    ),
    (
        "deployments",
        "Deployment",
        "karmada-apiserver",
        "/spec/components/karmadaAPIServer",
    ),
    (
        "deployments",
        "Deployment",
        "karmada-aggregated-apiserver",
        "/spec/components/karmadaAggregatedAPIServer",
    ),
    (
        "deployments",
        "Deployment",
        "karmada-controller-manager",
        "/spec/components/karmadaControllerManager",
    ),
    (
        "deployments",
        "Deployment",
        "karmada-scheduler",
        "/spec/components/karmadaScheduler",
    ),
    (
        "deployments",
        "Deployment",
        "karmada-webhook",
        "/spec/components/karmadaWebhook",
    ),
];
/// More pods than any component may have (karmada_spec's bound), for removing surplus.
pub(crate) const MAX_REPLICAS: i64 = 10;

pub(crate) fn component_name(instance: &str, component: &str) -> String {
    format!("{instance}-{component}")
}

pub(crate) fn components(
    fleet: &Fleet,
    ns: &str,
    name: &str,
    karmada: &Value,
) -> Result<(), crate::Error> {
    let version = crate::operator::wanted_version(karmada);
    let host = fleet.host();
    for (plural, kind, component, at) in COMPONENTS {
        let replicas = karmada
            .pointer(&format!("{at}/replicas"))
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .clamp(0, MAX_REPLICAS);
        let def = host
            .store
            .lookup("apps", "v1", plural)
            .ok_or_else(|| crate::Error::Invalid(format!("{plural} are not served")))?;
        let object = component_name(name, component);
        let labels = json!({
            "app.kubernetes.io/managed-by": "karmada-operator",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/name": component,
        });
        // The operator gives each container the resources its component's spec names.
        let mut container = json!({"name": component});
        if let Some(r) = karmada.pointer(&format!("{at}/resources")) {
            container["resources"] = r.clone();
        }
        let image = match component {
            "etcd" => "registry.k8s.io/etcd:3.5.16-0".to_string(),
            "karmada-apiserver" => "registry.k8s.io/kube-apiserver:v1.31.3".to_string(),
            c => format!("docker.io/karmada/{c}:{version}"),
        };
        container["image"] = json!(image);
        let obj = json!({
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": object, "namespace": ns, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app.kubernetes.io/name": component, "app.kubernetes.io/instance": name}},
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/name": component, "app.kubernetes.io/instance": name}},
                    "spec": {"containers": [container.clone()]},
                },
            },
        });
        let stored = match host.store.create(&def, Some(ns), obj.clone()) {
            Err(e) if e.code == 409 => host.store.update(&def, Some(ns), &object, obj, false)?,
            other => other?,
        };
        let mut ready = unconditional(&stored.value);
        ready["status"] = ready_status(stored.value["metadata"]["generation"].as_i64(), replicas);
        host.store.update(&def, Some(ns), &object, ready, true)?;
        if component == "karmada-apiserver" {
            apiserver_scaled(fleet, ns, name, replicas);
        }
        for index in 0..MAX_REPLICAS {
            let pod = format!("{}-{index}", component_name(name, component));
            match index < replicas {
                true => component_pod(fleet, ns, name, component, &pod, &container)?,
                false => remove_pod(fleet, ns, &pod)?,
            }
        }
    }
    Ok(())
}

pub(crate) fn remove_pod(fleet: &Fleet, ns: &str, pod: &str) -> Result<(), crate::Error> {
    let host = fleet.host();
    let def = host
        .store
        .lookup("", "v1", "pods")
        .ok_or_else(|| crate::Error::Invalid("pods are not served".into()))?;
    match host.store.delete(&def, Some(ns), pod, Default::default()) {
        Err(e) if e.code == 404 => Ok(()),
        other => other.map(drop).map_err(Into::into),
    }
}

/// One Running, ready Pod behind a component, named `pod`.
fn component_pod(
    fleet: &Fleet,
    ns: &str,
    name: &str,
    component: &str,
    pod: &str,
    container: &Value,
) -> Result<(), crate::Error> {
    let host = fleet.host();
    let def = host
        .store
        .lookup("", "v1", "pods")
        .ok_or_else(|| crate::Error::Invalid("pods are not served".into()))?;
    let now = now_rfc3339();
    let obj = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod, "namespace": ns, "labels": {
            "app.kubernetes.io/name": component, "app.kubernetes.io/instance": name}},
        "spec": {"nodeName": "host-node-0", "containers": [container]},
    });
    let stored = match host.store.create(&def, Some(ns), obj.clone()) {
        Err(e) if e.code == 409 => return Ok(()),
        other => other?,
    };
    let mut running = stored.value.clone();
    running["status"] = json!({
        "phase": "Running", "startTime": now, "podIP": "10.244.0.10",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": component, "image": container["image"], "ready": true, "started": true,
            "restartCount": 0, "state": {"running": {"startedAt": now}}}],
    });
    host.store.update(&def, Some(ns), pod, running, true)?;
    Ok(())
}

/// The label karmada-operator puts on what it runs.
const MANAGED_BY: &str = "karmada-operator";

/// Follows replicas changed outside the operator until the fleet stops.
pub async fn follow_replicas(fleet: Fleet) {
    let host = fleet.host().clone();
    loop {
        let (Some(deployments), Some(sets)) = (
            host.store.lookup("apps", "v1", "deployments"),
            host.store.lookup("apps", "v1", "statefulsets"),
        ) else {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        };
        // The store's live channel carries every kind; the initial list is of one.
        let Ok(start) = host
            .store
            .watch(&deployments, &Filter::default(), WatchFrom::Current)
        else {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            continue;
        };
        for ev in start.initial {
            follow(&fleet, &ev.object.value);
        }
        let keys = [deployments.key(), sets.key()];
        let mut live = start.live;
        loop {
            match live.recv().await {
                Ok(ev)
                    if ev.kind != EventType::Deleted && keys.iter().any(|k| *k == *ev.resource) =>
                {
                    follow(&fleet, &ev.object.value)
                }
                Ok(_) => {}
                // Fell behind: start over from the current state.
                Err(_) => break,
            }
        }
    }
}

/// One component whose spec moved past its status: its pods and status brought to its
/// replicas.
fn follow(fleet: &Fleet, obj: &Value) {
    let label = |k: &str| {
        obj.pointer(&format!("/metadata/labels/{}", k.replace('/', "~1")))
            .and_then(Value::as_str)
    };
    if label("app.kubernetes.io/managed-by") != Some(MANAGED_BY) {
        return;
    }
    let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
    if obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        == generation
    {
        return;
    }
    let (Some(ns), Some(object), Some(component), Some(instance)) = (
        meta_str(obj, "namespace"),
        meta_str(obj, "name"),
        label("app.kubernetes.io/name"),
        label("app.kubernetes.io/instance"),
    ) else {
        return;
    };
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .clamp(0, MAX_REPLICAS);
    let container = obj
        .pointer("/spec/template/spec/containers/0")
        .cloned()
        .unwrap_or_else(|| json!({"name": component}));
    let plural = match obj.get("kind").and_then(Value::as_str) {
        Some("StatefulSet") => "statefulsets",
        _ => "deployments",
    };
    let result = (|| -> Result<(), crate::Error> {
        for index in 0..MAX_REPLICAS {
            let pod = format!("{object}-{index}");
            match index < replicas {
                true => component_pod(fleet, ns, instance, component, &pod, &container)?,
                false => remove_pod(fleet, ns, &pod)?,
            }
        }
        let host = fleet.host();
        let def = host
            .store
            .lookup("apps", "v1", plural)
            .ok_or_else(|| crate::Error::Invalid(format!("{plural} are not served")))?;
        let mut ready = unconditional(obj);
        ready["status"] = ready_status(generation, replicas);
        host.store.update(&def, Some(ns), object, ready, true)?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            info!(namespace = %ns, object = %object, replicas, "component scaled");
            if component == "karmada-apiserver" {
                apiserver_scaled(fleet, ns, instance, replicas);
            }
        }
        Err(e) => {
            warn!(namespace = %ns, object = %object, error = %e, "following a component's replicas")
        }
    }
}

/// `obj` without its resourceVersion: the operator and the host's controllers both write a
/// component's status (each as it last saw it), and a conflict between two writes of the
/// same figures failed the operator's install workflow.
fn unconditional(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    obj
}

fn ready_status(generation: Option<i64>, replicas: i64) -> Value {
    json!({
        "observedGeneration": generation,
        "replicas": replicas, "readyReplicas": replicas, "updatedReplicas": replicas,
        "availableReplicas": replicas,
    })
}

/// The simulated instance behind the Karmada object `ns/name` is down with no
/// karmada-apiserver pod, and up again (a fault set by hand left alone) with one.
fn apiserver_scaled(fleet: &Fleet, ns: &str, name: &str, replicas: i64) {
    let Some(inst) = fleet
        .instances()
        .into_iter()
        .find(|i| i.managed_by.as_ref() == Some(&(ns.to_string(), name.to_string())))
    else {
        return;
    };
    let down = Fault {
        mode: FaultMode::Down,
        latency_ms: None,
        error_rate: None,
    };
    let faults = &inst.server.faults;
    match (replicas, faults.current()) {
        (0, None) => faults.set(Some(down)),
        (1.., Some(f)) if f == down => faults.set(None),
        _ => {}
    }
}
