//! Controllers' unit tests against a mocked host: a real `kube::Client` over a service
//! that answers from a closure and records every request, as kube-rs's own controller
//! tests do with `tower-test`, without making each test order the answers. Unanswered
//! requests get what an empty apiserver says: an empty list, a watch that stays open,
//! 404 for a get, the object back for a write.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::{Observed, Report, Scope};
use crate::context::{Context, Counters, Settings};
use crate::crd::Instance;

/// One request the mock was sent.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub body: Value,
}

impl Call {
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }
}

type Answer = dyn Fn(&Call) -> Option<(u16, Value)> + Send + Sync;

/// What the mock was asked, shared with its client.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    /// Every request but watches, in order.
    pub fn all(&self) -> Vec<Call> {
        self.0.lock().clone()
    }

    pub fn writes(&self) -> Vec<Call> {
        self.all().into_iter().filter(Call::is_write).collect()
    }
}

/// A client whose server is `answer` (`None`: the empty apiserver's answer).
pub fn mock(
    answer: impl Fn(&Call) -> Option<(u16, Value)> + Send + Sync + 'static,
) -> (kube::Client, Calls) {
    let calls = Calls::default();
    let answer: Arc<Answer> = Arc::new(answer);
    let recorded = calls.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (answer, recorded) = (answer.clone(), recorded.clone());
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let call = Call {
                method: parts.method.to_string(),
                path: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            if call.method == "GET" && call.path.contains("watch=true") {
                let open: BoxBody<Bytes, Infallible> = StreamBody::new(futures::stream::pending::<
                    Result<http_body::Frame<Bytes>, Infallible>,
                >())
                .boxed();
                return Ok::<_, Infallible>(http::Response::new(open));
            }
            recorded.0.lock().push(call.clone());
            let (code, value) = answer(&call).unwrap_or_else(|| empty_apiserver(&call));
            let mut response = http::Response::new(
                Full::new(Bytes::from(value.to_string()))
                    .map_err(|e| match e {})
                    .boxed(),
            );
            *response.status_mut() = http::StatusCode::from_u16(code).unwrap_or_default();
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            Ok(response)
        }
    });
    (kube::Client::new(service, "default"), calls)
}

/// What an apiserver holding nothing answers.
fn empty_apiserver(call: &Call) -> (u16, Value) {
    let path = call.path.split('?').next().unwrap_or_default();
    let segments = path.trim_matches('/').split('/').count();
    // `/api/v1/pods` (3), `/api/v1/namespaces/ns/pods` (5), `/apis/g/v/...` one more.
    let collection = match path.starts_with("/apis/") {
        true => segments == 4 || (segments == 6 && path.contains("/namespaces/")),
        false => segments == 3 || (segments == 5 && path.contains("/namespaces/")),
    };
    match call.method.as_str() {
        "GET" if collection => (
            200,
            json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []}),
        ),
        "GET" => (404, status(404, "NotFound", "not found")),
        "DELETE" => (200, status(200, "", "deleted")),
        "POST" => (201, call.body.clone()),
        _ => (200, call.body.clone()),
    }
}

/// A `meta/v1 Status`.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 400 { "Success" } else { "Failure" },
        "reason": reason, "message": message, "code": code,
    })
}

/// The context an instance actor is handed, on `host`, this replica leading.
pub fn context(host: kube::Client, settings: Settings) -> Context {
    Context {
        instances: crate::host::instance_informer::InstanceInformer::start(&host),
        rollouts: crate::host::rollouts::FleetRollouts::start(&host),
        classes: crate::host::watched::Watched::start(&host),
        cluster_profiles: crate::controllers::cluster_profiles::watch(&host),
        shards: None,
        leadership: crate::host::leader::Leadership::always("test-replica"),
        host,
        settings: Arc::new(settings),
        counters: Arc::new(Counters::default()),
        routes: Default::default(),
        starts: Arc::new(tokio::sync::Semaphore::new(1)),
    }
}

/// An External Instance named `name`, as the host would hold it.
pub fn instance(name: &str) -> Instance {
    serde_json::from_value(json!({
        "apiVersion": "kairship.io/v1alpha1", "kind": "Instance",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1},
        "spec": {"mode": "External", "external": {"kubeconfigSecretRef": {"namespace": "kairship-system", "name": name}}},
    }))
    .unwrap_or_else(|e| panic!("an Instance: {e}"))
}

/// What a controller sees at one tick, built by a test.
pub struct Look {
    pub instance: Instance,
    pub ctx: Context,
    pub client: Option<kube::Client>,
    pub connected: bool,
    pub answering: bool,
    pub certificate_inputs: Option<crate::certificates::Inputs>,
    pub kubeconfig_source: Option<crate::host::kubeconfig::KubeconfigSource>,
    pub traffic: crate::cache::traffic::Traffic,
    pub requeued: bool,
}

impl Look {
    pub fn new(instance: Instance, ctx: Context) -> Self {
        Self {
            instance,
            ctx,
            client: None,
            connected: false,
            answering: false,
            certificate_inputs: None,
            kubeconfig_source: None,
            traffic: Default::default(),
            requeued: false,
        }
    }

    /// Connected and answering through `client`.
    pub fn connected(mut self, client: kube::Client) -> Self {
        (self.client, self.connected, self.answering) = (Some(client), true, true);
        self
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope {
            name: self.instance.metadata.name.as_deref().unwrap_or_default(),
            instance: &self.instance,
            ctx: &self.ctx,
            client: self.client.as_ref(),
            connected: self.connected,
            answering: self.answering,
            namespaces: None,
            clusters: None,
            kubeconfig_source: self.kubeconfig_source.as_ref(),
            certificate_inputs: self.certificate_inputs.as_ref(),
            traffic: &self.traffic,
            runs: &[],
            requeued: self.requeued,
        }
    }
}

/// Waits until the context's Instance informer holds `name` (the mock lists it).
pub async fn listed(look: &Look) {
    for _ in 0..100 {
        if look.scope().latest().is_some() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the Instance informer never listed the mocked host");
}

/// A host answer listing `items` as `kind`.
pub fn list(kind: &str, items: Vec<Value>) -> Option<(u16, Value)> {
    Some((
        200,
        json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": "5"}, "items": items}),
    ))
}

/// Fails the test unless `report` says condition `type_` with `status` and `reason`, its
/// message naming `names`.
pub fn says(report: &Report, type_: &str, status: Option<bool>, reason: &str, names: &str) {
    let Some(said) = report.said(type_) else {
        panic!("the report says nothing of {type_}: {report:?}");
    };
    assert_eq!(
        (said.status, said.reason.as_str()),
        (status, reason),
        "{type_}"
    );
    assert!(said.message.contains(names), "{type_}: {}", said.message);
}

/// Runs what `reconcile` started, or fails the test naming what it did instead.
pub async fn run<T>(next: super::Next<T>) -> Result<T, super::ControllerError> {
    match next {
        super::Next::Start(work) => work.await,
        super::Next::Idle => panic!("expected work, the controller stayed idle"),
        super::Next::Wait(a) => panic!("expected work, the controller waits: {a:?}"),
    }
}

/// Whether `reconcile` started nothing.
pub fn idle<T>(next: &super::Next<T>) -> bool {
    !matches!(next, super::Next::Start(_))
}

/// A fresh observation and report, for a controller's first look.
pub fn fresh() -> (Observed, Report) {
    (Observed::default(), Report::default())
}
