//! Detector and scheduler passes: each resource template claimed by a policy gets its
//! ResourceBinding (`<name>-<kind>`), scheduled into `spec.clusters`; bindings whose
//! template or policy went away are deleted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use tracing::info;

use super::detector::{self, CPP_ID, CPP_NAME, CRB_ID, PP_ID, PP_NAME, PP_NAMESPACE, RB_ID};
use super::events;
use super::graceful_eviction;
use super::members::upsert;
use super::scheduler;
use super::{skipped_namespace, Controller, CLUSTER_TEMPLATE_KINDS, TEMPLATE_KINDS};
use crate::patch::PatchKind;
use crate::store::meta::{new_uid, now_rfc3339};
use crate::store::{AsValue, Obj};
use kairship_wire::status::ApiResult;

const GROUP: &str = "work.karmada.io";
const V: &str = "v1alpha2";
/// What the last scheduling saw (placement and replicas), to reschedule only on change.
const SCHEDULED_FOR: &str = "kairship-sim.karmada.io/scheduled-for";

fn permanent_id(policy: &Value) -> String {
    let labels = &policy["metadata"]["labels"];
    labels[PP_ID]
        .as_str()
        .or(labels[CPP_ID].as_str())
        .or(policy["metadata"]["uid"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Karmada condition shape; keeps `lastTransitionTime` while the status holds.
pub fn condition(previous: &Value, kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = previous["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .filter(|c| c["status"] == status)
        .map(|c| c["lastTransitionTime"].clone())
        .unwrap_or_else(|| now_rfc3339().into());
    json!({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since})
}

pub fn run(c: &Controller) -> ApiResult<()> {
    let pps = c.list("policy.karmada.io", "v1alpha1", "propagationpolicies")?;
    let cpps = c.list(
        "policy.karmada.io",
        "v1alpha1",
        "clusterpropagationpolicies",
    )?;
    let clusters = c.list("cluster.karmada.io", "v1alpha1", "clusters")?;
    sync(
        c,
        "resourcebindings",
        TEMPLATE_KINDS,
        &pps,
        &cpps,
        &clusters,
    )?;
    // Only ClusterPropagationPolicies reach cluster-scoped templates.
    sync(
        c,
        "clusterresourcebindings",
        CLUSTER_TEMPLATE_KINDS,
        &[],
        &cpps,
        &clusters,
    )
}

/// The bindings of one kind: made for every claimed template, deleted when nothing claims.
fn sync(
    c: &Controller,
    binding_plural: &str,
    kinds: &[(&str, &str, &str)],
    pps: &[Obj],
    cpps: &[Obj],
    clusters: &[Obj],
) -> ApiResult<()> {
    let rb_def = c.def(GROUP, V, binding_plural)?;
    let existing: BTreeMap<(String, String), Obj> = c
        .list(GROUP, V, binding_plural)?
        .into_iter()
        .map(|b| {
            let key = (
                b["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                b["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            (key, b)
        })
        .collect();
    let mut wanted = BTreeSet::new();
    for (group, version, plural) in kinds {
        let Some(def) = c.store().lookup(group, version, plural) else {
            continue;
        };
        for t in c.list(group, version, plural)? {
            let ns = t["metadata"]["namespace"].as_str().unwrap_or_default();
            // Karmada's own and kube's namespaces stay put, as their contents do.
            let skipped_itself = t["kind"] == "Namespace"
                && skipped_namespace(t["metadata"]["name"].as_str().unwrap_or_default());
            if skipped_namespace(ns)
                || skipped_itself
                || !t["metadata"]["deletionTimestamp"].is_null()
            {
                continue;
            }
            let local = pps
                .iter()
                .map(AsValue::as_value)
                .filter(|p| p["metadata"]["namespace"].as_str() == Some(ns));
            let (policy, cluster_scoped) = match detector::pick(local, &t) {
                Some(p) => (p, false),
                None => match detector::pick(cpps.iter().map(AsValue::as_value), &t) {
                    Some(p) => (p, true),
                    None => continue,
                },
            };
            let name = detector::binding_name(
                t["metadata"]["name"].as_str().unwrap_or_default(),
                t["kind"].as_str().unwrap_or_default(),
            );
            let key = (ns.to_string(), name.clone());
            claim_template(c, &def, &t, policy, cluster_scoped)?;
            let null = Value::Null;
            let prev = existing.get(&key).map_or(&null, |b| &b.value);
            let binding = desired_binding(&t, policy, cluster_scoped, &name, prev);
            if upsert(c.store(), &rb_def, binding)? {
                info!(binding = %name, namespace = %ns, "resource binding synced");
            }
            schedule(c, &rb_def, ns, &name, clusters)?;
            wanted.insert(key);
        }
    }
    for (key, _) in existing.iter().filter(|(k, _)| !wanted.contains(*k)) {
        info!(binding = %key.1, namespace = %key.0, "template or policy gone; deleting binding");
        match c.store().delete(
            &rb_def,
            Some(key.0.as_str()).filter(|s| !s.is_empty()),
            &key.1,
            Default::default(),
        ) {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Marks the template as claimed, as Karmada's detector does.
fn claim_template(
    c: &Controller,
    def: &crate::resources::ResourceDef,
    t: &Value,
    policy: &Value,
    cluster_scoped: bool,
) -> ApiResult<()> {
    let id = permanent_id(policy);
    let pname = policy["metadata"]["name"].clone();
    let (labels, annotations) = if cluster_scoped {
        (json!({CPP_ID: id}), json!({CPP_NAME: pname}))
    } else {
        (
            json!({PP_ID: id}),
            json!({PP_NAME: pname, PP_NAMESPACE: policy["metadata"]["namespace"]}),
        )
    };
    let meta = &t["metadata"];
    let has = |field: &str, want: &Value| {
        want.as_object()
            .is_some_and(|w| w.iter().all(|(k, v)| &meta[field][k] == v))
    };
    if has("labels", &labels) && has("annotations", &annotations) {
        return Ok(());
    }
    let body = json!({"metadata": {"labels": labels, "annotations": annotations}});
    c.store().patch(
        def,
        meta["namespace"].as_str(),
        meta["name"].as_str().unwrap_or_default(),
        PatchKind::Merge,
        body.to_string().as_bytes(),
        false,
    )?;
    let pmeta = &policy["metadata"];
    let pname = pmeta["name"].as_str().unwrap_or_default();
    let message = match cluster_scoped {
        true => format!("Apply cluster policy({pname}) succeed"),
        false => format!(
            "Apply policy({}/{pname}) succeed",
            pmeta["namespace"].as_str().unwrap_or_default()
        ),
    };
    events::record(
        c,
        t,
        false,
        "ApplyPolicySucceed",
        &message,
        events::CONTROLLER_MANAGER,
    );
    Ok(())
}

fn desired_binding(
    t: &Value,
    policy: &Value,
    cluster_scoped: bool,
    name: &str,
    prev: &Value,
) -> Value {
    let meta = &t["metadata"];
    let id = permanent_id(policy);
    let (mut labels, annotations) = if cluster_scoped {
        (
            json!({CPP_ID: id}),
            json!({CPP_NAME: policy["metadata"]["name"]}),
        )
    } else {
        (
            json!({PP_ID: id}),
            json!({PP_NAME: policy["metadata"]["name"], PP_NAMESPACE: policy["metadata"]["namespace"]}),
        )
    };
    let namespaced = !meta["namespace"].as_str().unwrap_or_default().is_empty();
    let id_label = if namespaced { RB_ID } else { CRB_ID };
    let rb_id = prev["metadata"]["labels"][id_label]
        .as_str()
        .map(String::from)
        .unwrap_or_else(new_uid);
    labels[id_label] = rb_id.into();
    let mut annotations = annotations;
    if let Some(s) = prev["metadata"]["annotations"][SCHEDULED_FOR].as_str() {
        annotations[SCHEDULED_FOR] = s.into();
    }
    let placement = policy["spec"]["placement"].clone();
    let mut spec = json!({
        "resource": {
            "apiVersion": t["apiVersion"], "kind": t["kind"],
            "namespace": meta["namespace"], "name": meta["name"],
            "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
        },
        "replicas": detector::replicas(t),
        "placement": placement,
        "schedulerName": policy["spec"]["schedulerName"].as_str().unwrap_or("default-scheduler"),
        "conflictResolution": policy["spec"]["conflictResolution"].as_str().unwrap_or("Abort"),
    });
    if let Some(r) = detector::replica_requirements(t) {
        spec["replicaRequirements"] = r;
    }
    if let Some(f) = policy["spec"]["failover"].as_object() {
        spec["failover"] = Value::Object(f.clone());
    }
    if !prev["spec"]["clusters"].is_null() {
        spec["clusters"] = prev["spec"]["clusters"].clone();
    }
    if !prev["spec"]["gracefulEvictionTasks"].is_null() {
        spec["gracefulEvictionTasks"] = prev["spec"]["gracefulEvictionTasks"].clone();
    }
    let mut metadata = json!({"name": name, "labels": labels, "annotations": annotations});
    if namespaced {
        metadata["namespace"] = meta["namespace"].clone();
    }
    json!({
        "apiVersion": format!("{GROUP}/{V}"),
        "kind": if namespaced { "ResourceBinding" } else { "ClusterResourceBinding" },
        "metadata": metadata,
        "spec": spec,
    })
}

/// Whether a cluster can keep what it holds: still in the affinity and no NoExecute taint.
fn still_fits(placement: &Value, cluster: &Value) -> bool {
    let affinity = &placement["clusterAffinity"];
    let affinity_ok = affinity.is_null() || scheduler::affinity_matches(affinity, cluster);
    affinity_ok && !super::failover::evicts(placement, cluster)
}

/// Schedules a binding when its placement or replicas changed, or a cluster it uses can no
/// longer keep its replicas; otherwise the assignment stays (as Karmada's does).
fn schedule(
    c: &Controller,
    def: &crate::resources::ResourceDef,
    ns: &str,
    name: &str,
    clusters: &[Obj],
) -> ApiResult<()> {
    let ns = Some(ns).filter(|s| !s.is_empty());
    let b = c.store().get(def, ns, name)?.value.clone();
    let spec = &b["spec"];
    let placement = &spec["placement"];
    let replicas = spec["replicas"].as_i64().unwrap_or(0);
    let fingerprint = json!({"placement": placement, "replicas": replicas, "requirements": spec["replicaRequirements"]}).to_string();
    let previous: BTreeMap<String, i64> = spec["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["name"].as_str()?.to_string(),
                t["replicas"].as_i64().unwrap_or(0),
            ))
        })
        .collect();
    let by_name = |n: &str| clusters.iter().find(|c| c["metadata"]["name"] == n);
    let holds = !previous.is_empty()
        && b["metadata"]["annotations"][SCHEDULED_FOR].as_str() == Some(fingerprint.as_str())
        && previous
            .keys()
            .all(|n| by_name(n).is_some_and(|cl| still_fits(placement, cl)));
    if holds {
        return Ok(());
    }
    let generation = b["metadata"]["generation"].clone();
    let result = scheduler::schedule(
        placement,
        replicas,
        spec["replicaRequirements"]
            .as_object()
            .map(|_| &spec["replicaRequirements"]),
        clusters,
        &previous,
    );
    let (targets, cond) = match result {
        Ok(ts) => {
            let targets: Vec<Value> = ts
                .iter()
                .map(|t| match t.replicas {
                    Some(r) => json!({"name": t.name, "replicas": r}),
                    None => json!({"name": t.name}),
                })
                .collect();
            (
                Value::Array(targets),
                condition(
                    &b,
                    "Scheduled",
                    true,
                    "Success",
                    "Binding has been scheduled successfully.",
                ),
            )
        }
        Err(msg) => (
            // Karmada keeps the last result when nothing fits.
            spec["clusters"].clone(),
            condition(&b, "Scheduled", false, "NoClusterFit", &msg),
        ),
    };
    let ok = cond["status"] == "True";
    let unchanged = b["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|x| x["type"] == "Scheduled"))
        .is_some_and(|x| x["status"] == cond["status"] && x["message"] == cond["message"]);
    if !ok && unchanged {
        return Ok(());
    }
    let mut body = json!({
        "metadata": {"annotations": {SCHEDULED_FOR: if ok { Value::from(fingerprint) } else { Value::Null }}},
        "spec": {"clusters": targets},
    });
    if let Some(tasks) = graceful_eviction::with_evicted(spec, &previous, clusters) {
        body["spec"]["gracefulEvictionTasks"] = tasks;
    }
    c.store().patch(
        def,
        ns,
        name,
        PatchKind::Merge,
        body.to_string().as_bytes(),
        false,
    )?;
    let mut conditions: Vec<Value> = b["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|x| x["type"] != "Scheduled")
        .collect();
    let failure = cond["message"].as_str().unwrap_or_default().to_string();
    conditions.push(cond);
    let status = json!({"status": {"schedulerObservedGeneration": generation, "conditions": conditions,
        "lastScheduledTime": now_rfc3339()}});
    c.store().patch(
        def,
        ns,
        name,
        PatchKind::Merge,
        status.to_string().as_bytes(),
        true,
    )?;
    info!(binding = %name, namespace = ns.unwrap_or_default(), clusters = %body["spec"]["clusters"], scheduled = ok, "binding scheduled");
    let (reason, message) = match ok {
        true => (
            "ScheduleBindingSucceed",
            format!(
                "Binding has been scheduled successfully. Result: {{{}}}",
                events::targets(&body["spec"]["clusters"])
            ),
        ),
        false => ("ScheduleBindingFailed", failure),
    };
    events::record(c, &b, !ok, reason, &message, events::SCHEDULER);
    if ok {
        // Karmada tells the resource template too.
        events::record(
            c,
            &b["spec"]["resource"],
            false,
            reason,
            &message,
            events::SCHEDULER,
        );
    }
    Ok(())
}
