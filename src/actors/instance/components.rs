//! Whether a managed instance's control plane components run: karmada-operator's pods for
//! the instance in the host (labelled `app.kubernetes.io/instance=<name>`), read by
//! every replica every `--component-check-secs` while the instance answers. A container that cannot run
//! (crash loop, image pull, bad configuration) makes the instance Degraded naming the
//! component, pod and container, until it runs again. The API's component table
//! (`api/grpc/instance_components.rs`) judges containers with the same [`failing`].

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::Value;

/// Why a container waits that means it is failing, not merely starting.
const WAITING_FAILURES: [&str; 5] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// The first failing container of `pod` (a pod as JSON): `pod P container C: Reason`.
pub fn failing(pod: &Value) -> Option<String> {
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .into_iter()
        .flat_map(|k| pod["status"][k].as_array().into_iter().flatten());
    for c in statuses {
        if let Some(reason) = c["state"]["waiting"]["reason"].as_str() {
            if WAITING_FAILURES.contains(&reason) {
                return Some(format!(
                    "pod {} container {}: {reason}",
                    pod["metadata"]["name"].as_str().unwrap_or_default(),
                    c["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    None
}

/// The first failing component among `pods`, by component name (the operator's
/// `app.kubernetes.io/name` label): `component karmada-scheduler: pod P container C: Reason`.
pub fn first_failure(pods: &[Value]) -> Option<String> {
    let mut found: Vec<(String, String)> = pods
        .iter()
        .filter_map(|p| {
            let why = failing(p)?;
            let labels = &p["metadata"]["labels"];
            let name = labels["app.kubernetes.io/name"]
                .as_str()
                .or_else(|| p["metadata"]["name"].as_str())
                .unwrap_or_default();
            Some((name.to_string(), why))
        })
        .collect();
    found.sort();
    let (name, why) = found.into_iter().next()?;
    Some(format!("component {name}: {why}"))
}

/// The latest check, and when it is due again.
#[derive(Debug, Default)]
pub struct Checks {
    pub in_flight: bool,
    pub last: Option<Instant>,
    /// The first failing component at the last check that could read the pods.
    pub failing: Option<String>,
}

impl Checks {
    pub fn due(&self, every: Duration) -> bool {
        !self.in_flight && self.last.is_none_or(|t| t.elapsed() >= every)
    }
}

/// Starts a check of the components of the managed instance `name` in namespace `ns`;
/// the verdict comes back as `InstanceMsg::Components` (an error when the host did not
/// answer: that is not the instance's fault, and the previous verdict stands).
pub fn start(
    me: &ractor::ActorRef<super::InstanceMsg>,
    host: kube::Client,
    (ns, name): (String, String),
    timeout: Duration,
    checks: &mut Checks,
) {
    checks.in_flight = true;
    let me = me.clone();
    super::spawn_here(async move {
        let api: Api<Pod> = Api::namespaced(host, &ns);
        let params = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
        let verdict = match tokio::time::timeout(timeout, api.list(&params)).await {
            Ok(Ok(list)) => {
                let pods: Vec<Value> = list
                    .items
                    .into_iter()
                    .filter_map(|p| serde_json::to_value(p).ok())
                    .collect();
                Ok(first_failure(&pods))
            }
            Ok(Err(e)) => Err(format!("listing the pods of {ns}/{name}: {e}")),
            Err(_) => Err(format!(
                "listing the pods of {ns}/{name}: the host did not answer within {timeout:?}"
            )),
        };
        let _ = me.send_message(super::InstanceMsg::Components(verdict));
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, component: &str, waiting: Option<&str>) -> Value {
        let state = match waiting {
            Some(r) => json!({"waiting": {"reason": r}}),
            None => json!({"running": {}}),
        };
        json!({"metadata": {"name": name, "labels": {"app.kubernetes.io/name": component}},
            "status": {"containerStatuses": [{"name": component, "state": state}]}})
    }

    #[test]
    fn a_failing_container_names_its_component_pod_and_reason() {
        let pods = [
            pod("sched-1", "karmada-scheduler", Some("CrashLoopBackOff")),
            pod("api-1", "karmada-apiserver", None),
            pod(
                "cm-1",
                "karmada-controller-manager",
                Some("ContainerCreating"),
            ),
            pod(
                "agg-1",
                "karmada-aggregated-apiserver",
                Some("ImagePullBackOff"),
            ),
        ];
        assert_eq!(
            first_failure(&pods).as_deref(),
            Some("component karmada-aggregated-apiserver: pod agg-1 container karmada-aggregated-apiserver: ImagePullBackOff")
        );
        // Starting is not failing.
        assert_eq!(first_failure(&pods[1..3]), None);
    }
}
