//! Binding and execution controllers: one Work per target cluster in `karmada-es-<cluster>`
//! carrying the manifest for that cluster (its replicas, the overrides applied), each Work
//! applied to its member cluster's store; Works and member objects that no placement wants
//! any more are deleted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use tracing::{info, warn};

use super::binding::condition;
use super::detector::{CPP_ID, CRB_ID, PP_ID, RB_ID};
use super::events;
use super::members::{def_for, upsert};
use super::{overrides, Controller};
use crate::patch::PatchKind;
use crate::store::meta::new_uid;
use crate::store::{Filter, Obj};
use kairship_wire::status::ApiResult;

pub const WORK_ID: &str = "work.karmada.io/permanent-id";
pub const WORK_NAME: &str = "work.karmada.io/name";
pub const WORK_NAMESPACE: &str = "work.karmada.io/namespace";
pub const RB_NAME: &str = "resourcebinding.karmada.io/name";
pub const RB_NAMESPACE: &str = "resourcebinding.karmada.io/namespace";
pub const CRB_NAME: &str = "clusterresourcebinding.karmada.io/name";

/// The execution namespace of a member cluster.
pub fn execution_namespace(cluster: &str) -> String {
    format!("karmada-es-{cluster}")
}

/// Karmada's Work name: the template name and a hash of namespace, name and kind, encoded
/// with the Kubernetes "safe" alphabet.
pub fn work_name(namespace: &str, name: &str, kind: &str) -> String {
    let key = if namespace.is_empty() {
        format!("{name}-{kind}")
    } else {
        format!("{namespace}-{name}-{kind}")
    }
    .to_lowercase();
    format!(
        "{}-{}",
        name.replace(':', ".").to_lowercase(),
        safe_hash(&key)
    )
}

/// A 32-bit FNV-1a hash of `key` in decimal, each digit encoded with the Kubernetes "safe"
/// alphabet (no vowels, no look-alikes), as Kubernetes names its generated objects.
pub fn safe_hash(key: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for b in key.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| SAFE[usize::from(b) % SAFE.len()] as char)
        .collect()
}

/// The template as it goes to one cluster: no server fields, its share of replicas.
fn manifest_for(
    template: &Value,
    replicas: Option<i64>,
    work: (&str, &str),
    binding: &BindingRef,
    work_id: &str,
) -> Value {
    let mut m = template.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = m["metadata"].as_object_mut() {
        for k in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "managedFields",
            "ownerReferences",
            "finalizers",
        ] {
            meta.remove(k);
        }
    }
    if let (Some(r), Some(kind)) = (replicas, template["kind"].as_str()) {
        match kind {
            "Deployment" | "StatefulSet" => m["spec"]["replicas"] = r.into(),
            "Job" => m["spec"]["parallelism"] = r.into(),
            _ => {}
        }
    }
    if !m["metadata"]["labels"].is_object() {
        m["metadata"]["labels"] = json!({});
    }
    if !m["metadata"]["annotations"].is_object() {
        m["metadata"]["annotations"] = json!({});
    }
    m["metadata"]["labels"][WORK_ID] = work_id.into();
    if let Some((k, v)) = &binding.policy_id {
        m["metadata"]["labels"][*k] = v.as_str().into();
    }
    let a = &mut m["metadata"]["annotations"];
    a[WORK_NAME] = work.1.into();
    a[WORK_NAMESPACE] = work.0.into();
    for (k, v) in binding.annotations() {
        a[k] = v.into();
    }
    m
}

/// What Works and member objects say about the binding they came from: a
/// ResourceBinding's name and namespace, or a ClusterResourceBinding's name.
pub struct BindingRef {
    pub namespace: Option<String>,
    pub name: String,
    /// The binding's permanent-id label (key, value).
    pub id: (&'static str, String),
    /// The claiming policy's permanent-id label, carried onto member objects.
    pub policy_id: Option<(&'static str, String)>,
}

impl BindingRef {
    pub fn of(b: &Value) -> Self {
        let meta = &b["metadata"];
        let labels = &meta["labels"];
        let namespace = meta["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from);
        let label = |k: &'static str| labels[k].as_str().map(|v| (k, v.to_string()));
        let id_key = if namespace.is_some() { RB_ID } else { CRB_ID };
        Self {
            name: meta["name"].as_str().unwrap_or_default().to_string(),
            id: (
                id_key,
                labels[id_key].as_str().unwrap_or_default().to_string(),
            ),
            policy_id: label(PP_ID).or_else(|| label(CPP_ID)),
            namespace,
        }
    }

    fn annotations(&self) -> Vec<(&'static str, String)> {
        match &self.namespace {
            Some(ns) => vec![(RB_NAME, self.name.clone()), (RB_NAMESPACE, ns.clone())],
            None => vec![(CRB_NAME, self.name.clone())],
        }
    }
}

pub fn run(c: &Controller) -> ApiResult<()> {
    let work_def = c.def("work.karmada.io", "v1alpha1", "works")?;
    let clusters = c.list("cluster.karmada.io", "v1alpha1", "clusters")?;
    let ops = c.list("policy.karmada.io", "v1alpha1", "overridepolicies")?;
    let cops = c.list("policy.karmada.io", "v1alpha1", "clusteroverridepolicies")?;
    let existing: BTreeMap<(String, String), Obj> = c
        .list("work.karmada.io", "v1alpha1", "works")?
        .into_iter()
        .map(|w| {
            let k = (
                w["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                w["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
            (k, w)
        })
        .collect();
    // Karmada's cluster controller makes each cluster's execution space when it joins,
    // before any Work needs it.
    for cname in clusters
        .iter()
        .filter_map(|x| x["metadata"]["name"].as_str())
    {
        ensure_namespace(c.store(), &execution_namespace(cname))?;
    }
    let mut wanted = BTreeSet::new();
    let mut bindings = Vec::new();
    for plural in super::BINDING_PLURALS {
        bindings.extend(c.list("work.karmada.io", "v1alpha2", plural)?);
    }
    for b in bindings {
        let res = &b["spec"]["resource"];
        let (Some(api_version), Some(kind), Some(name)) = (
            res["apiVersion"].as_str(),
            res["kind"].as_str(),
            res["name"].as_str(),
        ) else {
            continue;
        };
        let tns = res["namespace"].as_str().unwrap_or_default();
        let Ok(tdef) = def_for(c.store(), api_version, kind) else {
            continue;
        };
        let Ok(template) = c
            .store()
            .get(&tdef, Some(tns).filter(|s| !s.is_empty()), name)
        else {
            continue;
        };
        let template = &template.value;
        let rb = BindingRef::of(&b);
        let cluster_ops = overrides::applicable(&cops, template);
        let ns_ops = overrides::applicable(&ops, template);
        let wname = work_name(tns, name, kind);
        let mut synced = false;
        for target in b["spec"]["clusters"].as_array().into_iter().flatten() {
            let Some(cname) = target["name"].as_str() else {
                continue;
            };
            let Some(cluster) = clusters.iter().find(|x| x["metadata"]["name"] == cname) else {
                continue;
            };
            let wns = execution_namespace(cname);
            let key = (wns.clone(), wname.clone());
            let work_id = existing
                .get(&key)
                .and_then(|w| w["metadata"]["labels"][WORK_ID].as_str().map(String::from))
                .unwrap_or_else(new_uid);
            let mut manifest = manifest_for(
                template,
                target["replicas"].as_i64(),
                (&wns, &wname),
                &rb,
                &work_id,
            );
            if let Err(e) = overrides::apply(&mut manifest, cluster, &cluster_ops, &ns_ops) {
                warn!(binding = %rb.name, cluster = cname, error = %e, "overrides failed; work not updated");
                wanted.insert(key);
                continue;
            }
            let mut work = json!({
                "apiVersion": "work.karmada.io/v1alpha1", "kind": "Work",
                "metadata": {"name": wname, "namespace": wns,
                    "labels": {rb.id.0: rb.id.1, WORK_ID: work_id}, "annotations": {}},
                "spec": {"workload": {"manifests": [manifest]}},
            });
            for (k, v) in rb.annotations() {
                work["metadata"]["annotations"][k] = v.into();
            }
            if upsert(c.store(), &work_def, work)? {
                info!(work = %wname, cluster = cname, binding = %rb.name, "work synced");
                synced = true;
            }
            wanted.insert(key);
        }
        if synced {
            let kind = b["kind"].as_str().unwrap_or("ResourceBinding");
            let message = match &rb.namespace {
                Some(ns) => format!("Sync work of {kind}({ns}/{}) successful.", rb.name),
                None => format!("Sync work of {kind}({}) successful.", rb.name),
            };
            for about in [&b, template] {
                events::record(
                    c,
                    about,
                    false,
                    "SyncWorkSucceed",
                    &message,
                    events::CONTROLLER_MANAGER,
                );
            }
        }
    }
    for (ns, name) in existing.keys().filter(|k| !wanted.contains(*k)) {
        info!(work = %name, namespace = %ns, "no longer placed there; deleting work");
        match c
            .store()
            .delete(&work_def, Some(ns), name, Default::default())
        {
            Err(e) if e.code != 404 => return Err(e),
            _ => {}
        }
    }
    apply_works(c, &clusters)
}

/// The execution controller: Works to member objects, and member objects whose Work is gone
/// removed; each Work gets its `Applied` condition.
fn apply_works(c: &Controller, clusters: &[Obj]) -> ApiResult<()> {
    let work_def = c.def("work.karmada.io", "v1alpha1", "works")?;
    let works = c.list("work.karmada.io", "v1alpha1", "works")?;
    for cl in clusters {
        let Some(cname) = cl["metadata"]["name"].as_str() else {
            continue;
        };
        let member = c.members.store(cname)?;
        let wns = execution_namespace(cname);
        let mut kept: BTreeSet<(String, String, String)> = BTreeSet::new();
        for w in works
            .iter()
            .filter(|w| w["metadata"]["namespace"] == wns.as_str())
        {
            let wname = w["metadata"]["name"].as_str().unwrap_or_default();
            let mut statuses = Vec::new();
            let mut failure = None;
            for (i, m) in w["spec"]["workload"]["manifests"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let (av, kind) = (
                    m["apiVersion"].as_str().unwrap_or_default(),
                    m["kind"].as_str().unwrap_or_default(),
                );
                let mns = m["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let mname = m["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let applied = def_for(&member, av, kind).and_then(|def| {
                    if def.namespaced {
                        ensure_namespace(&member, &mns)?;
                    }
                    upsert(&member, &def, m.clone())?;
                    kept.insert((def.key(), mns.clone(), mname.clone()));
                    member.get(&def, Some(mns.as_str()).filter(|s| !s.is_empty()), &mname)
                });
                match applied {
                    Ok(obj) => {
                        let (group, version) = av.split_once('/').unwrap_or(("", av));
                        let st = obj.value["status"].clone();
                        statuses.push(json!({
                            "identifier": {"ordinal": i, "group": group, "version": version, "kind": kind, "namespace": mns, "name": mname},
                            "status": st,
                            "health": if super::status::member_ready(&obj.value) { "Healthy" } else { "Unhealthy" },
                        }));
                    }
                    Err(e) => failure = Some(e.message.clone()),
                }
            }
            let cond = match &failure {
                None => condition(
                    w,
                    "Applied",
                    true,
                    "AppliedSuccessful",
                    "Manifest has been successfully applied",
                ),
                Some(msg) => condition(
                    w,
                    "Applied",
                    false,
                    "AppliedFailed",
                    &format!("Failed to apply all manifests (0/1): {msg}"),
                ),
            };
            let status = json!({"conditions": [cond], "manifestStatuses": statuses});
            if w["status"] != status {
                c.store().patch(
                    &work_def,
                    Some(&wns),
                    wname,
                    PatchKind::Merge,
                    json!({"status": status}).to_string().as_bytes(),
                    true,
                )?;
            }
        }
        // Objects Karmada put on this member whose Work no longer carries them.
        for def in member.registry().all() {
            for obj in member.list(def, &Filter::default(), None, None)?.items {
                if obj.value["metadata"]["annotations"][WORK_NAME].is_null() {
                    continue;
                }
                let k = (
                    def.key(),
                    obj.namespace().to_string(),
                    obj.name().to_string(),
                );
                if !kept.contains(&k) {
                    info!(cluster = cname, kind = %def.kind, name = %obj.name(), "removing member object no work carries");
                    let _ =
                        member.delete(def, Some(obj.namespace()), obj.name(), Default::default());
                }
            }
        }
    }
    Ok(())
}

fn ensure_namespace(member: &crate::store::Store, ns: &str) -> ApiResult<()> {
    if ns.is_empty() {
        return Ok(());
    }
    let Some(def) = member.lookup("", "v1", "namespaces") else {
        return Ok(());
    };
    if member.get(&def, None, ns).is_err() {
        member.create(
            &def,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_names_are_stable_and_distinct() {
        let a = work_name("default", "nginx", "Deployment");
        assert!(a.starts_with("nginx-"), "{a}");
        assert_eq!(a, work_name("default", "nginx", "deployment"));
        assert_ne!(a, work_name("other", "nginx", "Deployment"));
        assert_ne!(a, work_name("default", "nginx", "Service"));
        assert!(a.len() <= 63);
        assert_eq!(execution_namespace("member1"), "karmada-es-member1");
    }
}
