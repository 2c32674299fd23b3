//! The defaults kube-apiserver fills in while it decodes a built-in object, before field
//! ownership, validation or storage see it: so they show in what clients read back and
//! belong to whoever created the object. Allocations (a Service's cluster IP and node
//! ports) come later, in [`super::defaults`].

use serde_json::{json, Value};

use crate::resources::ResourceDef;

/// Fills `obj`'s decoding defaults, by its kind (others have none here).
pub(super) fn fill(def: &ResourceDef, obj: &mut Value) {
    if def.group.is_empty() && def.plural == "secrets" {
        default(obj, "type", json!("Opaque"));
    }
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "services") => service(spec),
        ("", "pods") => pod_spec(spec),
        ("", "replicationcontrollers") => {
            default(spec, "replicas", json!(1));
            template(spec);
        }
        ("apps", "deployments") => {
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "progressDeadlineSeconds", json!(600));
            rolling_update(
                spec,
                "strategy",
                &[("maxUnavailable", json!("25%")), ("maxSurge", json!("25%"))],
            );
            template(spec);
        }
        ("apps", "replicasets") => {
            default(spec, "replicas", json!(1));
            template(spec);
        }
        ("apps", "statefulsets") => {
            default(spec, "replicas", json!(1));
            default(spec, "revisionHistoryLimit", json!(10));
            default(spec, "podManagementPolicy", json!("OrderedReady"));
            rolling_update(spec, "updateStrategy", &[("partition", json!(0))]);
            default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            template(spec);
        }
        ("apps", "daemonsets") => {
            default(spec, "revisionHistoryLimit", json!(10));
            rolling_update(
                spec,
                "updateStrategy",
                &[("maxUnavailable", json!(1)), ("maxSurge", json!(0))],
            );
            template(spec);
        }
        ("batch", "jobs") => {
            if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
                spec["completions"] = json!(1);
            }
            default(spec, "parallelism", json!(1));
            let per_index = spec
                .get("backoffLimitPerIndex")
                .is_some_and(|v| !v.is_null());
            default(
                spec,
                "backoffLimit",
                json!(if per_index { i32::MAX } else { 6 }),
            );
            default(spec, "completionMode", json!("NonIndexed"));
            default(spec, "suspend", json!(false));
            default(spec, "manualSelector", json!(false));
            let policy = match spec.get("podFailurePolicy").is_some_and(|v| !v.is_null()) {
                true => "Failed",
                false => "TerminatingOrFailed",
            };
            default(spec, "podReplacementPolicy", json!(policy));
            template(spec);
        }
        _ => {}
    }
}

pub(super) fn service(spec: &mut Value) {
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    let kind = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    for p in spec
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        default(p, "protocol", json!("TCP"));
        if p.get("targetPort").is_none() {
            p["targetPort"] = p["port"].clone();
        }
    }
    if kind == "ExternalName" {
        return;
    }
    default(spec, "internalTrafficPolicy", json!("Cluster"));
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// A new object's status as Go writes its zero value: `{}`, with the counters whose
/// fields are not `omitempty`.
pub(super) fn zero_status(def: &ResourceDef) -> Value {
    match (def.group.as_str(), def.plural.as_str()) {
        ("apps", "statefulsets") => json!({"availableReplicas": 0, "replicas": 0}),
        ("apps", "daemonsets") => json!({
            "currentNumberScheduled": 0, "desiredNumberScheduled": 0,
            "numberMisscheduled": 0, "numberReady": 0,
        }),
        ("apps", "replicasets") | ("", "replicationcontrollers") => json!({"replicas": 0}),
        _ => json!({}),
    }
}

/// A workload's update strategy: RollingUpdate unless it says otherwise, and then the
/// rolling update's own defaults.
fn rolling_update(spec: &mut Value, field: &str, rolling: &[(&str, Value)]) {
    default(spec, field, json!({}));
    let strategy = &mut spec[field];
    default(strategy, "type", json!("RollingUpdate"));
    if strategy["type"] == "RollingUpdate" {
        default(strategy, "rollingUpdate", json!({}));
        for (key, value) in rolling {
            default(&mut strategy["rollingUpdate"], key, value.clone());
        }
    }
}

fn template(spec: &mut Value) {
    if let Some(pod) = spec.pointer_mut("/template/spec").filter(|s| s.is_object()) {
        pod_spec(pod);
    }
}

fn pod_spec(spec: &mut Value) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            container(c);
        }
    }
}

fn container(c: &mut Value) {
    default(c, "terminationMessagePath", json!("/dev/termination-log"));
    default(c, "terminationMessagePolicy", json!("File"));
    default(c, "resources", json!({}));
    // `:latest` or no tag is pulled every time; a pinned tag or digest only when absent.
    let image = c["image"].as_str().unwrap_or("");
    let name = image.rsplit('/').next().unwrap_or(image);
    let latest = !image.contains('@') && name.split(':').nth(1).is_none_or(|t| t == "latest");
    default(
        c,
        "imagePullPolicy",
        json!(if latest { "Always" } else { "IfNotPresent" }),
    );
    for p in c
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        default(p, "protocol", json!("TCP"));
    }
}

fn default(v: &mut Value, key: &str, value: Value) {
    if v.is_object() && v.get(key).is_none_or(Value::is_null) {
        v[key] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_pull_latest_always_and_pinned_tags_when_absent() {
        let mut c = json!({"image": "nginx"});
        container(&mut c);
        assert_eq!(c["imagePullPolicy"], "Always");
        let mut c = json!({"image": "registry:5000/nginx:1.25", "ports": [{"containerPort": 80}]});
        container(&mut c);
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn workloads_roll_unless_they_say_otherwise() {
        let (defs, _) = crate::resources::initial(crate::resources::Flavor::Member);
        let registry = crate::resources::Registry::new(defs);
        let filled = |plural: &str, spec: Value| {
            let def = registry.lookup("apps", "v1", plural).expect("served");
            let mut obj = json!({ "spec": spec });
            fill(&def, &mut obj);
            obj["spec"].clone()
        };
        let d = filled("deployments", json!({}));
        assert_eq!(
            d["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let d = filled("deployments", json!({"strategy": {"type": "Recreate"}}));
        assert_eq!(d["strategy"], json!({"type": "Recreate"}));
        let s = filled("statefulsets", json!({}));
        assert_eq!(
            s["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        let s = filled(
            "statefulsets",
            json!({"updateStrategy": {"type": "OnDelete"}}),
        );
        assert_eq!(s["updateStrategy"], json!({"type": "OnDelete"}));
        let ds = filled(
            "daemonsets",
            json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}}}),
        );
        assert_eq!(
            ds["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}})
        );
    }
}
