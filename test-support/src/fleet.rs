//! Starting a simulated fleet for a test (the one way every test binary does), and the
//! clients and commands that talk to it: kube clients, kubectl, the Python checks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kairship_sim::server::ServerConfig;
use kairship_sim::{Fleet, FleetConfig};

pub struct Sim {
    pub fleet: Fleet,
    pub dir: tempfile::TempDir,
}

impl Sim {
    /// A fleet of `instances` instances with two member clusters each, fast bookmarks.
    pub async fn start(instances: usize) -> Self {
        Self::start_with(instances, 2).await
    }

    /// `instances` instances with `clusters` member clusters each.
    pub async fn start_with(instances: usize, clusters: usize) -> Self {
        Self::start_configured(instances, clusters, |_| {}).await
    }

    /// As [`Sim::start_with`], the configuration changed by `change` first.
    pub async fn start_configured(
        instances: usize,
        clusters: usize,
        change: impl FnOnce(&mut FleetConfig),
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = FleetConfig {
            instances,
            clusters,
            state_dir: Some(dir.path().to_path_buf()),
            cluster_tick: Duration::from_millis(500),
            provision_delay: Duration::from_millis(100),
            server: ServerConfig {
                bookmark_interval: Duration::from_millis(300),
                ..ServerConfig::default()
            },
            karmada: kairship_sim::karmada::KarmadaConfig {
                ready_delay: Duration::from_millis(300),
                resync: Duration::from_millis(100),
            },
            ..FleetConfig::default()
        };
        change(&mut config);
        let fleet = Fleet::start(config).await.expect("fleet starts");
        Self { fleet, dir }
    }

    pub fn kubeconfig(&self, name: &str) -> PathBuf {
        self.dir
            .path()
            .join("kubeconfigs")
            .join(format!("{name}.kubeconfig"))
    }

    pub async fn client(&self, name: &str) -> kube::Client {
        client_from(&self.kubeconfig(name)).await
    }

    /// Runs kubectl against server `name`; returns stdout, failing the test on error.
    pub fn kubectl(&self, name: &str, args: &[&str]) -> String {
        let out = self.kubectl_raw(name, args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn kubectl_raw(&self, name: &str, args: &[&str]) -> std::process::Output {
        let cache = self.dir.path().join("kubectl-cache");
        Command::new(kubectl_bin())
            .arg("--kubeconfig")
            .arg(self.kubeconfig(name))
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .output()
            .expect("kubectl runs (install it with scripts/install-test-deps.sh)")
    }

    pub async fn set_fault(
        &self,
        instance: &str,
        fault: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let url = format!("{}/faults/{instance}", self.fleet.admin_url());
        kairship_wire::fault_client::call("POST", &url, Some(fault))
            .await
            .expect("admin API answers")
    }

    pub async fn clear_fault(&self, instance: &str) {
        let url = format!("{}/faults/{instance}", self.fleet.admin_url());
        let (code, _) = kairship_wire::fault_client::call("DELETE", &url, None)
            .await
            .expect("admin API answers");
        assert_eq!(code, 200);
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.fleet.shutdown();
    }
}

pub fn kubectl_bin() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_string())
}

pub async fn client_from(path: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig reads");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("kubeconfig is valid");
    kube::Client::try_from(config).expect("client builds")
}

/// A path relative to the repository root.
pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// `../shared/karmada/...`, beside the checkout (as in CI).
pub fn shared_karmada(rel: &str) -> PathBuf {
    let p = repo_path("../shared/karmada").join(rel);
    assert!(
        p.exists(),
        "{} is missing: shared/ must sit beside the checkout",
        p.display()
    );
    p
}

pub use crate::eventually;

/// Runs a check script from tests/python with the project's virtualenv and fails the
/// test unless it ends with "all checks passed".
pub async fn run_python(script: &str, args: Vec<String>) {
    let python = std::env::var("KAIRSHIP_PYTHON").unwrap_or_else(|_| {
        let venv = repo_path(".venv/bin/python");
        assert!(
            venv.exists(),
            "{} missing: run scripts/install-test-deps.sh",
            venv.display()
        );
        venv.display().to_string()
    });
    let path = repo_path("tests/python").join(script);
    let out =
        tokio::task::spawn_blocking(move || Command::new(python).arg(path).args(args).output())
            .await
            .expect("join")
            .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

/// The `cluster.karmada.io/v1alpha1` Cluster resource, for dynamic APIs.
pub fn cluster_resource() -> kube::discovery::ApiResource {
    kube::discovery::ApiResource {
        group: "cluster.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "cluster.karmada.io/v1alpha1".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    }
}

/// A long-running command (such as `kubectl get -w`) whose output lines a test waits on;
/// killed when dropped.
pub struct Lines {
    child: std::process::Child,
    rx: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Lines {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("command starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            rx,
            seen: String::new(),
        }
    }

    /// Waits until the output so far contains `needle`, failing after 20 s.
    pub fn wait_for(&mut self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !self.seen.contains(needle) {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            {
                Ok(l) => {
                    self.seen.push_str(&l);
                    self.seen.push('\n');
                }
                Err(_) => panic!("never printed {needle:?}; got:\n{}", self.seen),
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A serving certificate for Kairship on loopback that also covers every instance's host
/// under the demo's domain.
pub fn instance_host_cert() -> kairship_wire::tls::ServingCert {
    let hosts = kairship::api::instance_hosts::InstanceHosts::new(
        kairship::api::instance_hosts::DEMO_DOMAIN,
    )
    .expect("the demo's domain");
    kairship_wire::tls::generate_for("kairship", &[hosts.wildcard()]).expect("cert")
}
