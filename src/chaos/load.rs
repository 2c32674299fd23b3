//! Steady load on every instance through each of Kairship's surfaces (gRPC, REST, the
//! proxy's JSON and kubectl's Table form, writes kept in a ledger, watches that must stay
//! open), every answer recorded with its time and latency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::Semaphore;

use crate::proto;

/// Every request gives up after this: an answer this late is an error.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times the ledger's read of an instance is tried.
const LEDGER_ATTEMPTS: u32 = 4;
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
const RUN_LABEL: &str = "kairship.io/chaos-run";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Surface {
    Grpc,
    Rest,
    ProxyJson,
    ProxyTable,
    Write,
}

pub const SURFACES: [Surface; 5] = [
    Surface::Grpc,
    Surface::Rest,
    Surface::ProxyJson,
    Surface::ProxyTable,
    Surface::Write,
];

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Milliseconds since the experiment started.
    pub t_ms: u32,
    pub instance: u16,
    pub surface: Surface,
    pub latency_us: u32,
    pub ok: bool,
}

/// What `kairship demo` wrote to `endpoints.json`, as the load needs it.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub grpc: String,
    pub http: String,
    pub sim_admin: Option<String>,
    pub admin_token: String,
    /// The demo's viewer (of `viewer_instance`), for experiments that need one.
    pub viewer_token: Option<String>,
    pub host_kubeconfig: Option<PathBuf>,
    pub instances: Vec<(String, PathBuf)>,
}

impl Endpoints {
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let s = |k: &str| {
            v[k].as_str()
                .map(String::from)
                .ok_or_else(|| format!("{} has no {k:?}", path.display()))
        };
        let instances = v["instances"]
            .as_array()
            .ok_or_else(|| format!("{} has no instances", path.display()))?
            .iter()
            .filter_map(|i| {
                Some((
                    i["name"].as_str()?.to_string(),
                    PathBuf::from(i["kubeconfig"].as_str()?),
                ))
            })
            .collect();
        Ok(Self {
            grpc: s("grpc")?,
            http: s("http")?,
            sim_admin: v["sim_admin"].as_str().map(String::from),
            admin_token: v["tokens"]["admin"]
                .as_str()
                .map(String::from)
                .ok_or_else(|| format!("{} has no tokens.admin", path.display()))?,
            viewer_token: v["tokens"]["viewer"].as_str().map(String::from),
            host_kubeconfig: v["host_kubeconfig"].as_str().map(PathBuf::from),
            instances,
        })
    }
}

/// The clients of one instance.
#[derive(Clone)]
struct Target {
    name: String,
    /// Its kubeconfig through Kairship's proxy (the admin's).
    kubeconfig: String,
    proxy: kube::Client,
    rest: kube::Client,
    grpc: tonic::transport::Channel,
    token: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
}

async fn client(kubeconfig: &str, server: Option<&str>) -> Result<kube::Client, String> {
    let mut kc = kube::config::Kubeconfig::from_yaml(kubeconfig).map_err(|e| e.to_string())?;
    if let Some(server) = server {
        for c in &mut kc.clusters {
            if let Some(cluster) = c.cluster.as_mut() {
                cluster.server = Some(server.to_string());
            }
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// Everything the load recorded, shared by its tasks.
pub struct Recorder {
    pub start: Instant,
    samples: Mutex<Vec<Sample>>,
    /// The first few errors per instance, to say what went wrong.
    errors: Mutex<BTreeMap<String, Vec<String>>>,
    /// Watch streams that broke (an error instead of the next event), per instance.
    pub watch_breaks: Vec<AtomicU64>,
    /// Writes acknowledged, per instance: the ledger checked at the end.
    ledger: Mutex<BTreeMap<String, Vec<String>>>,
    /// Requests not sent because too many were already waiting (client-side shedding).
    pub shed: AtomicU64,
}

impl Recorder {
    fn record(&self, instance: u16, surface: Surface, started: Instant, ok: bool) {
        let s = Sample {
            t_ms: u32::try_from(started.duration_since(self.start).as_millis()).unwrap_or(u32::MAX),
            instance,
            surface,
            latency_us: u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX),
            ok,
        };
        self.samples.lock().push(s);
    }

    fn error(&self, instance: &str, e: String) {
        let mut errors = self.errors.lock();
        let list = errors.entry(instance.to_string()).or_default();
        if list.len() < 5 {
            list.push(e);
        }
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().clone()
    }

    pub fn errors(&self) -> BTreeMap<String, Vec<String>> {
        self.errors.lock().clone()
    }

    pub fn ledger(&self) -> BTreeMap<String, Vec<String>> {
        self.ledger.lock().clone()
    }
}

/// The load on the whole fleet; dropped or stopped, its tasks end.
pub struct Load {
    pub recorder: Arc<Recorder>,
    targets: Vec<Target>,
    run: String,
    rate: u32,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    burst: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Load {
    fn drop(&mut self) {
        for t in self.tasks.iter().chain(&self.burst) {
            t.abort();
        }
    }
}

impl Load {
    /// Clients for every instance; `run` names this run's writes.
    pub async fn connect(endpoints: &Endpoints, run: &str, rate: u32) -> Result<Self, String> {
        let grpc = tonic::transport::Channel::from_shared(format!("http://{}", endpoints.grpc))
            .map_err(|e| e.to_string())?
            .connect_timeout(REQUEST_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .connect_lazy();
        let token = format!("Bearer {}", endpoints.admin_token)
            .parse()
            .map_err(|_| "the admin token is not a valid header".to_string())?;
        let mut targets = Vec::new();
        for (name, path) in &endpoints.instances {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            targets.push(Target {
                name: name.clone(),
                kubeconfig: text.clone(),
                proxy: client(&text, None).await?,
                rest: client(&text, Some(&endpoints.http)).await?,
                grpc: grpc.clone(),
                token: Clone::clone(&token),
            });
        }
        let recorder = Arc::new(Recorder {
            start: Instant::now(),
            samples: Mutex::new(Vec::new()),
            errors: Mutex::new(BTreeMap::new()),
            watch_breaks: targets.iter().map(|_| AtomicU64::new(0)).collect(),
            ledger: Mutex::new(BTreeMap::new()),
            shed: AtomicU64::new(0),
        });
        Ok(Self {
            recorder,
            targets,
            run: run.to_string(),
            rate,
            tasks: Vec::new(),
            burst: Vec::new(),
        })
    }

    /// `instance`'s proxy as the admin, and as `token` when given.
    pub async fn proxy_of(
        &self,
        instance: &str,
        token: Option<&str>,
    ) -> Result<kube::Client, String> {
        let t = self
            .targets
            .iter()
            .find(|t| t.name == instance)
            .ok_or_else(|| format!("no instance {instance:?}"))?;
        let Some(token) = token else {
            return Ok(t.proxy.clone());
        };
        let mut kc =
            kube::config::Kubeconfig::from_yaml(&t.kubeconfig).map_err(|e| e.to_string())?;
        for u in &mut kc.auth_infos {
            if let Some(info) = u.auth_info.as_mut() {
                info.token = Some(token.to_string().into());
            }
        }
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| e.to_string())?;
        kube::Client::try_from(config).map_err(|e| e.to_string())
    }

    pub fn names(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.name.clone()).collect()
    }

    /// Starts the steady load and one watch per instance.
    pub fn start(&mut self) {
        for (i, t) in self.targets.clone().into_iter().enumerate() {
            let i = u16::try_from(i).unwrap_or(u16::MAX);
            for surface in SURFACES {
                self.tasks
                    .push(self.spawn_loop(t.clone(), i, surface, self.rate));
            }
            self.tasks
                .push(tokio::spawn(watch(t.clone(), i, self.recorder.clone())));
        }
    }

    /// `factor - 1` more loops of every surface on `victim`, until [`Self::end_burst`].
    pub fn start_burst(&mut self, victim: &str, factor: u32) {
        let Some((i, t)) = self
            .targets
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == victim)
        else {
            return;
        };
        let i = u16::try_from(i).unwrap_or(u16::MAX);
        for surface in SURFACES {
            let extra = self.rate * (factor.saturating_sub(1));
            self.burst
                .push(self.spawn_loop(t.clone(), i, surface, extra));
        }
    }

    /// Stops every loop and watch (requests in flight are dropped, unacknowledged).
    pub fn stop(&mut self) {
        for t in self.tasks.drain(..).chain(self.burst.drain(..)) {
            t.abort();
        }
    }

    pub fn end_burst(&mut self) {
        for t in self.burst.drain(..) {
            t.abort();
        }
    }

    fn spawn_loop(
        &self,
        t: Target,
        i: u16,
        surface: Surface,
        rate: u32,
    ) -> tokio::task::JoinHandle<()> {
        let recorder = self.recorder.clone();
        let run = self.run.clone();
        let seq = Arc::new(AtomicU64::new(0));
        // Open loop: a slow answer does not slow the next request (no coordinated omission),
        // but at most this many wait at once per instance and surface.
        let waiting = Arc::new(Semaphore::new(64));
        tokio::spawn(async move {
            let period = Duration::from_secs(1) / rate.max(1);
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Ok(permit) = waiting.clone().try_acquire_owned() else {
                    recorder.shed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let (t, recorder, run) = (t.clone(), recorder.clone(), run.clone());
                let n = seq.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let started = Instant::now();
                    let result = tokio::time::timeout(
                        REQUEST_TIMEOUT,
                        request(&t, surface, &run, n, &recorder),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(format!("{surface:?}: no answer within {REQUEST_TIMEOUT:?}"))
                    });
                    recorder.record(i, surface, started, result.is_ok());
                    if let Err(e) = result {
                        recorder.error(&t.name, e);
                    }
                    drop(permit);
                });
            }
        })
    }

    /// Reads every acknowledged write back: (acknowledged, lost) per instance.
    pub async fn check_ledger(&self) -> BTreeMap<String, (usize, Vec<String>)> {
        let ledger = self.recorder.ledger();
        let mut out = BTreeMap::new();
        for t in &self.targets {
            let acked = ledger.get(&t.name).cloned().unwrap_or_default();
            let api: Api<ConfigMap> = Api::namespaced(t.proxy.clone(), "default");
            let lp = ListParams::default().labels(&format!("{RUN_LABEL}={}", self.run));
            // A refusal or a timeout (a victim still draining its backlog, a 429 from the
            // fairness bound) is asked again with backoff; still unreadable after that,
            // every acknowledged write counts as unverified (lost).
            let mut present: Vec<String> = Vec::new();
            let mut wait = Duration::from_millis(500);
            for attempt in 1..=LEDGER_ATTEMPTS {
                if let Ok(Ok(list)) = tokio::time::timeout(REQUEST_TIMEOUT, api.list(&lp)).await {
                    present = list
                        .items
                        .into_iter()
                        .filter_map(|c| c.metadata.name)
                        .collect();
                    break;
                }
                if attempt < LEDGER_ATTEMPTS {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
            let lost: Vec<String> = acked
                .iter()
                .filter(|n| !present.contains(n))
                .cloned()
                .collect();
            out.insert(t.name.clone(), (acked.len(), lost));
        }
        out
    }
}

async fn request(
    t: &Target,
    surface: Surface,
    run: &str,
    n: u64,
    recorder: &Recorder,
) -> Result<(), String> {
    let proxy_list = "/apis/apps/v1/namespaces/default/deployments";
    match surface {
        Surface::Grpc => {
            let mut c = proto::cluster_service_client::ClusterServiceClient::new(t.grpc.clone());
            let mut req = tonic::Request::new(proto::ListClustersRequest {
                instance: t.name.clone(),
                ..Default::default()
            });
            req.metadata_mut().insert("authorization", t.token.clone());
            c.list_clusters(req)
                .await
                .map(|_| ())
                .map_err(|s| format!("gRPC ListClusters: {:?} {}", s.code(), s.message()))
        }
        Surface::Rest => {
            let path = format!("/apis/kairship.io/v1alpha1/instances/{}/stats", t.name);
            get(&t.rest, &path, None)
                .await
                .map_err(|e| format!("REST: {e}"))
        }
        Surface::ProxyJson => get(&t.proxy, proxy_list, None)
            .await
            .map_err(|e| format!("proxy LIST: {e}")),
        Surface::ProxyTable => get(&t.proxy, proxy_list, Some(TABLE))
            .await
            .map_err(|e| format!("proxy Table: {e}")),
        Surface::Write => {
            let name = format!("{run}-{n}");
            let cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some([(RUN_LABEL.to_string(), run.to_string())].into()),
                    ..Default::default()
                },
                data: Some([("n".to_string(), n.to_string())].into()),
                ..Default::default()
            };
            let api: Api<ConfigMap> = Api::namespaced(t.proxy.clone(), "default");
            api.create(&PostParams::default(), &cm)
                .await
                .map_err(|e| format!("proxy create: {e}"))?;
            recorder
                .ledger
                .lock()
                .entry(t.name.clone())
                .or_default()
                .push(name);
            Ok(())
        }
    }
}

async fn get(client: &kube::Client, path: &str, accept: Option<&str>) -> Result<(), String> {
    let mut req = http::Request::get(path);
    if let Some(a) = accept {
        req = req.header(http::header::ACCEPT, a);
    }
    let req = req.body(Vec::new()).map_err(|e| e.to_string())?;
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// One watch on ConfigMaps through the proxy: every error in its stream is a break.
async fn watch(t: Target, i: u16, recorder: Arc<Recorder>) {
    let api: Api<ConfigMap> = Api::namespaced(t.proxy.clone(), "default");
    let stream = kube::runtime::watcher(api, kube::runtime::watcher::Config::default());
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        if let Err(e) = ev {
            if let Some(b) = recorder.watch_breaks.get(usize::from(i)) {
                b.fetch_add(1, Ordering::Relaxed);
            }
            recorder.error(&t.name, format!("watch: {e}"));
            // kube's watcher retries at once; pace it as a client would.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
