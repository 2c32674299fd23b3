//! Events the Karmada controllers record, as client-go's recorder writes them: a core/v1
//! Event in the involved object's namespace ("default" for cluster-scoped objects) naming
//! the object, a reason and a message. Reasons and messages are Karmada's own
//! (`pkg/events`), so a console reading them from the simulator reads what it would read
//! from real Karmada.

use serde_json::{json, Value};
use tracing::{debug, warn};

use super::Controller;
use crate::store::meta::now_rfc3339;

pub const SCHEDULER: &str = "default-scheduler";
pub const CONTROLLER_MANAGER: &str = "karmada-controller-manager";

/// One Event about `object` (a full object, or the `spec.resource` reference of a binding).
/// Failing to record is logged, never fatal, as with client-go's recorder.
pub fn record(
    c: &Controller,
    object: &Value,
    warning: bool,
    reason: &str,
    message: &str,
    component: &str,
) {
    let meta = if object["metadata"].is_object() {
        &object["metadata"]
    } else {
        object
    };
    let name = meta["name"].as_str().unwrap_or_default();
    let namespace = meta["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let now = now_rfc3339();
    // client-go names events `<object>.<hex nanoseconds>`.
    let suffix = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{suffix}"), "namespace": namespace},
        "involvedObject": {
            "apiVersion": object["apiVersion"], "kind": object["kind"],
            "name": name, "namespace": meta["namespace"], "uid": meta["uid"],
        },
        "reason": reason,
        "message": message,
        "type": if warning { "Warning" } else { "Normal" },
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "eventTime": Value::Null,
    });
    let written = c
        .def("", "v1", "events")
        .and_then(|def| c.store().create(&def, Some(namespace), event));
    match written {
        // Named after an object whose name is no valid Event name (ClusterRoles such as
        // `kairship:view`): kube-apiserver rejects it as it does Karmada's, whose recorder
        // drops it. Not worth a warning per pass.
        Err(e) if e.code == 422 => {
            debug!(reason, object = name, error = %e, "event rejected as invalid");
        }
        Err(e) => warn!(reason, object = name, error = %e, "recording an event failed"),
        Ok(_) => {}
    }
}

/// `{member1:1, member2:1}` as Karmada's scheduler prints a result.
pub fn targets(clusters: &Value) -> String {
    clusters
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["name"].as_str().unwrap_or_default(),
                t["replicas"].as_i64().unwrap_or(0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
