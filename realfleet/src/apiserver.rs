//! One kube-apiserver: its certificates, static tokens, etcd prefix, and a kubeconfig for
//! its admin. Karmada instances use it as karmada-apiserver; members and the host as is.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::pki;
use crate::process::{free_port, Proc};
use crate::Error;

pub struct ApiServer {
    pub name: String,
    pub url: String,
    pub ca_pem: String,
    /// A `system:masters` token.
    pub token: String,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
    pub proc: Proc,
}

/// Options that differ between the host, a karmada-apiserver and a member.
#[derive(Default)]
pub struct Options {
    /// Serve the aggregation layer (karmada-apiserver: Clusters come from an APIService).
    pub front_proxy: Option<pki::FrontProxy>,
    /// Reachable from the node's pods (`node::net`): listen on every address, with a
    /// certificate for the machine's end of the node link.
    pub for_pods: bool,
    /// The host of a cluster with a node: pods reach it as the `kubernetes` Service, so it
    /// advertises the link's address and its certificate names the Service.
    pub cluster_host: bool,
}

impl ApiServer {
    pub fn start(
        bin: &Path,
        root: &Path,
        name: &str,
        etcd: &str,
        opts: Options,
    ) -> Result<Self, Error> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let link = crate::node::net::HOST_IP.to_string();
        let service = crate::node::net::KUBERNETES_SERVICE_IP.to_string();
        let mut names: Vec<&str> = Vec::new();
        if opts.for_pods || opts.cluster_host {
            names.push(&link);
        }
        if opts.cluster_host {
            names.extend([
                service.as_str(),
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ]);
        }
        let serving = pki::serving_for(&dir, name, &names)?;
        let (sa_key, sa_pub) = pki::service_account_key(&dir)?;
        let token = pki::token();
        let tokens = dir.join("tokens.csv");
        std::fs::write(&tokens, format!("{token},admin,admin,\"system:masters\"\n"))
            .map_err(Error::io(format!("writing {}", tokens.display())))?;
        let port = free_port()?;
        let p = |x: &Path| x.display().to_string();
        let mut args = vec![
            format!("--etcd-servers={etcd}"),
            // One etcd for the fleet: each API server keeps to its own prefix.
            format!("--etcd-prefix=/{name}"),
            match opts.for_pods || opts.cluster_host {
                true => "--bind-address=0.0.0.0".into(),
                false => "--bind-address=127.0.0.1".into(),
            },
            match opts.cluster_host {
                true => format!("--advertise-address={link}"),
                false => "--advertise-address=127.0.0.1".into(),
            },
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", p(&serving.cert_file)),
            format!("--tls-private-key-file={}", p(&serving.key_file)),
            format!("--token-auth-file={}", p(&tokens)),
            // Client certificates from its own CA: what kube-controller-manager signs for
            // CSRs (karmada-agent's identity in Pull mode).
            format!("--client-ca-file={}", p(&serving.ca_file)),
            // Bootstrap tokens (Secrets in kube-system), as karmadactl init enables them:
            // Pull-mode members register with one.
            "--enable-bootstrap-token-auth".into(),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-key-file={}", p(&sa_pub)),
            format!("--service-account-signing-key-file={}", p(&sa_key)),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!(
                "--service-cluster-ip-range={}",
                crate::node::net::SERVICE_CIDR
            ),
            // Keep the apiserver light (even with a node, a handful of pods run).
            "--enable-priority-and-fairness=false".into(),
            "--watch-cache=true".into(),
            "--v=1".into(),
        ];
        if opts.cluster_host {
            // `kubectl logs` and `exec` reach the kubelet at the node's address (its host
            // name resolves nowhere).
            args.push("--kubelet-preferred-address-types=InternalIP,Hostname".into());
        }
        if let Some(fp) = &opts.front_proxy {
            args.extend([
                format!("--requestheader-client-ca-file={}", p(&fp.ca_file)),
                format!("--requestheader-allowed-names={}", pki::FRONT_PROXY_CLIENT),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", p(&fp.client_cert_file)),
                format!("--proxy-client-key-file={}", p(&fp.client_key_file)),
            ]);
        }
        let url = format!("https://127.0.0.1:{port}");
        let kubeconfig = dir.join("admin.kubeconfig");
        kairship_wire::kubeconfig::write(
            &kubeconfig,
            &kairship_wire::kubeconfig::build(name, &url, &serving.ca_pem, &token),
        )
        .map_err(Error::io(format!("writing {}", kubeconfig.display())))?;
        let proc = Proc::spawn(
            &format!("kube-apiserver {name}"),
            &bin.join("kube-apiserver"),
            args,
            dir.join("kube-apiserver.log"),
        )?;
        Ok(Self {
            name: name.to_string(),
            url,
            ca_pem: serving.ca_pem,
            token,
            kubeconfig,
            dir,
            proc,
        })
    }

    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_from(&self.kubeconfig).await
    }

    /// Waits until `/readyz` answers 200.
    pub async fn wait_ready(&mut self, within: Duration) -> Result<kube::Client, Error> {
        let client = self.client().await?;
        let deadline = Instant::now() + within;
        loop {
            self.proc.check_alive()?;
            let req = http::Request::get("/readyz").body(Vec::new());
            if let Ok(req) = req {
                let ok =
                    tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await;
                if matches!(ok, Ok(Ok(_))) {
                    return Ok(client);
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady {
                    what: format!("kube-apiserver {}", self.name),
                    secs: within.as_secs(),
                    log: self.proc.log.display().to_string(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

pub async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).map_err(Error::kube(format!("client for {}", path.display())))
}
