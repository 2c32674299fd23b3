//! The supervision tree's restart policy as the actors apply it, on tokio's paused clock:
//! the host is answered in memory (no socket, so the clock only moves when every task
//! waits on a timer), and the production policy's backoff steps, its limit and its
//! window are checked to the millisecond of virtual time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use kairship::actors::supervision::ActorState;
use kairship::actors::tree::Tree;
use kairship::context::Settings;
use kairship::crd::{ExternalSpec, Instance, InstanceMode, InstanceSpec, SecretKeyRef};
use kairship::host::backoff::RestartPolicy;
use kube::Resource;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::common::eventually;
use crate::harness::actor;

type Body = BoxBody<Bytes, Infallible>;

/// A host cluster holding one External Instance whose kubeconfig Secret is missing (the
/// actor runs, and never opens a socket); it records the Instance status it is sent.
#[derive(Clone, Default)]
struct MemoryHost {
    statuses: Arc<Mutex<Vec<Value>>>,
}

impl MemoryHost {
    fn instance() -> Value {
        let spec = InstanceSpec {
            mode: InstanceMode::External,
            external: Some(ExternalSpec {
                kubeconfig_secret_ref: SecretKeyRef {
                    namespace: "kairship-system".into(),
                    name: "karmada-1-kubeconfig".into(),
                    key: None,
                },
            }),
            managed: None,
            paused: false,
            cache_budget: None,
            backup_schedule: None,
            maintenance_window: None,
            class_name: None,
            guardrails: Vec::new(),
            hibernation: None,
        };
        let mut i = serde_json::to_value(Instance::new("karmada-1", spec)).unwrap_or_default();
        i["metadata"]["resourceVersion"] = json!("1");
        i["metadata"]["uid"] = json!("7d0c1d8e-0000-4000-8000-000000000001");
        i
    }

    fn answer(&self, method: &Method, path: &str, query: &str, body: &[u8]) -> Response<Body> {
        let instances = format!("/apis/{}/instances", Instance::api_version(&()));
        let json = |code: StatusCode, v: Value| {
            Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(v.to_string())).boxed())
                .unwrap_or_default()
        };
        if path == instances && query.contains("watch=true") {
            // A watch that stays open and quiet.
            let quiet = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>();
            return Response::new(StreamBody::new(quiet).boxed());
        }
        if path == instances && method == Method::GET {
            let list = json!({
                "apiVersion": Instance::api_version(&()),
                "kind": "InstanceList",
                "metadata": {"resourceVersion": "1"},
                "items": [Self::instance()],
            });
            return json(StatusCode::OK, list);
        }
        if path.starts_with(&format!("{instances}/karmada-1/status")) {
            let sent: Value = serde_json::from_slice(body).unwrap_or_default();
            self.statuses.lock().push(sent["status"].clone());
            return json(StatusCode::OK, Self::instance());
        }
        if method == Method::POST {
            let sent: Value = serde_json::from_slice(body).unwrap_or_default();
            return json(StatusCode::CREATED, sent);
        }
        json(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "reason": "NotFound", "code": 404, "message": format!("{path} not found")}),
        )
    }

    fn client(&self) -> kube::Client {
        let host = self.clone();
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let host = host.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let query = parts.uri.query().unwrap_or_default().to_string();
                Ok::<_, Infallible>(host.answer(&parts.method, parts.uri.path(), &query, &body))
            }
        });
        kube::Client::new(service, "default")
    }

    fn reported_degraded(&self) -> bool {
        self.statuses
            .lock()
            .iter()
            .any(|s| s["phase"] == "Degraded")
    }
}

/// Sends a panic to the instance actor and waits until it runs again with `restarts`
/// failures counted; returns the virtual time that took.
async fn panic_and_wait_restart(tree: &Tree, restarts: u32) -> Duration {
    let started = Instant::now();
    assert!(
        tree.inject_panic("karmada-1")
            .await
            .expect("manager answers"),
        "a live actor took the panic"
    );
    eventually(
        Duration::from_secs(600),
        "the actor to run again",
        || async {
            actor(tree, "karmada-1")
                .await
                .filter(|a| a.restart_count == restarts && a.state == ActorState::Running)
        },
    )
    .await;
    started.elapsed()
}

/// Whether `took` is the backoff step `nominal` (jitter adds up to one more step) plus at
/// most one poll of the test's wait.
fn is_step(took: Duration, nominal: Duration) -> bool {
    took >= nominal && took <= nominal * 2 + kairship_test_support::POLL
}

#[tokio::test(start_paused = true)]
async fn restarts_back_off_then_degrade_and_the_window_forgets_on_the_runtime_clock() {
    let host = MemoryHost::default();
    let policy = RestartPolicy::default();
    let settings = Settings {
        restart: policy.clone(),
        ..Settings::default()
    };
    let tree = Tree::start(host.client(), None, "paused", settings)
        .await
        .expect("tree starts");
    eventually(Duration::from_secs(60), "the instance actor", || async {
        actor(&tree, "karmada-1")
            .await
            .filter(|a| a.state == ActorState::Running)
    })
    .await;

    // Each failure within the window waits the next step of the backoff.
    let mut nominal = policy.min_delay;
    for restarts in 1..=policy.max_restarts as u32 {
        let took = panic_and_wait_restart(&tree, restarts).await;
        assert!(
            is_step(took, nominal),
            "restart {restarts} took {took:?}, the step is {nominal:?}"
        );
        nominal = (nominal * 2).min(policy.max_delay);
    }

    // One more within the window is past the limit: Degraded, reported on the Instance,
    // and tried again only after `degraded_retry`.
    let started = Instant::now();
    assert!(tree
        .inject_panic("karmada-1")
        .await
        .expect("manager answers"));
    let degraded = eventually(Duration::from_secs(5), "Degraded", || async {
        actor(&tree, "karmada-1")
            .await
            .filter(|a| a.state == ActorState::Degraded)
    })
    .await;
    assert!(
        degraded
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("chaos")),
        "{degraded:?}"
    );
    eventually(
        Duration::from_secs(5),
        "Degraded on the Instance",
        || async { host.reported_degraded().then_some(()) },
    )
    .await;
    let retried = policy.max_restarts as u32 + 1;
    eventually(
        Duration::from_secs(600),
        "the Degraded actor's retry",
        || async {
            actor(&tree, "karmada-1")
                .await
                .filter(|a| a.restart_count == retried && a.state == ActorState::Running)
        },
    )
    .await;
    let took = started.elapsed();
    assert!(
        took >= policy.degraded_retry
            && took <= policy.degraded_retry + kairship_test_support::POLL,
        "the retry came after {took:?}, not {:?}",
        policy.degraded_retry
    );

    // Once the failures have left the window, a failure waits the first step again.
    tokio::time::sleep(policy.window).await;
    let took = panic_and_wait_restart(&tree, retried + 1).await;
    assert!(
        is_step(took, policy.min_delay),
        "after the window the restart took {took:?}"
    );
    tree.shutdown().await;
}
