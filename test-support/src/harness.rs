//! A host with Kairship's CRDs and kubeconfig Secrets for the simulated instances.

use std::time::Duration;

use kairship::actors::supervision::ActorSnapshot;
use kairship::actors::tree::Tree;
use kairship::bootstrap;
use kairship::context::Settings;
use kairship::crd::{Instance, InstanceStatus, Phase};
use kairship::host::backoff::RestartPolicy;
use kairship::host::leader::LeaderConfig;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;

use crate::eventually;
use crate::fleet::Sim;

pub const NS: &str = "kairship-system";

/// With `KAIRSHIP_TEST_LOG` set (a tracing filter such as `kairship=debug`), the test's
/// Kairship and simulator log to its output: for finding out why a test failed.
pub fn log_when_asked() {
    if let Ok(filter) = std::env::var("KAIRSHIP_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

pub struct Env {
    pub sim: Sim,
    pub host: kube::Client,
}

impl Env {
    pub async fn start(instances: usize) -> Self {
        log_when_asked();
        let sim = Sim::start(instances).await;
        let host = sim.client("host").await;
        bootstrap::install_crds(&host).await.expect("install CRDs");
        bootstrap::ensure_namespace(&host, NS)
            .await
            .expect("namespace");
        Self { sim, host }
    }

    /// `instances` simulated instances attached and Running under a single-replica tree.
    pub async fn running(instances: usize) -> (Self, kairship::actors::tree::Tree) {
        let env = Self::start(instances).await;
        let tree = env.start_tree(None, "solo").await;
        env.attach_all(instances).await;
        (env, tree)
    }

    /// Takes an instance's API down (simulator fault) and waits until it shows Unreachable.
    /// Registers instances `karmada-1..=instances` and waits until each is Running.
    pub async fn attach_all(&self, instances: usize) {
        for i in 1..=instances {
            self.create_external(&format!("karmada-{i}")).await;
        }
        for i in 1..=instances {
            self.wait_phase(
                &format!("karmada-{i}"),
                Phase::Running,
                Duration::from_secs(20),
            )
            .await;
        }
    }

    /// Waits until Kairship's namespace-roles controller has bound editors in `namespace`
    /// of each of `instances` (a moment after an instance runs, or a namespace appears).
    pub async fn editors_bound(&self, instances: usize, namespace: &str) {
        for i in 1..=instances {
            let name = format!("karmada-{i}");
            let rbs: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
                Api::namespaced(self.sim.client(&name).await, namespace);
            crate::eventually(
                Duration::from_secs(20),
                &format!("editors bound in {name}/{namespace}"),
                || {
                    let rbs = rbs.clone();
                    async move { rbs.get_opt("kairship:edit").await.ok().flatten() }
                },
            )
            .await;
        }
    }

    pub async fn take_down(&self, name: &str) -> InstanceStatus {
        assert_eq!(
            self.sim
                .set_fault(name, serde_json::json!({"mode": "down"}))
                .await
                .0,
            200
        );
        self.wait_phase(name, Phase::Unreachable, Duration::from_secs(15))
            .await
    }

    pub fn instances(&self) -> Api<Instance> {
        Api::all(self.host.clone())
    }

    pub async fn create_external(&self, name: &str) {
        // As an operator installing Kairship would: the instance learns Kairship's roles.
        let instance = self.sim.client(name).await;
        bootstrap::apply_instance_rbac(&instance)
            .await
            .expect("instance RBAC applies");
        let config = std::fs::read(self.sim.kubeconfig(name)).expect("kubeconfig");
        bootstrap::attach_external(&self.host, NS, name, config)
            .await
            .expect("attach instance");
    }

    pub async fn start_tree(&self, leader: Option<LeaderConfig>, identity: &str) -> Tree {
        self.start_tree_with(fast_settings(), leader, identity)
            .await
    }

    pub async fn start_tree_with(
        &self,
        settings: Settings,
        leader: Option<LeaderConfig>,
        identity: &str,
    ) -> Tree {
        Tree::start(self.host.clone(), leader, identity, settings)
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
        degraded_after: Duration::from_secs(3),
        component_check_every: Duration::from_secs(1),
        certificate_check_every: Duration::from_secs(1),
        backup_check_every: Duration::from_secs(1),
        controller_resync: Duration::from_secs(1),
        // The simulated members run on loopback.
        member_networks: kairship::member_networks::MemberNetworks::allowing_loopback(),
        // The air-gapped mirror the managed-instance tests point at, as an operator of an
        // air-gapped cluster allows theirs.
        scope: kairship::host::scope::HostScope {
            image_registries: vec!["registry.example.com".into()],
            crd_urls: vec!["http://crds.example.com/".into()],
            ..Default::default()
        },
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

impl Env {
    async fn crds(&self, instance: &str) -> Api<DynamicObject> {
        let crd = ApiResource::erase::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(&());
        Api::all_with(self.sim.client(instance).await, &crd)
    }

    /// Deletes the CRD `name` on `instance` (a Karmada kind taken away from it) and
    /// returns it, for `give_back_crd`.
    pub async fn take_crd(&self, instance: &str, name: &str) -> DynamicObject {
        let crds = self.crds(instance).await;
        let crd = crds.get(name).await.expect("the CRD is installed");
        crds.delete(name, &DeleteParams::default())
            .await
            .expect("delete the CRD");
        crd
    }

    /// Creates again a CRD `take_crd` removed.
    pub async fn give_back_crd(&self, instance: &str, mut crd: DynamicObject) {
        crd.metadata.resource_version = None;
        crd.metadata.uid = None;
        crd.metadata.creation_timestamp = None;
        if let Some(o) = crd.data.as_object_mut() {
            o.remove("status");
        }
        self.crds(instance)
            .await
            .create(&PostParams::default(), &crd)
            .await
            .expect("the CRD comes back");
    }
}

/// What an operator grants on the host so `subject` (`User` or `Group`) may attach External
/// instances through Kairship: `get` on the kubeconfig Secrets in Kairship's namespace
/// (Kairship asks the host before it reads one for a caller).
pub async fn grant_kubeconfig_reads(host: &kube::Client, kind: &str, subject: &str) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let name = format!("kubeconfig-readers-{}", subject.to_lowercase());
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    }))
    .expect("role");
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}]
    }))
    .expect("binding");
    Api::<Role>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &role)
        .await
        .expect("kubeconfig reader role");
    Api::<RoleBinding>::namespaced(host.clone(), NS)
        .create(&PostParams::default(), &binding)
        .await
        .expect("kubeconfig reader binding");
}
