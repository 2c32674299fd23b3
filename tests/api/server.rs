//! Kairship's API (gRPC and HTTPS) over real sockets, on a tree over the simulated fleet.

use std::path::PathBuf;

use kairship::actors::tree::Tree;
use kairship::api::context::ApiContext;
use kairship::auth::{Auth, AuthConfig};
use kairship::host::leader::LeaderConfig;
use tonic::transport::Channel;

use crate::harness::Env;

pub struct Api {
    pub env: Env,
    pub tree: Tree,
    pub channel: Channel,
    pub grpc_addr: std::net::SocketAddr,
    /// `https://127.0.0.1:P`
    pub https: String,
    pub ca_pem: String,
    serving: Option<kairship::api::mount::Serving>,
    /// Where the server writes its audit events.
    pub audit: PathBuf,
}

impl Api {
    pub async fn start(instances: usize) -> Self {
        Self::start_with(instances, None).await
    }

    /// A client of the HTTPS address as a caller with a role on every instance, so it may
    /// read `/metrics` (which names them all); `name` names its kubeconfig.
    pub async fn metrics_client(&self, name: &str) -> kube::Client {
        let kc = kairship_wire::kubeconfig::build(name, &self.https, &self.ca_pem, "metrics-test");
        let path = self.env.sim.dir.path().join(format!("{name}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write");
        crate::common::client_from(&path).await
    }

    /// Kairship acts on the host as its own user (`kairship`), so the host's audit shows
    /// exactly its calls; with `leader`, it takes part in Lease election.
    pub async fn start_with(instances: usize, leader: Option<LeaderConfig>) -> Self {
        Self::start_full(instances, leader, None).await
    }

    /// With `auth`, requests are authenticated and authorized like in production.
    pub async fn start_full(
        instances: usize,
        leader: Option<LeaderConfig>,
        auth: Option<AuthConfig>,
    ) -> Self {
        Self::start_settings(instances, leader, auth, crate::harness::fast_settings()).await
    }

    /// As `start_full`, with the tree's settings given.
    pub async fn start_settings(
        instances: usize,
        leader: Option<LeaderConfig>,
        auth: Option<AuthConfig>,
        settings: kairship::context::Settings,
    ) -> Self {
        let env = Env::start(instances).await;
        let host = env.sim.fleet.host().clone();
        host.enable_audit();
        let token = host.add_user("kairship");
        let kc = kairship_wire::kubeconfig::build("host", &host.url(), &host.tls.ca_pem, &token);
        let kc_path = env.sim.dir.path().join("kairship-host.kubeconfig");
        let chaos_dir = env.sim.dir.path().join("chaos");
        kairship_wire::kubeconfig::write(&kc_path, &kc).expect("write kubeconfig");
        let as_kairship = crate::common::client_from(&kc_path).await;
        let tree = Tree::start(as_kairship.clone(), leader, "kairship-test", settings)
            .await
            .expect("tree starts");
        env.attach_all(instances).await;
        env.editors_bound(instances, "default").await;
        let auth = match auth {
            Some(config) => Auth::new(&config, as_kairship.clone())
                .await
                .expect("auth configuration loads"),
            None => Auth::disabled(),
        };
        let cert = crate::common::instance_host_cert();
        let audit = env.sim.dir.path().join("audit.log");
        let served = serve(
            ApiContext::with_auth(tree.handle(), auth),
            &cert,
            &audit,
            Some(chaos_dir),
            None,
        )
        .await;
        Self {
            env,
            tree,
            channel: served.channel,
            grpc_addr: served.grpc_addr,
            https: served.https,
            ca_pem: cert.ca_pem,
            serving: Some(served.serving),
            audit,
        }
    }

    /// Whether an audit event says `user` did `verb` on `resource` (named `name`, unless
    /// empty) through `surface`, refused (a status of 400 or more) or not.
    pub fn audited(
        &self,
        user: &str,
        surface: &str,
        verb: &str,
        resource: &str,
        name: &str,
        refused: bool,
    ) -> bool {
        self.audit_events().iter().any(|e| {
            e["user"]["username"] == user
                && e["annotations"]["kairship.io/surface"] == surface
                && e["verb"] == verb
                && e["objectRef"]["resource"] == resource
                && (name.is_empty() || e["objectRef"]["name"] == name)
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| (c >= 400) == refused)
        })
    }

    /// The audit events written so far (audit.k8s.io/v1 Event JSON lines).
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("an audit event is JSON"))
            .collect()
    }

    /// Where this server reads the chaos report (`--chaos-report-dir`).
    pub fn chaos_dir(&self) -> PathBuf {
        self.env.sim.dir.path().join("chaos")
    }

    /// A kubeconfig whose server is Kairship's proxy prefix for `instance`.
    pub fn proxy_kubeconfig(&self, instance: &str) -> PathBuf {
        self.proxy_kubeconfig_as(instance, "proxy-test-token")
    }

    /// A kubeconfig whose server is Kairship itself (no path), reaching `instance` by its
    /// own host as TLS server name (`kairship demo --instance-domain`'s form).
    pub fn host_kubeconfig_as(&self, instance: &str, token: &str) -> PathBuf {
        let hosts = kairship::api::instance_hosts::InstanceHosts::new(
            kairship::api::instance_hosts::DEMO_DOMAIN,
        )
        .expect("domain");
        let kc = kairship_wire::kubeconfig::build(instance, &self.https, &self.ca_pem, token);
        let kc = kairship_wire::kubeconfig::with_tls_server_name(kc, &hosts.host_of(instance));
        self.written("host", instance, token, &kc)
    }

    /// A proxy kubeconfig carrying `token`.
    pub fn proxy_kubeconfig_as(&self, instance: &str, token: &str) -> PathBuf {
        let server = format!(
            "{}/apis/kairship.io/v1alpha1/instances/{instance}/proxy",
            self.https
        );
        let kc = kairship_wire::kubeconfig::build(instance, &server, &self.ca_pem, token);
        self.written("proxy", instance, token, &kc)
    }

    /// `kc` written once per form, instance and token.
    fn written(&self, form: &str, instance: &str, token: &str, kc: &serde_json::Value) -> PathBuf {
        let digest: String = token.bytes().take(8).map(|b| format!("{b:02x}")).collect();
        let path = self
            .env
            .sim
            .dir
            .path()
            .join(format!("{form}-{instance}-{digest}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, kc).expect("write kubeconfig");
        path
    }

    /// Runs kubectl with `kubeconfig` (and a cache directory of this test's own).
    pub fn kubectl_with(
        &self,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> std::process::Output {
        std::process::Command::new(crate::common::kubectl_bin())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.env.sim.dir.path().join("kubectl-cache"))
            .args(args)
            .output()
            .expect("kubectl runs")
    }

    /// As [`Api::https_client`], without kube's retries of 429 and 503 answers (15 of
    /// them, backing off up to minutes), for a test that counts each answer.
    pub async fn https_client_once(&self, token: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.rest_kubeconfig(token))
            .expect("kubeconfig reads");
        let options = kube::config::KubeConfigOptions::default();
        let mut config = kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .expect("kubeconfig is valid");
        config.default_retry = false;
        kube::Client::try_from(config).expect("client builds")
    }

    /// An HTTPS client of Kairship's REST API trusting its CA, sending `token`.
    pub async fn https_client(&self, token: &str) -> kube::Client {
        crate::common::client_from(&self.rest_kubeconfig(token)).await
    }

    /// A kubeconfig for Kairship's REST API sending `token`, written once per token.
    fn rest_kubeconfig(&self, token: &str) -> PathBuf {
        let kc = kairship_wire::kubeconfig::build("rest", &self.https, &self.ca_pem, token);
        let digest: String = token.bytes().take(8).map(|b| format!("{b:02x}")).collect();
        let path = self
            .env
            .sim
            .dir
            .path()
            .join(format!("rest-{digest}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write");
        path
    }

    /// Kairship stops and starts again (a new tree and API, authorization off, fast
    /// settings) against the same host and fleet, as a restarted process would.
    pub async fn restart(&mut self) {
        if let Some(s) = self.serving.take() {
            s.stop().await;
        }
        let kc_path = self.env.sim.dir.path().join("kairship-host.kubeconfig");
        let as_kairship = crate::common::client_from(&kc_path).await;
        let settings = crate::harness::fast_settings();
        let tree = Tree::start(as_kairship, None, "kairship-test", settings)
            .await
            .expect("tree starts again");
        let old = std::mem::replace(&mut self.tree, tree);
        old.shutdown().await;
        let cert = crate::common::instance_host_cert();
        let ctx = ApiContext::with_auth(self.tree.handle(), Auth::disabled());
        let served = serve(ctx, &cert, &self.audit, Some(self.chaos_dir()), None).await;
        self.channel = served.channel;
        self.grpc_addr = served.grpc_addr;
        self.https = served.https;
        self.ca_pem = cert.ca_pem;
        self.serving = Some(served.serving);
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.serving.take() {
            s.stop().await;
        }
        self.tree.shutdown().await;
    }
}

pub use kairship_test_support::api::{serve, Served};

/// A managed instance as the API creates it, in the harness's namespace.
pub fn managed_instance(name: &str) -> kairship::proto::Instance {
    use kairship::proto::{Instance, InstanceMode, InstanceSpec, ObjectMeta};
    Instance {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(InstanceSpec {
            mode: InstanceMode::Managed as i32,
            managed_namespace: crate::harness::NS.into(),
            ..Default::default()
        }),
        status: None,
    }
}

/// As [`managed_instance`], made from the InstanceClass `class`.
pub fn managed_instance_of(name: &str, class: &str) -> kairship::proto::Instance {
    let mut inst = managed_instance(name);
    if let Some(s) = inst.spec.as_mut() {
        s.class_name = class.into();
    }
    inst
}

/// Creates the InstanceClass `name` with `spec` on the host.
pub async fn create_class(
    host: &kube::Client,
    name: &str,
    spec: kairship::crd::InstanceClassSpec,
) -> kairship::crd::InstanceClass {
    let classes: kube::Api<kairship::crd::InstanceClass> = kube::Api::all(host.clone());
    let class = kairship::crd::InstanceClass::new(name, spec);
    classes
        .create(&Default::default(), &class)
        .await
        .unwrap_or_else(|e| panic!("class {name} not created: {e}"))
}

/// `/metrics` as `client` reads it.
pub async fn scrape(client: &kube::Client) -> String {
    client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("metrics")
}

/// An instance's status as GetInstance answers it (`None`: not found, or no status yet).
pub async fn status_of(
    c: &kairship::proto::instance_service_client::InstanceServiceClient<tonic::transport::Channel>,
    name: &str,
) -> Option<kairship::proto::InstanceStatus> {
    c.clone()
        .get_instance(kairship::proto::GetInstanceRequest { name: name.into() })
        .await
        .ok()?
        .into_inner()
        .status
}
