//! Member workloads becoming ready after a delay, and status aggregation: each binding's
//! `aggregatedStatus` and `FullyApplied` condition from its Works, and the resource
//! template's status summed as Karmada's default resource interpreter does.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::binding::condition;
use super::execution::{execution_namespace, work_name};
use super::members::def_for;
use super::Controller;
use crate::patch::PatchKind;
use crate::store::Filter;
use kairship_wire::status::ApiResult;

/// When each member object generation was first seen unready.
#[derive(Default)]
pub struct ReadyClock(Mutex<HashMap<String, Instant>>);

fn wanted(obj: &Value) -> i64 {
    match obj["kind"].as_str() {
        Some("Job") => obj["spec"]["parallelism"].as_i64().unwrap_or(1),
        _ => obj["spec"]["replicas"].as_i64().unwrap_or(1),
    }
}

/// Whether a member workload reports itself ready for its current generation.
pub fn member_ready(obj: &Value) -> bool {
    let st = &obj["status"];
    match obj["kind"].as_str() {
        Some("Deployment") | Some("StatefulSet") => {
            st["observedGeneration"] == obj["metadata"]["generation"]
                && st["readyReplicas"].as_i64().unwrap_or(0) == wanted(obj)
        }
        Some("Job") => st["succeeded"].as_i64().is_some_and(|s| s >= 1),
        _ => true,
    }
}

fn ready_status(obj: &Value) -> Value {
    let n = wanted(obj);
    let generation = obj["metadata"]["generation"].clone();
    match obj["kind"].as_str() {
        Some("Deployment") => json!({
            "observedGeneration": generation, "replicas": n, "readyReplicas": n,
            "updatedReplicas": n, "availableReplicas": n,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability."}],
        }),
        Some("StatefulSet") => json!({
            "observedGeneration": generation, "replicas": n, "readyReplicas": n,
            "currentReplicas": n, "updatedReplicas": n, "availableReplicas": n,
        }),
        _ => json!({
            "succeeded": n, "active": 0, "ready": 0,
            "conditions": [{"type": "Complete", "status": "True"}],
        }),
    }
}

/// Marks member workloads ready once they have been unready for `ready_delay`.
fn settle_members(c: &Controller) -> ApiResult<()> {
    let now = Instant::now();
    let mut seen = HashMap::new();
    for cluster in c.members.names() {
        let member = c.members.store(&cluster)?;
        for (group, plural) in [
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
        ] {
            let Some(def) = member.lookup(group, "v1", plural) else {
                continue;
            };
            for obj in member.list(&def, &Filter::default(), None, None)?.items {
                if member_ready(&obj.value) {
                    continue;
                }
                let key = format!(
                    "{cluster}/{plural}/{}/{}/{}",
                    obj.namespace(),
                    obj.name(),
                    obj.value["metadata"]["generation"]
                );
                let since = c.ready.0.lock().get(&key).copied().unwrap_or(now);
                if now.duration_since(since) >= c.config.ready_delay {
                    let body = json!({"status": ready_status(&obj.value)});
                    member.patch(
                        &def,
                        Some(obj.namespace()),
                        obj.name(),
                        PatchKind::Merge,
                        body.to_string().as_bytes(),
                        true,
                    )?;
                } else {
                    seen.insert(key, since);
                }
            }
        }
    }
    if !seen.is_empty() {
        c.wait_for_clock();
    }
    *c.ready.0.lock() = seen;
    Ok(())
}

/// Sums the replica counters of the members' statuses into the template's status.
pub fn aggregate_template(kind: &str, members: &[&Value], generation: &Value) -> Option<Value> {
    let sum = |k: &str| {
        members
            .iter()
            .map(|s| s[k].as_i64().unwrap_or(0))
            .sum::<i64>()
    };
    match kind {
        "Deployment" => Some(json!({
            "observedGeneration": generation,
            "replicas": sum("replicas"), "readyReplicas": sum("readyReplicas"),
            "updatedReplicas": sum("updatedReplicas"), "availableReplicas": sum("availableReplicas"),
            "unavailableReplicas": sum("unavailableReplicas"),
        })),
        "StatefulSet" => Some(json!({
            "observedGeneration": generation,
            "replicas": sum("replicas"), "readyReplicas": sum("readyReplicas"),
            "currentReplicas": sum("currentReplicas"), "updatedReplicas": sum("updatedReplicas"),
            "availableReplicas": sum("availableReplicas"),
        })),
        "Job" => Some(
            json!({"active": sum("active"), "succeeded": sum("succeeded"), "failed": sum("failed")}),
        ),
        _ => None,
    }
}

pub fn run(c: &Controller) -> ApiResult<()> {
    settle_members(c)?;
    let work_def = c.def("work.karmada.io", "v1alpha1", "works")?;
    for plural in super::BINDING_PLURALS {
        let rb_def = c.def("work.karmada.io", "v1alpha2", plural)?;
        for b in c.list("work.karmada.io", "v1alpha2", plural)? {
            aggregate(c, &rb_def, &work_def, &b)?;
        }
    }
    Ok(())
}

/// One binding's `aggregatedStatus` and `FullyApplied`, and its template's status.
fn aggregate(
    c: &Controller,
    rb_def: &crate::resources::ResourceDef,
    work_def: &crate::resources::ResourceDef,
    b: &Value,
) -> ApiResult<()> {
    let res = &b["spec"]["resource"];
    let (Some(av), Some(kind), Some(name)) = (
        res["apiVersion"].as_str(),
        res["kind"].as_str(),
        res["name"].as_str(),
    ) else {
        return Ok(());
    };
    let tns = res["namespace"].as_str().unwrap_or_default();
    let wname = work_name(tns, name, kind);
    let mut aggregated = Vec::new();
    let mut all_applied = true;
    let mut member_statuses = Vec::new();
    let targets: Vec<&str> = b["spec"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for cname in &targets {
        let work = c
            .store()
            .get(work_def, Some(&execution_namespace(cname)), &wname)
            .ok();
        let applied = work.as_ref().and_then(|w| {
            w.value["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|x| x["type"] == "Applied")
                .map(|x| x["status"] == "True")
        });
        all_applied &= applied == Some(true);
        let Some(w) = work else {
            return Ok(());
        };
        let ms = &w.value["status"]["manifestStatuses"][0];
        let mut entry = json!({"clusterName": cname, "applied": applied == Some(true),
                "health": if ms["health"] == "Healthy" { "Healthy" } else { "Unhealthy" }});
        if !ms["status"].is_null() {
            let mut st = ms["status"].clone();
            st["resourceTemplateGeneration"] = b["spec"]["resource"]["generation"].clone();
            st["generation"] = ms["status"]["observedGeneration"].clone();
            entry["status"] = st;
            member_statuses.push(ms["status"].clone());
        }
        aggregated.push(entry);
    }
    let fully = condition(
        b,
        "FullyApplied",
        all_applied && !targets.is_empty(),
        if all_applied {
            "FullyAppliedSuccess"
        } else {
            "FullyAppliedFailed"
        },
        if all_applied {
            "All works have been successfully applied"
        } else {
            "Failed to apply all works, see status.aggregatedStatus for details"
        },
    );
    let mut conditions: Vec<Value> = b["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|x| x["type"] != "FullyApplied")
        .collect();
    conditions.push(fully);
    let status = json!({"aggregatedStatus": aggregated, "conditions": conditions});
    let differs = b["status"]["aggregatedStatus"] != status["aggregatedStatus"]
        || b["status"]["conditions"] != status["conditions"];
    let bns = b["metadata"]["namespace"].as_str().unwrap_or_default();
    let bname = b["metadata"]["name"].as_str().unwrap_or_default();
    if differs {
        c.store().patch(
            rb_def,
            Some(bns).filter(|s| !s.is_empty()),
            bname,
            PatchKind::Merge,
            json!({"status": status}).to_string().as_bytes(),
            true,
        )?;
    }
    // The template's own status, summed from the members.
    let Ok(tdef) = def_for(c.store(), av, kind) else {
        return Ok(());
    };
    let Ok(t) = c
        .store()
        .get(&tdef, Some(tns).filter(|s| !s.is_empty()), name)
    else {
        return Ok(());
    };
    let refs: Vec<&Value> = member_statuses.iter().collect();
    let Some(tstatus) = aggregate_template(kind, &refs, &t.value["metadata"]["generation"]) else {
        return Ok(());
    };
    if t.value["status"] != tstatus && tdef.status_subresource {
        c.store().patch(
            &tdef,
            Some(tns).filter(|s| !s.is_empty()),
            name,
            PatchKind::Merge,
            json!({"status": tstatus}).to_string().as_bytes(),
            true,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_status_is_summed() {
        let a = json!({"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1});
        let b = json!({"replicas": 2, "readyReplicas": 0, "updatedReplicas": 2});
        let got = aggregate_template("Deployment", &[&a, &b], &json!(3)).expect("a value");
        assert_eq!(got["replicas"], 3);
        assert_eq!(got["readyReplicas"], 1);
        assert_eq!(got["availableReplicas"], 1);
        assert_eq!(got["observedGeneration"], 3);
        assert!(aggregate_template("ConfigMap", &[], &json!(1)).is_none());
    }

    #[test]
    fn readiness_follows_generation() {
        let mut d =
            json!({"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 3}});
        assert!(!member_ready(&d));
        d["status"] = ready_status(&d);
        assert!(member_ready(&d));
        d["metadata"]["generation"] = 3.into();
        assert!(!member_ready(&d));
    }
}
