//! What kube-apiserver allocates for a Service on create, and keeps on update, that
//! clients read back: IP families, a cluster IP from the service range (10.96.0.0/12
//! here, as kubeadm's default) and node ports (30000-32767) for NodePort and
//! LoadBalancer. Its type, session affinity, traffic policies and each port's protocol
//! and target port are decoding defaults (see `decode_defaults`).

use std::collections::HashSet;

use serde_json::{json, Value};

use super::Collection;
use crate::resources::ResourceDef;

pub(super) const SERVICES: &str = "/services";
pub(super) const JOBS: &str = "batch/jobs";
pub(super) const DAEMONSETS: &str = "apps/daemonsets";

/// The annotation apps/v1 carries a DaemonSet's template generation in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// A new DaemonSet's template generation is 1, whatever the client sent.
pub(super) fn daemonset_on_create(def: &ResourceDef, obj: &mut Value) {
    if def.key() != DAEMONSETS || !obj.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    default(&mut obj["metadata"], "annotations", json!({}));
    obj["metadata"]["annotations"][TEMPLATE_GENERATION] = json!("1");
}

/// An update keeps the template generation, one more when the pod template changed.
pub(super) fn daemonset_on_update(old: &Value, obj: &mut Value) {
    let before = old
        .pointer(&format!("/metadata/annotations/{TEMPLATE_GENERATION}"))
        .and_then(Value::as_str)
        .and_then(|g| g.parse::<i64>().ok())
        .unwrap_or(1);
    let changed = old.pointer("/spec/template") != obj.pointer("/spec/template");
    if !obj.get("metadata").is_some_and(Value::is_object) {
        return;
    }
    default(&mut obj["metadata"], "annotations", json!({}));
    let generation = before + i64::from(changed);
    obj["metadata"]["annotations"][TEMPLATE_GENERATION] = json!(generation.to_string());
}

/// Allocates a new Service's cluster IP (and families) and node ports; `existing` are
/// the Services already stored. Its decoding defaults are filled already.
pub(super) fn service_on_create(obj: &mut Value, existing: Option<&Collection>) {
    let (taken_ips, taken_ports) = taken(existing);
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let spec = &mut obj["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    let mut next_port = port_allocator(taken_ports);
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if matches!(kind.as_str(), "NodePort" | "LoadBalancer") && p.get("nodePort").is_none() {
                p["nodePort"] = json!(next_port());
            }
        }
    }
    if kind == "ExternalName" {
        return;
    }
    let ip = match spec["clusterIP"].as_str().filter(|ip| !ip.is_empty()) {
        Some(ip) => ip.to_string(),
        None => allocate_ip(&taken_ips),
    };
    let headless_without_selector = ip == "None"
        && spec
            .get("selector")
            .is_none_or(|s| s.as_object().is_none_or(|o| o.is_empty()));
    spec["clusterIP"] = json!(ip);
    default(spec, "clusterIPs", json!([ip]));
    // Endpoints of a headless Service without a selector may be of either family, so
    // kube-apiserver asks for both whatever the cluster runs.
    if headless_without_selector {
        default(spec, "ipFamilies", json!(["IPv4", "IPv6"]));
        default(spec, "ipFamilyPolicy", json!("RequireDualStack"));
    } else {
        default(spec, "ipFamilies", json!(["IPv4"]));
        default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    obj["status"] = json!({"loadBalancer": {}});
}

/// A new Job's selector and labels, generated from its uid unless the Job selects its
/// Pods itself (`manualSelector`); a Job without labels takes its Pods'.
pub(super) fn job_on_create(obj: &mut Value) {
    let uid = obj.pointer("/metadata/uid").cloned().unwrap_or_default();
    let name = obj.pointer("/metadata/name").cloned().unwrap_or_default();
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec["manualSelector"] == json!(true) {
        return;
    }
    default(spec, "template", json!({}));
    default(&mut spec["template"], "metadata", json!({}));
    default(&mut spec["template"]["metadata"], "labels", json!({}));
    let labels = &mut spec["template"]["metadata"]["labels"];
    for (k, v) in [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ] {
        labels[k] = v.clone();
    }
    let pod_labels = labels.clone();
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let meta = &mut obj["metadata"];
    if meta
        .get("labels")
        .is_none_or(|l| l.as_object().is_none_or(|m| m.is_empty()))
    {
        meta["labels"] = pod_labels;
    }
}

/// An update that leaves out what was allocated keeps it, as kube-apiserver's Service
/// storage does (the cluster IP is immutable; node ports stay with their port).
pub(super) fn service_on_update(old: &Value, obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        let missing = spec
            .get(key)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if missing {
            if let Some(v) = old["spec"].get(key) {
                spec[key] = v.clone();
            }
        }
    }
    let old_ports: Vec<Value> = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if p.get("nodePort").is_none() {
                if let Some(np) = old_ports
                    .iter()
                    .find(|o| o["port"] == p["port"])
                    .and_then(|o| o.get("nodePort"))
                {
                    p["nodePort"] = np.clone();
                }
            }
        }
    }
}

fn default(v: &mut Value, key: &str, value: Value) {
    if v.get(key).is_none_or(Value::is_null) {
        v[key] = value;
    }
}

fn taken(existing: Option<&Collection>) -> (HashSet<String>, HashSet<u64>) {
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for o in existing.into_iter().flat_map(|c| c.values()) {
        if let Some(ip) = o.value["spec"]["clusterIP"].as_str() {
            ips.insert(ip.to_string());
        }
        for p in o.value["spec"]["ports"].as_array().into_iter().flatten() {
            if let Some(n) = p["nodePort"].as_u64() {
                ports.insert(n);
            }
        }
    }
    (ips, ports)
}

/// A free address of 10.96.0.0/12 past the first (the `kubernetes` Service's), picked at
/// random as kube-apiserver's allocator does.
fn allocate_ip(taken: &HashSet<String>) -> String {
    let mut seed = uuid_seed();
    loop {
        seed = step(seed);
        let host = 2 + (seed >> 33) % ((1 << 20) - 3);
        let ip = format!(
            "10.{}.{}.{}",
            96 + (host >> 16),
            (host >> 8) & 0xff,
            host & 0xff
        );
        if !taken.contains(&ip) {
            return ip;
        }
    }
}

fn port_allocator(mut taken: HashSet<u64>) -> impl FnMut() -> u64 {
    let mut seed = uuid_seed();
    move || loop {
        seed = step(seed);
        let port = 30000 + (seed >> 33) % 2768;
        if taken.insert(port) {
            return port;
        }
    }
}

/// One step of a 64-bit linear congruential generator (Knuth's MMIX constants).
fn step(seed: u64) -> u64 {
    seed.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

fn uuid_seed() -> u64 {
    let uid = super::meta::new_uid();
    uid.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_get_kube_apiservers_defaults() {
        let mut svc = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        super::super::decode_defaults::service(&mut svc["spec"]);
        service_on_create(&mut svc, None);
        let spec = &svc["spec"];
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        let np = spec["ports"][0]["nodePort"].as_u64().expect("node port");
        assert!((30000..=32767).contains(&np));
        let ip = spec["clusterIP"].as_str().expect("cluster IP");
        assert!(ip.starts_with("10."));
        assert_eq!(spec["clusterIPs"], json!([ip]));
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");

        let mut update = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        service_on_update(&svc, &mut update);
        assert_eq!(update["spec"]["clusterIP"], ip);
        assert_eq!(update["spec"]["ports"][0]["nodePort"], np);

        let mut headless = json!({"metadata": {"name": "db"}, "spec": {"clusterIP": "None"}});
        service_on_create(&mut headless, None);
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
        let mut external = json!({"metadata": {"name": "x"}, "spec": {"type": "ExternalName", "externalName": "example.com"}});
        service_on_create(&mut external, None);
        assert!(external["spec"].get("clusterIP").is_none());
    }
}
