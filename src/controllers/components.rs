//! Whether a managed instance's control plane components run: karmada-operator's pods for
//! the instance in the host (labelled `app.kubernetes.io/instance=<name>`), read by
//! every replica every `--component-check-secs` while the instance answers. A container that cannot run
//! (crash loop, image pull, bad configuration) makes the instance Degraded naming the
//! component, pod and container, until it runs again. The API's component table
//! (`api/grpc/instance_components.rs`) judges containers with the same [`failing`].

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::Value;

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};
use crate::crd::ControlPlaneUsage;
use crate::host::error::bounded;
use crate::quantity::{self, Milli};
use crate::status::{components_said, COMPONENTS_CONDITION};

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

/// What their containers request: the control plane's share of the host
/// (`Observed::control_plane`). Pods that finished hold nothing.
pub fn requests(pods: &[Value]) -> ControlPlaneUsage {
    let (mut cpu, mut memory) = (Milli::default(), Milli::default());
    let (mut counted, mut without) = (0, 0);
    let running = pods
        .iter()
        .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")));
    for pod in running {
        counted += 1;
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            let asked = |r: &str| {
                c["resources"]["requests"][r]
                    .as_str()
                    .and_then(|q| quantity::parse(q).ok())
            };
            let (c, m) = (asked("cpu"), asked("memory"));
            if c.is_none() || m.is_none() {
                without += 1;
            }
            cpu.0 += c.map_or(0, |q| q.0);
            memory.0 += m.map_or(0, |q| q.0);
        }
    }
    ControlPlaneUsage {
        pods: counted,
        cpu_requests: cpu.to_decimal(),
        memory_requests: memory.to_binary(),
        containers_without_requests: without,
    }
}

/// What one look at the component pods found.
#[derive(Debug, PartialEq)]
pub struct Checked {
    pub failing: Option<String>,
    pub usage: ControlPlaneUsage,
}

/// Reads a managed instance's component pods every `--component-check-secs` while the
/// instance answers, on every replica (each judges the instance itself, as with its
/// watches). The verdict is the first failing component (the `ComponentsHealthy`
/// condition), and what the pods request (`status.controlPlane`); when the host does not
/// answer, that is not the instance's fault and the last verdict stands.
#[derive(Default)]
pub struct Components {
    /// `--component-check-secs`, as the last look read it.
    every: Duration,
    /// The instance answered at the last look: checked again at the cadence only, not at
    /// every watched change (its own verdict moves the phase).
    answering: bool,
}

impl Controller for Components {
    const NAME: &'static str = "components";
    const LEADER_ONLY: bool = false;
    const RETRY_MAX: Duration = Duration::from_secs(30);
    type Found = Checked;

    fn reconcile(&mut self, scope: &Scope<'_>, _: &Observed, _: &mut Report) -> Next<Checked> {
        // Checked at once when the instance starts or stops answering, then at its cadence.
        let Some(operator) = scope.operator().filter(|_| scope.answering) else {
            self.answering = false;
            return Next::Wait(Action::await_change());
        };
        if self.answering && !scope.requeued() {
            return Next::Idle;
        }
        self.answering = true;
        let settings = &scope.ctx.settings;
        self.every = settings.component_check_every;
        let (host, timeout) = (scope.ctx.host.clone(), settings.host_call_timeout);
        Next::Start(Box::pin(check(host, operator, timeout)))
    }

    fn record(&mut self, Checked { failing, usage }: Checked, report: &mut Report) -> Action {
        report.control_plane = Some(usage);
        let (ok, reason, message) = components_said(failing.as_deref());
        if report.said(COMPONENTS_CONDITION).map(|c| c.status) != Some(Some(ok)) {
            match &failing {
                Some(why) => tracing::warn!(%why, "a control plane component is failing"),
                None => tracing::info!("every control plane component runs"),
            }
        }
        report.say(COMPONENTS_CONDITION, Some(ok), reason, message);
        Action::requeue(self.every)
    }
}

/// The first failing component of the managed instance `name` in namespace `ns`, and what
/// its pods request.
async fn check(
    host: kube::Client,
    (ns, name): (String, String),
    timeout: Duration,
) -> Result<Checked, ControllerError> {
    let api: Api<Pod> = Api::namespaced(host, &ns);
    let params = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let what = format!("listing the pods of {ns}/{name}");
    let list = bounded(what, timeout, api.list(&params)).await?;
    let pods: Vec<Value> = list
        .items
        .into_iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    Ok(Checked {
        failing: first_failure(&pods),
        usage: requests(&pods),
    })
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
    fn requests_add_up_over_pods_that_have_not_finished() {
        let with = |cpu: Option<&str>, memory: Option<&str>, phase: &str| {
            let mut requests = serde_json::Map::new();
            if let Some(c) = cpu {
                requests.insert("cpu".into(), json!(c));
            }
            if let Some(m) = memory {
                requests.insert("memory".into(), json!(m));
            }
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
                "status": {"phase": phase}})
        };
        let pods = [
            with(Some("250m"), Some("512Mi"), "Running"),
            with(Some("1"), Some("1Gi"), "Pending"),
            with(None, Some("256Mi"), "Running"),
            with(Some("4"), Some("8Gi"), "Succeeded"),
        ];
        assert_eq!(
            requests(&pods),
            ControlPlaneUsage {
                pods: 3,
                cpu_requests: "1250m".into(),
                memory_requests: "1792Mi".into(),
                containers_without_requests: 1,
            }
        );
        assert_eq!(requests(&[]).cpu_requests, "0");
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

#[cfg(test)]
mod host_tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::testing::{context, fresh, instance, mock, run, says, Look};

    #[tokio::test]
    async fn a_crash_looping_pod_fails_the_condition_and_what_pods_request_is_reported() {
        let (host, calls) = mock(|call| {
            call.path
                .starts_with("/api/v1/namespaces/karmada-system/pods?")
                .then(|| {
                    let pod = |name: &str, waiting: Option<&str>| {
                        let state = match waiting {
                            Some(r) => json!({"waiting": {"reason": r}}),
                            None => json!({"running": {}}),
                        };
                        json!({"metadata": {"name": name, "labels": {"app.kubernetes.io/name": name}},
                               "spec": {"containers": [{"name": name, "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                               "status": {"phase": "Running", "containerStatuses": [{"name": name, "state": state}]}})
                    };
                    let items = vec![
                        pod("karmada-apiserver", None),
                        pod("karmada-scheduler", Some("CrashLoopBackOff")),
                    ];
                    (200, json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}))
                })
        });
        let settings = crate::context::Settings {
            component_check_every: Duration::from_secs(30),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-m"), context(host.clone(), settings));
        look.certificate_inputs = Some(crate::certificates::Inputs {
            operator: Some(("karmada-system".into(), "team-m".into())),
            ..Default::default()
        });
        let (observed, mut report) = fresh();
        let mut c = Components::default();
        assert!(
            matches!(
                c.reconcile(&look.scope(), &observed, &mut report),
                Next::Wait(a) if a == Action::await_change()
            ),
            "an instance that does not answer is not judged by its pods"
        );
        look = look.connected(host);
        let checked = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("listed");
        assert_eq!(
            c.record(checked, &mut report),
            Action::requeue(Duration::from_secs(30))
        );
        let asked = calls.all();
        assert!(
            asked.iter().any(|c| c.path
                == "/api/v1/namespaces/karmada-system/pods?&labelSelector=app.kubernetes.io%2Finstance%3Dteam-m"),
            "the instance's pods, by its label: {asked:?}"
        );
        let failing = "karmada-scheduler";
        says(
            &report,
            COMPONENTS_CONDITION,
            Some(false),
            "ComponentFailing",
            failing,
        );
        let usage = report.control_plane.clone().expect("usage");
        assert_eq!(
            (
                usage.pods,
                usage.cpu_requests.as_str(),
                usage.memory_requests.as_str()
            ),
            (2, "200m", "256Mi")
        );
        assert!(
            crate::controllers::testing::idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "its own verdict moving the phase does not check again before its cadence"
        );
    }

    #[tokio::test]
    async fn a_host_that_does_not_answer_is_an_error_not_a_verdict() {
        let (host, _) = mock(|_| {
            Some((
                503,
                crate::controllers::testing::status(503, "ServiceUnavailable", "down"),
            ))
        });
        let mut look = Look::new(
            instance("team-m"),
            context(host.clone(), Default::default()),
        )
        .connected(host);
        look.certificate_inputs = Some(crate::certificates::Inputs {
            operator: Some(("karmada-system".into(), "team-m".into())),
            ..Default::default()
        });
        let (observed, mut report) = fresh();
        let mut c = Components::default();
        let e = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect_err("the host failed");
        assert!(
            e.to_string()
                .contains("listing the pods of karmada-system/team-m"),
            "{e}"
        );
        assert!(
            report.said(COMPONENTS_CONDITION).is_none(),
            "the last verdict stands"
        );
    }
}
