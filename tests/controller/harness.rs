//! A host with Kairship's CRDs and kubeconfig Secrets for the simulated instances.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::ByteString;
use kairship::actors::context::Settings;
use kairship::actors::leader::LeaderConfig;
use kairship::actors::supervision::{ActorSnapshot, RestartPolicy};
use kairship::actors::tree::Tree;
use kairship::crd::{Instance, InstanceRegistration, InstanceStatus, Phase};
use kube::api::{Api, PostParams};
use kube::CustomResourceExt;
use serde_json::json;

use crate::common::{eventually, Sim};

pub const NS: &str = "kairship-system";

pub struct Env {
    pub sim: Sim,
    pub host: kube::Client,
}

impl Env {
    pub async fn start(instances: usize) -> Self {
        let sim = Sim::start(instances).await;
        let host = sim.client("host").await;
        let crds: Api<CustomResourceDefinition> = Api::all(host.clone());
        for crd in [Instance::crd(), InstanceRegistration::crd()] {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("install CRD");
        }
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
        Api::<Namespace>::all(host.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let secrets: Api<Secret> = Api::namespaced(host.clone(), NS);
        for i in sim.fleet.instances() {
            let config = std::fs::read(sim.kubeconfig(&i.name)).expect("kubeconfig");
            let mut s = Secret::default();
            s.metadata.name = Some(format!("{}-kubeconfig", i.name));
            s.data = Some([("kubeconfig".to_string(), ByteString(config))].into());
            secrets
                .create(&PostParams::default(), &s)
                .await
                .expect("secret");
        }
        Self { sim, host }
    }

    pub fn instances(&self) -> Api<Instance> {
        Api::all(self.host.clone())
    }

    pub async fn create_external(&self, name: &str) {
        let i: Instance = serde_json::from_value(json!({
            "apiVersion": "kairship.io/v1alpha1", "kind": "Instance", "metadata": {"name": name},
            "spec": {"mode": "External", "external": {"kubeconfigSecretRef": {"namespace": NS, "name": format!("{name}-kubeconfig")}}}
        }))
        .expect("instance");
        self.instances()
            .create(&PostParams::default(), &i)
            .await
            .expect("create instance");
    }

    pub async fn start_tree(&self, leader: Option<LeaderConfig>, identity: &str) -> Tree {
        Tree::start(self.host.clone(), leader, identity, fast_settings())
            .await
            .expect("tree starts")
    }

    pub async fn status(&self, name: &str) -> Option<InstanceStatus> {
        self.instances()
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|i| i.status)
    }

    pub async fn wait_phase(&self, name: &str, phase: Phase, within: Duration) -> InstanceStatus {
        eventually(within, &format!("{name} to be {phase:?}"), || async {
            self.status(name).await.filter(|s| s.phase == phase)
        })
        .await
    }
}

pub fn fast_settings() -> Settings {
    Settings {
        tick: Duration::from_millis(300),
        probe_timeout: Duration::from_secs(1),
        status_refresh: Duration::from_secs(1),
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        restart: RestartPolicy {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_restarts: 3,
            window: Duration::from_secs(60),
            degraded_retry: Duration::from_secs(600),
        },
        ..Settings::default()
    }
}

pub async fn actor(tree: &Tree, instance: &str) -> Option<ActorSnapshot> {
    tree.actors()
        .await
        .ok()?
        .into_iter()
        .find(|a| a.instance.as_deref() == Some(instance))
}
