//! Karmada's job in a simulated instance, in Karmada's own shapes: the resource detector
//! turns policy-selected templates into ResourceBindings, the scheduler fills their
//! `spec.clusters`, execution writes one Work per target cluster (in
//! `karmada-es-<cluster>`, overrides applied), and status aggregation reports the members'
//! progress in the binding and the template. Decisions are pure functions
//! ([`detector`], [`scheduler`], [`overrides`]); this module reads and writes the store.
//!
//! Not simulated: member clusters' own object stores (a Work stands for what the member
//! runs), ClusterResourceBindings for cluster-scoped templates, failover, preemption.

pub mod detector;
pub mod overrides;
pub mod scheduler;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::resources::ResourceDef;
use crate::server::ApiServer;
use crate::store::{Filter, Store};
use scheduler::ClusterInfo;

/// Timing of the simulated control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneConfig {
    /// How long a member takes to report a Work's replicas ready.
    pub ready_delay: Duration,
    /// Reconciles at least this often (readiness becomes due without any event).
    pub resync: Duration,
}

impl Default for ControlPlaneConfig {
    fn default() -> Self {
        Self {
            ready_delay: Duration::from_secs(2),
            resync: Duration::from_millis(500),
        }
    }
}

/// Runs the control plane of `server` until the task is aborted.
pub fn start(server: Arc<ApiServer>, config: ControlPlaneConfig) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = server.store.subscribe();
        let mut seen: HashMap<String, Instant> = HashMap::new();
        loop {
            // An event or the resync period, whichever first; then let a burst settle.
            let _ = tokio::time::timeout(config.resync, events.recv()).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            while events.try_recv().is_ok() {}
            if let Err(e) = reconcile(&server.store, &config, &mut seen) {
                tracing::debug!(instance = %server.name, error = %e, "karmada control plane");
            }
        }
    })
}

fn def(store: &Store, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
    store.lookup(group, version, plural)
}

fn list(store: &Store, d: &Option<Arc<ResourceDef>>) -> Vec<Value> {
    d.as_ref()
        .and_then(|d| store.list(d, &Filter::default(), None, None).ok())
        .map(|p| p.items.iter().map(|o| o.value.clone()).collect())
        .unwrap_or_default()
}

fn meta<'a>(o: &'a Value, k: &str) -> &'a str {
    o["metadata"][k].as_str().unwrap_or_default()
}

fn cluster_info(c: &Value) -> ClusterInfo {
    let ready = c["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|x| x["type"] == "Ready" && x["status"] == "True");
    let q = |k: &str| {
        c["status"]["resourceSummary"][k]["pods"]
            .as_str()
            .and_then(|p| p.parse::<i64>().ok())
            .unwrap_or(0)
    };
    ClusterInfo {
        name: meta(c, "name").to_string(),
        ready,
        labels: c["metadata"]["labels"].clone(),
        provider: c["spec"]["provider"].as_str().unwrap_or_default().into(),
        region: c["spec"]["region"].as_str().unwrap_or_default().into(),
        zone: c["spec"]["zone"].as_str().unwrap_or_default().into(),
        taints: c["spec"]["taints"].as_array().cloned().unwrap_or_default(),
        available: (q("allocatable") - q("allocated")).max(0),
    }
}

/// FNV-1a, for stable Work names.
fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:010x}", h & 0xff_ffff_ffff)
}

/// Creates `obj`, or updates it (its spec, or with `status` its status) when it differs.
fn upsert(store: &Store, d: &ResourceDef, obj: Value, status: bool) -> Result<(), String> {
    let ns = obj["metadata"]["namespace"].as_str().map(String::from);
    let name = meta(&obj, "name").to_string();
    match store.get(d, ns.as_deref(), &name) {
        Err(_) => store
            .create(d, ns.as_deref(), obj)
            .map(|_| ())
            .map_err(|e| e.message),
        Ok(cur) => {
            let mut next = cur.value.clone();
            let changed = if status {
                next["status"] != obj["status"] && {
                    next["status"] = obj["status"].clone();
                    true
                }
            } else {
                let mut c = false;
                for k in ["spec"] {
                    if next[k] != obj[k] {
                        next[k] = obj[k].clone();
                        c = true;
                    }
                }
                for k in ["labels", "annotations"] {
                    if !obj["metadata"][k].is_null() && next["metadata"][k] != obj["metadata"][k] {
                        next["metadata"][k] = obj["metadata"][k].clone();
                        c = true;
                    }
                }
                c
            };
            if !changed {
                return Ok(());
            }
            store
                .update(d, ns.as_deref(), &name, next, status)
                .map(|_| ())
                .map_err(|e| e.message)
        }
    }
}

/// The template's replica count, for kinds that have one.
fn replicas_of(t: &Value) -> i64 {
    match t["kind"].as_str() {
        Some("Deployment" | "StatefulSet" | "ReplicaSet") => {
            t["spec"]["replicas"].as_i64().unwrap_or(1)
        }
        Some("Job") => t["spec"]["parallelism"].as_i64().unwrap_or(1),
        _ => 0,
    }
}

/// What a member sends back for a workload running `replicas` (ready once due).
fn member_status(kind: &str, replicas: i64, ready: bool) -> Value {
    let r = if ready { replicas } else { 0 };
    match kind {
        "Deployment" | "StatefulSet" => json!({"replicas": replicas, "readyReplicas": r,
            "availableReplicas": r, "updatedReplicas": replicas, "observedGeneration": 1}),
        "Job" => json!({"active": replicas - r, "succeeded": r}),
        _ => json!({}),
    }
}

/// The template's status as Karmada's default interpreter aggregates it.
fn aggregate(kind: &str, generation: i64, parts: &[Value]) -> Option<Value> {
    let sum = |k: &str| {
        parts
            .iter()
            .map(|p| p[k].as_i64().unwrap_or(0))
            .sum::<i64>()
    };
    match kind {
        "Deployment" | "StatefulSet" => Some(json!({"observedGeneration": generation,
            "replicas": sum("replicas"), "readyReplicas": sum("readyReplicas"),
            "availableReplicas": sum("availableReplicas"), "updatedReplicas": sum("updatedReplicas")})),
        "Job" => Some(json!({"active": sum("active"), "succeeded": sum("succeeded")})),
        _ => None,
    }
}

fn condition(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": crate::store::meta::now_rfc3339()})
}

/// Keeps an existing condition's transition time while its status holds.
fn keep_times(new: &mut [Value], old: &Value) {
    for c in new.iter_mut() {
        if let Some(prev) = old
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["type"] == c["type"])
        {
            if prev["status"] == c["status"] {
                c["lastTransitionTime"] = prev["lastTransitionTime"].clone();
            }
        }
    }
}

fn reconcile(
    store: &Store,
    config: &ControlPlaneConfig,
    seen: &mut HashMap<String, Instant>,
) -> Result<(), String> {
    let pol = "policy.karmada.io";
    let pps = list(store, &def(store, pol, "v1alpha1", "propagationpolicies"));
    let cpps = list(
        store,
        &def(store, pol, "v1alpha1", "clusterpropagationpolicies"),
    );
    if pps.is_empty() && cpps.is_empty() {
        return Ok(());
    }
    let ops = list(store, &def(store, pol, "v1alpha1", "overridepolicies"));
    let cops = list(
        store,
        &def(store, pol, "v1alpha1", "clusteroverridepolicies"),
    );
    let clusters: Vec<ClusterInfo> = list(
        store,
        &def(store, "cluster.karmada.io", "v1alpha1", "clusters"),
    )
    .iter()
    .map(cluster_info)
    .collect();
    let (Some(rb_def), Some(work_def), Some(ns_def)) = (
        def(store, "work.karmada.io", "v1alpha2", "resourcebindings"),
        def(store, "work.karmada.io", "v1alpha1", "works"),
        def(store, "", "v1", "namespaces"),
    ) else {
        return Ok(());
    };
    // Every kind a policy selects, found in the registry by apiVersion and kind.
    let mut kinds: BTreeMap<(String, String), Arc<ResourceDef>> = BTreeMap::new();
    let registry = store.registry();
    for p in pps.iter().chain(&cpps) {
        for sel in p["spec"]["resourceSelectors"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (av, kind) = (
                sel["apiVersion"].as_str().unwrap_or_default(),
                sel["kind"].as_str().unwrap_or_default(),
            );
            let (group, version) = av.split_once('/').unwrap_or(("", av));
            if let Some(d) = registry.all().find(|d| {
                d.group == group
                    && d.kind == kind
                    && d.versions.iter().any(|v| v == version)
                    && d.namespaced
            }) {
                kinds.insert((av.to_string(), kind.to_string()), d.clone());
            }
        }
    }
    let pp_refs: Vec<&Value> = pps.iter().collect();
    let cpp_refs: Vec<&Value> = cpps.iter().collect();
    let op_refs: Vec<&Value> = ops.iter().collect();
    let cop_refs: Vec<&Value> = cops.iter().collect();
    let now = Instant::now();
    let mut live_works: std::collections::HashSet<String> = Default::default();
    for ((av, kind), tdef) in &kinds {
        let (_, version) = av.split_once('/').unwrap_or(("", av));
        for mut template in list(store, &Some(tdef.clone())) {
            if !template["metadata"]["deletionTimestamp"].is_null() {
                continue;
            }
            template["apiVersion"] = json!(av);
            let Some(i) = detector::choose(&pp_refs, &cpp_refs, &template) else {
                continue;
            };
            let cluster_wide = i >= pp_refs.len();
            let policy = if cluster_wide {
                cpp_refs[i - pp_refs.len()]
            } else {
                pp_refs[i]
            };
            let (tns, tname) = (
                meta(&template, "namespace").to_string(),
                meta(&template, "name").to_string(),
            );
            let binding_name = format!("{tname}-{}", kind.to_lowercase());
            let replicas = replicas_of(&template);
            let placement = policy["spec"]["placement"].clone();
            let scheduled = scheduler::schedule(&placement, replicas, &clusters);
            let targets = scheduled.clone().unwrap_or_default();
            let prefix = if cluster_wide {
                "clusterpropagationpolicy"
            } else {
                "propagationpolicy"
            };
            let mut annotations =
                json!({format!("{prefix}.karmada.io/name"): meta(policy, "name")});
            if !cluster_wide {
                annotations["propagationpolicy.karmada.io/namespace"] =
                    json!(meta(policy, "namespace"));
            }
            let binding = json!({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
                "metadata": {"name": binding_name, "namespace": tns,
                    "labels": {format!("{prefix}.karmada.io/permanent-id"): meta(policy, "uid")},
                    "annotations": annotations,
                    "ownerReferences": [{"apiVersion": av, "kind": kind, "name": tname, "uid": meta(&template, "uid"), "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"resource": {"apiVersion": av, "kind": kind, "namespace": tns, "name": tname,
                            "uid": meta(&template, "uid"), "resourceVersion": meta(&template, "resourceVersion")},
                         "replicas": replicas, "placement": placement, "schedulerName": "default-scheduler",
                         "conflictResolution": policy["spec"]["conflictResolution"].as_str().unwrap_or("Abort"),
                         "clusters": targets.iter().map(|(n, r)| if replicas > 0 { json!({"name": n, "replicas": r}) } else { json!({"name": n}) }).collect::<Vec<_>>()}});
            upsert(store, &rb_def, binding, false)?;

            // Execution: one Work per target cluster, with the replicas and overrides for it.
            let mut parts = Vec::new();
            let mut aggregated = Vec::new();
            for (cluster, r) in &targets {
                let es = format!("karmada-es-{cluster}");
                if store.get(&ns_def, None, &es).is_err() {
                    let _ = store.create(
                        &ns_def,
                        None,
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": es}}),
                    );
                }
                let mut manifest = template.clone();
                manifest["apiVersion"] = json!(av);
                if let Some(m) = manifest["metadata"].as_object_mut() {
                    for k in [
                        "uid",
                        "resourceVersion",
                        "generation",
                        "creationTimestamp",
                        "managedFields",
                        "ownerReferences",
                        "deletionTimestamp",
                        "finalizers",
                    ] {
                        m.remove(k);
                    }
                }
                if let Some(o) = manifest.as_object_mut() {
                    o.remove("status");
                }
                if replicas > 0 && kind != "Job" {
                    manifest["spec"]["replicas"] = json!(r);
                }
                let info = clusters.iter().find(|c| &c.name == cluster).cloned();
                if let Some(info) = &info {
                    overrides::apply(&mut manifest, &template, info, &cop_refs, &op_refs);
                }
                let work_name = format!("{tname}-{}", short_hash(&format!("{tns}/{binding_name}")));
                let key = format!("{es}/{work_name}");
                live_works.insert(key.clone());
                let first = *seen.entry(key).or_insert(now);
                let ready = now.duration_since(first) >= config.ready_delay;
                let status = member_status(kind, *r, ready);
                let work = json!({"apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                    "metadata": {"name": &work_name, "namespace": &es,
                        "labels": {"resourcebinding.karmada.io/permanent-id": meta(&template, "uid")},
                        "annotations": {"resourcebinding.karmada.io/name": binding_name, "resourcebinding.karmada.io/namespace": tns}},
                    "spec": {"workload": {"manifests": [manifest]}}});
                upsert(store, &work_def, work, false)?;
                let health = if ready { "Healthy" } else { "Unhealthy" };
                let mut wstatus = json!({"conditions": [condition("Applied", true, "AppliedSuccessful", "Manifest has been successfully applied")],
                    "manifestStatuses": [{"identifier": {"ordinal": 0, "group": tdef.group, "version": version, "kind": kind, "namespace": tns, "name": tname},
                                          "status": status, "health": health}]});
                if let Ok(cur) = store.get(&work_def, Some(&es), &work_name) {
                    if let Some(conds) = wstatus["conditions"].as_array_mut() {
                        keep_times(conds, &cur.value["status"]["conditions"]);
                    }
                }
                upsert(
                    store,
                    &work_def,
                    json!({"metadata": {"name": work_name, "namespace": es}, "status": wstatus}),
                    true,
                )?;
                aggregated.push(json!({"clusterName": cluster, "applied": true, "health": health, "status": status}));
                parts.push(status);
            }
            // Status of the binding and of the template.
            let cur = store
                .get(&rb_def, Some(&tns), &binding_name)
                .map_err(|e| e.message)?;
            let mut conds = vec![match &scheduled {
                Ok(_) => condition(
                    "Scheduled",
                    true,
                    "Success",
                    "Binding has been scheduled successfully.",
                ),
                Err(why) => condition("Scheduled", false, "NoClusterFit", why),
            }];
            conds.push(condition(
                "FullyApplied",
                !targets.is_empty(),
                if targets.is_empty() {
                    "NoTarget"
                } else {
                    "FullyAppliedSuccess"
                },
                if targets.is_empty() {
                    "No target cluster"
                } else {
                    "All works have been successfully applied"
                },
            ));
            keep_times(&mut conds, &cur.value["status"]["conditions"]);
            let rb_status = json!({"schedulerObservedGeneration": cur.value["metadata"]["generation"], "conditions": conds, "aggregatedStatus": aggregated});
            upsert(
                store,
                &rb_def,
                json!({"metadata": {"name": binding_name, "namespace": tns}, "status": rb_status}),
                true,
            )?;
            let generation = template["metadata"]["generation"].as_i64().unwrap_or(1);
            if let Some(agg) = aggregate(kind, generation, &parts) {
                let mut t = json!({"metadata": {"name": tname, "namespace": tns}, "status": agg});
                t["status"]["conditions"] = template["status"]["conditions"].clone();
                if t["status"]["conditions"].is_null() {
                    if let Some(o) = t["status"].as_object_mut() {
                        o.remove("conditions");
                    }
                }
                upsert(store, tdef, t, true)?;
            }
        }
    }
    // Works for clusters a binding no longer targets are removed (the member's object with them).
    for w in list(store, &Some(work_def.clone())) {
        if w["metadata"]["annotations"]["resourcebinding.karmada.io/name"].is_null() {
            continue;
        }
        let key = format!("{}/{}", meta(&w, "namespace"), meta(&w, "name"));
        if !live_works.contains(&key) {
            let _ = store.delete(
                &work_def,
                Some(meta(&w, "namespace")),
                meta(&w, "name"),
                Default::default(),
            );
            seen.remove(&key);
        }
    }
    Ok(())
}
