//! Clients that keep using Kairship through its Service while pods come and go, and count
//! what a user would have seen: failed requests, how long reads failed in a row, and how
//! each watch ended (a clean end the client resumes from its last resourceVersion, or a
//! reset).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::discovery::ApiResource;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What one client saw.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub what: String,
    pub ok: u64,
    pub failed: u64,
    /// The longest run of failures: from the first failure to the next success.
    pub longest_outage: Duration,
    pub errors: Vec<String>,
    /// Watches: streams that ended cleanly (and were resumed), and streams cut by an error.
    pub clean_ends: u64,
    pub resets: u64,
    pub events: u64,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:<28} ok {:>5}  failed {:>3}  longest outage {:>6.2}s",
            self.what,
            self.ok,
            self.failed,
            self.longest_outage.as_secs_f64()
        )?;
        if self.events > 0 || self.clean_ends > 0 || self.resets > 0 {
            write!(
                f,
                "  events {:>4}  clean ends {}  resets {}",
                self.events, self.clean_ends, self.resets
            )?;
        }
        if let Some(e) = self.errors.first() {
            write!(f, "  first error: {e}")?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Counter {
    tally: Tally,
    failing_since: Option<Instant>,
}

impl Counter {
    fn ok(&mut self) {
        self.tally.ok += 1;
        if let Some(since) = self.failing_since.take() {
            self.tally.longest_outage = self.tally.longest_outage.max(since.elapsed());
        }
    }

    fn failed(&mut self, e: String) {
        self.tally.failed += 1;
        self.failing_since.get_or_insert_with(Instant::now);
        if self.tally.errors.len() < 5 {
            self.tally.errors.push(e);
        }
    }

    fn finish(mut self) -> Tally {
        if let Some(since) = self.failing_since.take() {
            self.tally.longest_outage = self.tally.longest_outage.max(since.elapsed());
        }
        self.tally
    }
}

/// Per request, generous on a loaded 2-core machine: a slow answer is not a failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
const PERIOD: Duration = Duration::from_millis(100);

pub struct Readers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<Tally>>,
}

fn deployments() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apps", "v1", "Deployment"),
        "deployments",
    )
}

fn configmaps() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    )
}

/// Runs `call` every PERIOD until stopped, counting.
fn poll<F, Fut>(what: &str, mut stop: watch::Receiver<bool>, mut call: F) -> JoinHandle<Tally>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let what = what.to_string();
    tokio::spawn(async move {
        let mut c = Counter {
            tally: Tally {
                what,
                ..Tally::default()
            },
            failing_since: None,
        };
        while !*stop.borrow() {
            match tokio::time::timeout(REQUEST_TIMEOUT, call()).await {
                Ok(Ok(())) => c.ok(),
                Ok(Err(e)) => c.failed(e),
                Err(_) => c.failed(format!("no answer within {REQUEST_TIMEOUT:?}")),
            }
            tokio::select! {
                _ = tokio::time::sleep(PERIOD) => {}
                _ = stop.changed() => {}
            }
        }
        c.finish()
    })
}

/// Watches `ar` in `default` from a LIST's version, resuming from the last version seen
/// whenever the stream ends; an error ending a stream counts as a reset.
fn watcher(
    what: &str,
    client: kube::Client,
    ar: ApiResource,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<Tally> {
    let what = what.to_string();
    tokio::spawn(async move {
        let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
        let mut c = Counter {
            tally: Tally {
                what,
                ..Tally::default()
            },
            failing_since: None,
        };
        let mut rv: Option<String> = None;
        while !*stop.borrow() {
            let from = match &rv {
                Some(v) => v.clone(),
                None => {
                    match tokio::time::timeout(REQUEST_TIMEOUT, api.list(&ListParams::default()))
                        .await
                    {
                        Ok(Ok(list)) => {
                            c.ok();
                            list.metadata.resource_version.unwrap_or_default()
                        }
                        Ok(Err(e)) => {
                            c.failed(format!("list: {e}"));
                            tokio::time::sleep(PERIOD).await;
                            continue;
                        }
                        Err(_) => {
                            c.failed("list: no answer".into());
                            continue;
                        }
                    }
                }
            };
            let params = WatchParams::default().timeout(290);
            let stream =
                match tokio::time::timeout(REQUEST_TIMEOUT, api.watch(&params, &from)).await {
                    Ok(Ok(s)) => {
                        c.ok();
                        s
                    }
                    Ok(Err(e)) => {
                        c.failed(format!("watch: {e}"));
                        rv = None;
                        tokio::time::sleep(PERIOD).await;
                        continue;
                    }
                    Err(_) => {
                        c.failed("watch: no answer".into());
                        continue;
                    }
                };
            let mut stream = stream.boxed();
            let ended = loop {
                tokio::select! {
                    ev = stream.next() => match ev {
                        None => break Ok(()),
                        Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o))) => {
                            c.tally.events += 1;
                            rv = o.metadata.resource_version.or(rv.take());
                        }
                        Some(Ok(WatchEvent::Bookmark(b))) => rv = Some(b.metadata.resource_version),
                        // 410 Gone: relist, as clients do.
                        Some(Ok(WatchEvent::Error(e))) => {
                            rv = None;
                            break Err(format!("watch error event: {}", e.message));
                        }
                        Some(Err(e)) => break Err(format!("watch stream: {e}")),
                    },
                    _ = stop.changed() => return c.finish(),
                }
            };
            match ended {
                Ok(()) => c.tally.clean_ends += 1,
                Err(e) if e.starts_with("watch error event") => c.tally.clean_ends += 1,
                Err(e) => {
                    c.tally.resets += 1;
                    if c.tally.errors.len() < 5 {
                        c.tally.errors.push(e);
                    }
                }
            }
        }
        c.finish()
    })
}

impl Readers {
    /// Reads (proxy from the cache, REST, gRPC), writes (a ConfigMap and a Deployment
    /// annotation through the proxy) and watches (a cached kind and a passed-through one)
    /// through the Service described by `endpoints`.
    pub async fn start(endpoints: &Value) -> Self {
        Self::start_on(endpoints, 0).await
    }

    /// As [`start`](Self::start), on the demo's `index`th instance (each seeded alike).
    pub async fn start_on(endpoints: &Value, index: usize) -> Self {
        let (stop, rx) = watch::channel(false);
        let token = endpoints["tokens"]["admin"]
            .as_str()
            .expect("admin token")
            .to_string();
        let instance = endpoints["instances"][index]["kubeconfig"]
            .as_str()
            .expect("kubeconfig");
        let proxy = client_from_path(instance).await;
        let ca = std::fs::read_to_string(endpoints["ca"].as_str().expect("ca")).expect("ca file");
        let https = endpoints["http"].as_str().expect("http").to_string();
        let root = client_from_value(kairship_wire::kubeconfig::build(
            "root", &https, &ca, &token,
        ))
        .await;
        let grpc = kairship::cli::ctl::grpc_endpoint(
            &format!("https://{}", endpoints["grpc"].as_str().expect("grpc")),
            Some(&std::fs::read_to_string(endpoints["ca"].as_str().expect("ca")).expect("the CA")),
        )
        .expect("grpc address")
        .connect_timeout(Duration::from_secs(1))
        // A pod that vanished leaves its connection silent: notice within seconds.
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(1))
        .connect_lazy();
        let name = endpoints["instances"][index]["name"]
            .as_str()
            .expect("name")
            .to_string();

        let mut tasks = Vec::new();
        {
            let api: Api<DynamicObject> =
                Api::namespaced_with(proxy.clone(), "default", &deployments());
            tasks.push(poll("proxy GET (cache)", rx.clone(), move || {
                let api = api.clone();
                async move {
                    api.get("nginx")
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
            }));
        }
        {
            let root = root.clone();
            tasks.push(poll("REST list instances", rx.clone(), move || {
                let root = root.clone();
                async move {
                    let req = http::Request::get("/apis/kairship.io/v1alpha1/instances")
                        .body(Vec::new())
                        .map_err(|e| e.to_string())?;
                    root.request_text(req)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
            }));
        }
        {
            let (grpc, token, name) = (grpc.clone(), token.clone(), name.clone());
            tasks.push(poll("gRPC GetInstance", rx.clone(), move || {
                let mut client =
                    kairship::proto::instance_service_client::InstanceServiceClient::new(
                        grpc.clone(),
                    );
                let mut req =
                    tonic::Request::new(kairship::proto::GetInstanceRequest { name: name.clone() });
                let auth = format!("Bearer {token}").parse();
                async move {
                    req.metadata_mut()
                        .insert("authorization", auth.map_err(|_| "token".to_string())?);
                    client
                        .get_instance(req)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
            }));
        }
        {
            let cms: Api<DynamicObject> =
                Api::namespaced_with(proxy.clone(), "default", &configmaps());
            let n = Arc::new(Mutex::new(0u64));
            tasks.push(poll("proxy write (ConfigMap)", rx.clone(), move || {
                let (cms, n) = (cms.clone(), n.clone());
                async move {
                    let i = {
                        let mut n = n.lock();
                        *n += 1;
                        *n
                    };
                    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rollout-probe"}, "data": {"n": i.to_string()}});
                    cms.patch("rollout-probe", &PatchParams::apply("rollout-test").force(), &Patch::Apply(&cm))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
            }));
        }
        {
            let deps: Api<DynamicObject> =
                Api::namespaced_with(proxy.clone(), "default", &deployments());
            tasks.push(poll("proxy patch (Deployment)", rx.clone(), move || {
                let deps = deps.clone();
                async move {
                    let p = json!({"metadata": {"annotations": {"rollout-test/at": format!("{:?}", Instant::now())}}});
                    deps.patch("nginx", &PatchParams::default(), &Patch::Merge(&p)).await.map(|_| ()).map_err(|e| e.to_string())
                }
            }));
        }
        tasks.push(watcher(
            "watch Deployments (cache)",
            proxy.clone(),
            deployments(),
            rx.clone(),
        ));
        tasks.push(watcher(
            "watch ConfigMaps (instance)",
            proxy,
            configmaps(),
            rx,
        ));
        Self { stop, tasks }
    }

    pub async fn stop(self) -> Vec<Tally> {
        let _ = self.stop.send(true);
        let mut out = Vec::new();
        for t in self.tasks {
            out.push(t.await.expect("reader task"));
        }
        out
    }
}

async fn client_from_value(kubeconfig: Value) -> kube::Client {
    let kc: kube::config::Kubeconfig = serde_json::from_value(kubeconfig).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    config.connect_timeout = Some(Duration::from_secs(1));
    config.read_timeout = Some(Duration::from_secs(300));
    kube::Client::try_from(config).expect("client")
}

pub async fn client_from_path(path: &str) -> kube::Client {
    let text = std::fs::read_to_string(path).expect("kubeconfig file");
    client_from_value(serde_json::from_str(&text).expect("kubeconfig is JSON")).await
}
