//! Kairship's API (gRPC and HTTPS) over real sockets, on a tree over the simulated fleet.

use std::path::PathBuf;
use std::time::Duration;

use kairship::actors::leader::LeaderConfig;
use kairship::actors::tree::Tree;
use kairship::api::context::ApiContext;
use kairship::auth::{Auth, AuthConfig};
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
    stop: Option<tokio::sync::watch::Sender<bool>>,
}

impl Api {
    pub async fn start(instances: usize) -> Self {
        Self::start_with(instances, None).await
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
        let env = Env::start(instances).await;
        let host = env.sim.fleet.host().clone();
        host.enable_audit();
        let token = host.add_user("kairship");
        let kc = kairship_wire::kubeconfig::build("host", &host.url(), &host.tls.ca_pem, &token);
        let kc_path = env.sim.dir.path().join("kairship-host.kubeconfig");
        let chaos_dir = env.sim.dir.path().join("chaos");
        kairship_wire::kubeconfig::write(&kc_path, &kc).expect("write kubeconfig");
        let as_kairship = crate::common::client_from(&kc_path).await;
        let tree = Tree::start(
            as_kairship.clone(),
            leader,
            "kairship-test",
            crate::harness::fast_settings(),
        )
        .await
        .expect("tree starts");
        env.attach_all(instances).await;
        let auth = match auth {
            Some(config) => Auth::new(&config, as_kairship.clone())
                .await
                .expect("auth configuration loads"),
            None => Auth::disabled(),
        };
        let ctx = ApiContext::with_auth(tree.handle(), auth);
        ctx.ready().await;
        let (tx, rx) = tokio::sync::watch::channel(false);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (grpc_ctx, mut grpc_stop) = (ctx.clone(), rx.clone());
        tokio::spawn(async move {
            let stop = async move {
                let _ = grpc_stop.changed().await;
            };
            kairship::api::grpc::serve(listener, grpc_ctx, stop)
                .await
                .expect("grpc serves");
        });

        let cert = kairship_wire::tls::generate("kairship").expect("cert");
        let https_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let https = format!("https://{}", https_listener.local_addr().expect("addr"));
        let (config, mut https_stop) = (cert.server_config.clone(), rx);
        let rest_channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect_lazy();
        let rest = kairship::api::rest::Rest::new(rest_channel).expect("rest");
        tokio::spawn(async move {
            let stop = async move {
                let _ = https_stop.changed().await;
            };
            kairship::api::http::serve_tls(
                https_listener,
                config,
                kairship::api::http::app(ctx, rest, Some(chaos_dir)),
                stop,
            )
            .await;
        });

        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .connect()
            .await
            .expect("connect");
        Self {
            env,
            tree,
            channel,
            grpc_addr: addr,
            https,
            ca_pem: cert.ca_pem,
            stop: Some(tx),
        }
    }

    /// Where this server reads the chaos report (`--chaos-report-dir`).
    pub fn chaos_dir(&self) -> PathBuf {
        self.env.sim.dir.path().join("chaos")
    }

    /// A kubeconfig whose server is Kairship's proxy prefix for `instance`.
    pub fn proxy_kubeconfig(&self, instance: &str) -> PathBuf {
        self.proxy_kubeconfig_as(instance, "proxy-test-token")
    }

    /// A proxy kubeconfig carrying `token`.
    pub fn proxy_kubeconfig_as(&self, instance: &str, token: &str) -> PathBuf {
        let server = format!(
            "{}/apis/kairship.io/v1alpha1/instances/{instance}/proxy",
            self.https
        );
        let kc = kairship_wire::kubeconfig::build(instance, &server, &self.ca_pem, token);
        let digest: String = token.bytes().take(8).map(|b| format!("{b:02x}")).collect();
        let path = self
            .env
            .sim
            .dir
            .path()
            .join(format!("proxy-{instance}-{digest}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write kubeconfig");
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

    /// An HTTPS client of Kairship's REST API trusting its CA, sending `token`.
    pub async fn https_client(&self, token: &str) -> kube::Client {
        let kc = kairship_wire::kubeconfig::build("rest", &self.https, &self.ca_pem, token);
        let digest: String = token.bytes().take(8).map(|b| format!("{b:02x}")).collect();
        let path = self
            .env
            .sim
            .dir
            .path()
            .join(format!("rest-{digest}.kubeconfig"));
        kairship_wire::kubeconfig::write(&path, &kc).expect("write");
        crate::common::client_from(&path).await
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        self.tree.shutdown().await;
    }
}
