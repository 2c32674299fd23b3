//! What the members' own controllers and kubelets make of the workloads Karmada applied,
//! as far as clients see it: a ReplicaSet per Deployment template, and the Pods of
//! Deployments, StatefulSets, DaemonSets and Jobs, named and labelled as Kubernetes names
//! them, on the member's Nodes. A Pod is Pending (ContainerCreating) until its workload is
//! ready, then Running and Ready; a finished Job's Pods are Succeeded. Pods and
//! ReplicaSets whose owner is gone are deleted, as the garbage collector would.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::execution::safe_hash;
use super::members::upsert;
use super::status::member_ready;
use super::Controller;
use crate::resources::ResourceDef;
use crate::store::meta::now_rfc3339;
use crate::store::{Filter, Store};
use kairship_wire::status::ApiResult;

/// Kinds whose Pods the members run, and the group of each.
const OWNERS: [(&str, &str); 4] = [
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
];

type Key = (String, String);

fn key_of(v: &Value) -> Key {
    let m = &v["metadata"];
    (
        m["namespace"].as_str().unwrap_or_default().to_string(),
        m["name"].as_str().unwrap_or_default().to_string(),
    )
}

fn owner_ref(owner: &Value, api_version: &str, kind: &str) -> Value {
    json!([{
        "apiVersion": api_version, "kind": kind,
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "controller": true, "blockOwnerDeletion": true,
    }])
}

/// Whether a member object is one this module made (its controller is a workload kind).
fn made_here(v: &Value) -> bool {
    v["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| {
            o["controller"] == true
                && matches!(
                    o["kind"].as_str(),
                    Some("ReplicaSet" | "Deployment" | "StatefulSet" | "DaemonSet" | "Job")
                )
        })
}

/// The last five characters of a safe hash of `key`: a generated name's random part.
fn suffix(key: &str) -> String {
    let h = safe_hash(key);
    h[h.len().saturating_sub(5)..].to_string()
}

fn labels(template: &Value) -> Map<String, Value> {
    template["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// One Pod wanted on a member: its object without status, and whether it runs.
struct Wanted {
    pod: Value,
    phase: Phase,
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Pending,
    Running,
    Succeeded,
}

fn pod(
    ns: &str,
    name: String,
    template: &Value,
    labels: Map<String, Value>,
    owner: Value,
    node: Option<&str>,
) -> Value {
    let mut spec = template["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    if let Some(node) = node {
        spec["nodeName"] = node.into();
    }
    let mut meta =
        json!({"name": name, "namespace": ns, "labels": labels, "ownerReferences": owner});
    if let Some(a) = template["metadata"]["annotations"].as_object() {
        meta["annotations"] = Value::Object(a.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

/// The status a kubelet would report for `pod` in `phase`; times already reported are kept.
fn pod_status(pod: &Value, phase: Phase, previous: &Value) -> Value {
    let started = previous["startTime"]
        .as_str()
        .map_or_else(now_rfc3339, String::from);
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let state = match phase {
                Phase::Pending => json!({"waiting": {"reason": "ContainerCreating"}}),
                Phase::Running => json!({"running": {"startedAt": started}}),
                Phase::Succeeded => json!({"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": started, "finishedAt": started}}),
            };
            json!({"name": c["name"], "image": c["image"], "ready": phase == Phase::Running,
                "started": phase == Phase::Running, "restartCount": 0, "state": state})
        })
        .collect();
    let ready = if phase == Phase::Running {
        "True"
    } else {
        "False"
    };
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let ip = safe_ip(name);
    let mut status = json!({
        "phase": match phase {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
        },
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": ready},
            {"type": "Ready", "status": ready},
        ],
        "containerStatuses": containers,
        "qosClass": "BestEffort",
    });
    if phase != Phase::Pending {
        status["startTime"] = started.into();
        status["podIP"] = ip.clone().into();
        status["podIPs"] = json!([{"ip": ip}]);
    }
    status
}

/// A stable pod address in 10.244.0.0/16 from the pod's name.
fn safe_ip(name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("10.244.{}.{}", (h >> 8) & 0xff, (h & 0xff).clamp(2, 254))
}

/// What one member wants: ReplicaSets and Pods by (namespace, name).
#[derive(Default)]
struct Plan {
    replica_sets: BTreeMap<Key, (Value, Value)>,
    pods: BTreeMap<Key, Wanted>,
}

impl Plan {
    fn want(&mut self, pod: Value, phase: Phase) {
        self.pods.insert(key_of(&pod), Wanted { pod, phase });
    }
}

/// A long-running workload's Pod: Running once its workload reports it ready.
fn running_if(ready: bool) -> Phase {
    if ready {
        Phase::Running
    } else {
        Phase::Pending
    }
}

fn plan_workload(plan: &mut Plan, kind: &str, w: &Value, nodes: &[String]) {
    let (ns, name) = key_of(w);
    let template = &w["spec"]["template"];
    let ready = member_ready(w);
    let node_for = |i: usize| (!nodes.is_empty()).then(|| nodes[i % nodes.len()].as_str());
    match kind {
        "Deployment" => {
            let replicas = w["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
            let hash = safe_hash(&template.to_string());
            let rs_name = format!("{name}-{hash}");
            let mut l = labels(template);
            l.insert("pod-template-hash".into(), hash.clone().into());
            let mut selector = w["spec"]["selector"].clone();
            selector["matchLabels"]["pod-template-hash"] = hash.clone().into();
            let mut rs_template = template.clone();
            rs_template["metadata"]["labels"] = Value::Object(l.clone());
            let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": rs_name, "namespace": ns, "labels": l,
                    "annotations": {"deployment.kubernetes.io/revision": w["metadata"]["generation"].to_string()},
                    "ownerReferences": owner_ref(w, "apps/v1", "Deployment")},
                "spec": {"replicas": replicas, "selector": selector, "template": rs_template}});
            let n = if ready { replicas as i64 } else { 0 };
            let rs_status = json!({"replicas": replicas, "fullyLabeledReplicas": replicas,
                "readyReplicas": n, "availableReplicas": n, "observedGeneration": 1});
            let rs_ref = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                "uid": Value::Null, "controller": true, "blockOwnerDeletion": true}]);
            for i in 0..replicas {
                let pod_name = format!("{rs_name}-{}", suffix(&format!("{rs_name}/{i}")));
                let p = pod(
                    &ns,
                    pod_name,
                    template,
                    l.clone(),
                    rs_ref.clone(),
                    node_for(i),
                );
                plan.want(p, running_if(ready));
            }
            plan.replica_sets.insert((ns, rs_name), (rs, rs_status));
        }
        "StatefulSet" => {
            let replicas = w["spec"]["replicas"].as_i64().unwrap_or(1).max(0) as usize;
            let revision = format!("{name}-{}", suffix(&template.to_string()));
            for i in 0..replicas {
                let pod_name = format!("{name}-{i}");
                let mut l = labels(template);
                l.insert("controller-revision-hash".into(), revision.clone().into());
                l.insert(
                    "statefulset.kubernetes.io/pod-name".into(),
                    pod_name.clone().into(),
                );
                l.insert("apps.kubernetes.io/pod-index".into(), i.to_string().into());
                let owner = owner_ref(w, "apps/v1", "StatefulSet");
                let p = pod(&ns, pod_name, template, l, owner, node_for(i));
                plan.want(p, running_if(ready));
            }
        }
        "DaemonSet" => {
            for (i, node) in nodes.iter().enumerate() {
                let pod_name = format!("{name}-{}", suffix(&format!("{name}/{node}")));
                let owner = owner_ref(w, "apps/v1", "DaemonSet");
                let p = pod(
                    &ns,
                    pod_name,
                    template,
                    labels(template),
                    owner,
                    node_for(i),
                );
                plan.want(p, Phase::Running);
            }
        }
        "Job" => {
            let parallelism = w["spec"]["parallelism"].as_i64().unwrap_or(1).max(0) as usize;
            let uid = w["metadata"]["uid"].clone();
            for i in 0..parallelism {
                let pod_name = format!("{name}-{}", suffix(&format!("{name}/{i}")));
                let mut l = labels(template);
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", uid.clone()),
                    ("batch.kubernetes.io/job-name", name.clone().into()),
                    ("controller-uid", uid.clone()),
                    ("job-name", name.clone().into()),
                ] {
                    l.insert(k.into(), v);
                }
                let owner = owner_ref(w, "batch/v1", "Job");
                let p = pod(&ns, pod_name, template, l, owner, node_for(i));
                plan.want(
                    p,
                    if ready {
                        Phase::Succeeded
                    } else {
                        Phase::Running
                    },
                );
            }
        }
        _ => {}
    }
}

pub fn run(c: &Controller) -> ApiResult<()> {
    for cluster in c.members.names() {
        let member = c.members.store(&cluster)?;
        let (Some(pod_def), Some(rs_def), Some(node_def)) = (
            member.lookup("", "v1", "pods"),
            member.lookup("apps", "v1", "replicasets"),
            member.lookup("", "v1", "nodes"),
        ) else {
            continue;
        };
        let mut nodes: Vec<String> = member
            .list(&node_def, &Filter::default(), None, None)?
            .items
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        nodes.sort();
        let mut plan = Plan::default();
        for (group, plural) in OWNERS {
            let Some(def) = member.lookup(group, "v1", plural) else {
                continue;
            };
            for w in member.list(&def, &Filter::default(), None, None)?.items {
                plan_workload(&mut plan, &def.kind, &w.value, &nodes);
            }
        }
        reconcile_replica_sets(&member, &rs_def, &plan)?;
        reconcile_pods(&member, &pod_def, &rs_def, plan)?;
    }
    Ok(())
}

fn reconcile_replica_sets(member: &Store, def: &ResourceDef, plan: &Plan) -> ApiResult<()> {
    let existing = member.list(def, &Filter::default(), None, None)?.items;
    for (key, (rs, status)) in &plan.replica_sets {
        upsert(member, def, rs.clone())?;
        let current = member.get(def, Some(&key.0), &key.1)?;
        if &current.value["status"] != status {
            let mut next = current.value.clone();
            next["status"] = status.clone();
            member.update(def, Some(&key.0), &key.1, next, true)?;
        }
    }
    // An old template's ReplicaSet is scaled to zero, one whose Deployment is gone deleted.
    for o in existing.iter().filter(|o| made_here(&o.value)) {
        let key = key_of(&o.value);
        if plan.replica_sets.contains_key(&key) {
            continue;
        }
        let owner = o.value["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap_or_default();
        let owned_by_live = plan.replica_sets.values().any(|(rs, _)| {
            rs["metadata"]["namespace"] == o.namespace()
                && rs["metadata"]["ownerReferences"][0]["name"] == owner
        });
        if owned_by_live {
            if o.value["spec"]["replicas"] != 0 {
                let mut next = o.value.clone();
                next["spec"]["replicas"] = 0.into();
                next["metadata"]["resourceVersion"] = o.rv.to_string().into();
                member.update(def, Some(o.namespace()), o.name(), next, false)?;
            }
        } else {
            let _ = member.delete(def, Some(o.namespace()), o.name(), Default::default());
        }
    }
    Ok(())
}

fn reconcile_pods(
    member: &Store,
    def: &ResourceDef,
    rs_def: &ResourceDef,
    mut plan: Plan,
) -> ApiResult<()> {
    // A ReplicaSet's Pods name it by uid, known once it is stored.
    for ((ns, _), w) in plan.pods.iter_mut() {
        let refs = &mut w.pod["metadata"]["ownerReferences"][0];
        if refs["kind"] == "ReplicaSet" {
            if let Ok(rs) = member.get(rs_def, Some(ns), refs["name"].as_str().unwrap_or("")) {
                refs["uid"] = rs.value["metadata"]["uid"].clone();
            }
        }
    }
    let existing = member.list(def, &Filter::default(), None, None)?.items;
    for (key, w) in &plan.pods {
        upsert(member, def, w.pod.clone())?;
        let current = member.get(def, Some(&key.0), &key.1)?.value.clone();
        let status = pod_status(&w.pod, w.phase, &current["status"]);
        if current["status"] != status {
            let mut next = current;
            next["status"] = status;
            member.update(def, Some(&key.0), &key.1, next, true)?;
        }
    }
    for o in existing.iter().filter(|o| made_here(&o.value)) {
        if !plan.pods.contains_key(&key_of(&o.value)) {
            let _ = member.delete(def, Some(o.namespace()), o.name(), Default::default());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "nginx", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": image}]}}}})
    }

    #[test]
    fn a_deployment_gets_a_replica_set_and_its_pods_on_the_nodes() {
        let mut plan = Plan::default();
        let nodes = vec!["m1-node-0".to_string(), "m1-node-1".to_string()];
        plan_workload(&mut plan, "Deployment", &deployment(3, "nginx:1"), &nodes);
        assert_eq!(plan.replica_sets.len(), 1);
        let (rs_key, (rs, _)) = plan.replica_sets.iter().next().expect("rs");
        assert!(rs_key.1.starts_with("nginx-"));
        let hash = rs["metadata"]["labels"]["pod-template-hash"]
            .as_str()
            .expect("hash");
        assert_eq!(rs_key.1, format!("nginx-{hash}"));
        assert_eq!(plan.pods.len(), 3);
        for (k, w) in &plan.pods {
            assert!(k.1.starts_with(&format!("{}-", rs_key.1)), "{}", k.1);
            assert_eq!(w.pod["metadata"]["labels"]["app"], "nginx");
            assert!(nodes
                .iter()
                .any(|n| w.pod["spec"]["nodeName"] == n.as_str()));
        }
        // A new template is a new ReplicaSet with new Pods.
        let mut next = Plan::default();
        plan_workload(&mut next, "Deployment", &deployment(3, "nginx:2"), &nodes);
        assert!(next
            .replica_sets
            .keys()
            .all(|k| !plan.replica_sets.contains_key(k)));
        assert!(next.pods.keys().all(|k| !plan.pods.contains_key(k)));
    }

    #[test]
    fn a_pod_runs_only_once_its_workload_is_ready() {
        let p = pod(
            "default",
            "nginx-abc-xyz".into(),
            &deployment(1, "nginx")["spec"]["template"],
            Map::new(),
            json!([]),
            None,
        );
        let pending = pod_status(&p, Phase::Pending, &Value::Null);
        assert_eq!(pending["phase"], "Pending");
        assert!(pending.get("podIP").is_none());
        let running = pod_status(&p, Phase::Running, &pending);
        assert_eq!(running["phase"], "Running");
        assert_eq!(running["containerStatuses"][0]["ready"], true);
        // Reported times stay put, so a settled pod is not rewritten on every pass.
        assert_eq!(pod_status(&p, Phase::Running, &running), running);
    }
}
