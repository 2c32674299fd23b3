//! Each member cluster's Nodes, following its Cluster object's node summary (how many,
//! how many Ready) so clients listing a member's Nodes see what Karmada reports.

use serde_json::{json, Value};

use super::Controller;
use crate::patch::PatchKind;
use crate::store::Filter;
use kairship_wire::status::ApiResult;

fn count(v: &Value, path: &str) -> u64 {
    v.pointer(path).and_then(Value::as_u64).unwrap_or(0)
}

pub fn run(c: &Controller) -> ApiResult<()> {
    for cluster in c.list("cluster.karmada.io", "v1alpha1", "clusters")? {
        let Some(name) = cluster["metadata"]["name"].as_str() else {
            continue;
        };
        let member = c.members.store(name)?;
        let Some(def) = member.lookup("", "v1", "nodes") else {
            continue;
        };
        let total = count(&cluster, "/status/nodeSummary/totalNum");
        let ready = count(&cluster, "/status/nodeSummary/readyNum");
        let k8s = cluster["status"]["kubernetesVersion"]
            .as_str()
            .unwrap_or("v1.31.3");
        let existing = member.list(&def, &Filter::default(), None, None)?.items;
        for i in 0..total {
            let node = format!("{name}-node-{i}");
            let status = json!({
                "conditions": [{"type": "Ready", "status": if i < ready { "True" } else { "False" },
                    "reason": if i < ready { "KubeletReady" } else { "NodeStatusUnknown" }}],
                "nodeInfo": {"kubeletVersion": k8s},
            });
            match existing.iter().find(|o| o.name() == node) {
                None => {
                    let obj = json!({"apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                        "status": status});
                    member.create(&def, None, obj)?;
                }
                Some(o) if o.value["status"] != status => {
                    let body = json!({"status": status});
                    member.patch(
                        &def,
                        None,
                        &node,
                        PatchKind::Merge,
                        body.to_string().as_bytes(),
                        true,
                    )?;
                }
                Some(_) => {}
            }
        }
        for o in existing.iter().filter(|o| {
            o.name()
                .strip_prefix(&format!("{name}-node-"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_none_or(|n| n >= total)
        }) {
            let _ = member.delete(&def, None, o.name(), Default::default());
        }
    }
    Ok(())
}
