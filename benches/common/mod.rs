//! Setup shared by the API benchmarks: a simulated fleet whose instances are attached to
//! the host as External `Instance`s, and helpers to seed and wait on it.

use std::time::Duration;

use kairship::bootstrap;
use kairship_sim::{Fleet, FleetConfig};
use serde_json::{json, Value};

pub struct BenchFleet {
    pub dir: tempfile::TempDir,
    pub fleet: Fleet,
    pub host: kube::Client,
}

/// A client from a kubeconfig the fleet wrote.
pub async fn client(path: &std::path::Path) -> kube::Client {
    kairship::cli::run::host_client(Some(&path.to_path_buf()))
        .await
        .expect("client")
}

/// A Deployment in `default` with `labels` on the object.
pub fn deployment(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
}

impl BenchFleet {
    /// `instances` instances of two quiet member clusters each, all attached.
    pub async fn start(instances: usize) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fleet = Fleet::start(FleetConfig {
            instances,
            clusters: 2,
            state_dir: Some(dir.path().to_path_buf()),
            cluster_tick: Duration::from_secs(3600),
            ..Default::default()
        })
        .await
        .expect("fleet");
        let host = client(&dir.path().join("kubeconfigs/host.kubeconfig")).await;
        bootstrap::install_crds(&host).await.expect("crds");
        bootstrap::ensure_namespace(&host, "kairship-system")
            .await
            .expect("ns");
        for i in 1..=instances {
            let name = format!("karmada-{i}");
            let config = std::fs::read(dir.path().join(format!("kubeconfigs/{name}.kubeconfig")))
                .expect("kubeconfig");
            bootstrap::attach_external(&host, "kairship-system", &name, config)
                .await
                .expect("attach");
        }
        Self { dir, fleet, host }
    }

    /// Writes objects straight into an instance's store (no API round trips).
    pub fn seed_deployments(&self, instance: &str, objects: impl IntoIterator<Item = Value>) {
        let inst = self.fleet.instance(instance).expect("instance");
        let def = inst
            .server
            .store
            .lookup("apps", "v1", "deployments")
            .expect("deployments served");
        for d in objects {
            inst.server
                .store
                .create(&def, Some("default"), d)
                .expect("create");
        }
    }

    /// Until `n` instances report Running.
    pub async fn wait_running(&self, n: usize) {
        while kairship::bootstrap::running_instances(&self.host)
            .await
            .map(|c| c.0)
            .unwrap_or(0)
            < n
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
