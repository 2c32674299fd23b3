//! Simulated member clusters: `Cluster` objects whose readiness, node and resource
//! summaries move over time, with per-cluster controls to make one NotReady or flap.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::server::ApiServer;
use crate::store::meta::{new_uid, now_rfc3339};
use kairship_wire::status::ApiResult;

/// What an operator of the simulator can force on one member cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterControl {
    /// `false` holds the cluster NotReady.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Toggle Ready on every tick.
    #[serde(default)]
    pub flapping: bool,
}

#[derive(Debug, Clone)]
struct Sizing {
    nodes: u64,
    cpu_per_node: u64,
    mem_gi_per_node: u64,
    pods_per_node: u64,
}

struct ClusterState {
    sizing: Sizing,
    ready: bool,
    /// Fraction of allocatable in use, moved by a small random walk.
    load: f64,
    control: ClusterControl,
}

/// The member clusters of one simulated instance.
pub struct ClusterSim {
    server: Arc<ApiServer>,
    clusters: Mutex<BTreeMap<String, ClusterState>>,
}

pub fn cluster_names(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("member{i}")).collect()
}

impl ClusterSim {
    /// Registers `count` clusters (`member1`..) on `server` with a first status.
    pub fn start(
        server: Arc<ApiServer>,
        count: usize,
        tick: Duration,
    ) -> ApiResult<(Arc<Self>, tokio::task::JoinHandle<()>)> {
        let sim = Arc::new(Self {
            server,
            clusters: Mutex::new(BTreeMap::new()),
        });
        for (i, name) in cluster_names(count).into_iter().enumerate() {
            let sizing = Sizing {
                nodes: 3 + (i as u64 * 2) % 7,
                cpu_per_node: 16,
                mem_gi_per_node: 64,
                pods_per_node: 110,
            };
            sim.create(&name, i, sizing)?;
        }
        let ticker = sim.clone();
        let task = tokio::spawn(async move {
            // Zero holds every cluster still (an idle fleet).
            if tick.is_zero() {
                return std::future::pending().await;
            }
            let mut interval = tokio::time::interval(tick);
            interval.tick().await;
            loop {
                interval.tick().await;
                ticker.tick();
            }
        });
        Ok((sim, task))
    }

    fn def(&self) -> ApiResult<Arc<crate::resources::ResourceDef>> {
        self.server
            .store
            .lookup("cluster.karmada.io", "v1alpha1", "clusters")
            .ok_or_else(|| kairship_wire::status::ApiError::internal("clusters are not served"))
    }

    fn create(&self, name: &str, index: usize, sizing: Sizing) -> ApiResult<()> {
        let def = self.def()?;
        let regions = ["eu-west-1", "us-east-1", "ap-southeast-1"];
        let obj = json!({
            "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name, "labels": {"region": regions[index % regions.len()], "provider": "kairship-sim"}},
            "spec": {
                "syncMode": if index % 4 == 3 { "Pull" } else { "Push" },
                "apiEndpoint": format!("https://{name}.sim.invalid:6443"),
                // Karmada's cluster ID (the member's kube-system uid): one member each.
                "id": new_uid(),
                "secretRef": {"namespace": "karmada-cluster", "name": name},
                "provider": "kairship-sim", "region": regions[index % regions.len()], "zone": format!("zone-{}", index % 3 + 1),
            }
        });
        self.server.store.create(&def, None, obj)?;
        let state = ClusterState {
            sizing,
            ready: true,
            load: 0.2 + 0.1 * (index % 4) as f64,
            control: ClusterControl::default(),
        };
        let status = status(&state, None);
        self.server.store.update(
            &def,
            None,
            name,
            json!({"metadata": {"name": name}, "status": status}),
            true,
        )?;
        self.clusters.lock().insert(name.to_string(), state);
        Ok(())
    }

    pub fn names(&self) -> Vec<String> {
        self.clusters.lock().keys().cloned().collect()
    }

    /// Applies a control to one cluster; `false` when there is no such cluster.
    pub fn control(&self, name: &str, control: ClusterControl) -> bool {
        let found = match self.clusters.lock().get_mut(name) {
            Some(c) => {
                c.control = control;
                true
            }
            None => false,
        };
        if found {
            self.tick_one(name, false);
        }
        found
    }

    /// Moves every cluster one step.
    pub fn tick(&self) {
        for name in self.names() {
            self.tick_one(&name, true);
        }
    }

    fn tick_one(&self, name: &str, drift: bool) {
        let Ok(def) = self.def() else { return };
        let status = {
            let mut clusters = self.clusters.lock();
            let Some(c) = clusters.get_mut(name) else {
                return;
            };
            if drift {
                c.load = (c.load + rand::rng().random_range(-0.05..0.05)).clamp(0.05, 0.95);
            }
            c.ready = match (&c.control.ready, c.control.flapping) {
                (_, true) => !c.ready,
                (Some(r), false) => *r,
                (None, false) => true,
            };
            let previous = self.server.store.get(&def, None, name).ok();
            status(c, previous.as_ref().map(|p| &p.value))
        };
        let patch = json!({"status": status});
        // A cluster may have been deleted by a client meanwhile; the simulation moves on.
        let _ = self.server.store.patch(
            &def,
            None,
            name,
            crate::patch::PatchKind::Merge,
            patch.to_string().as_bytes(),
            true,
        );
    }
}

/// `lastTransitionTime` changes only when the status does.
fn ready_condition(ready: bool, previous: Option<&Value>) -> Value {
    let status = if ready { "True" } else { "False" };
    let prev = previous
        .and_then(|p| p.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    let since = match prev {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => now_rfc3339().into(),
    };
    let (reason, message) = if ready {
        (
            "ClusterReady",
            "cluster is healthy and ready to accept workloads",
        )
    } else {
        ("ClusterNotReachable", "cluster is not reachable")
    };
    json!({"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": since})
}

fn status(c: &ClusterState, previous: Option<&Value>) -> Value {
    let s = &c.sizing;
    let ready_nodes = if c.ready { s.nodes } else { 0 };
    let (cpu, mem_gi, pods) = (
        s.nodes * s.cpu_per_node,
        s.nodes * s.mem_gi_per_node,
        s.nodes * s.pods_per_node,
    );
    let used = |total: u64, unit: u64| ((total * unit) as f64 * c.load) as u64;
    json!({
        "kubernetesVersion": "v1.31.3",
        "apiEnablements": [
            {"groupVersion": "v1", "resources": [{"name": "pods", "kind": "Pod"}, {"name": "services", "kind": "Service"}]},
            {"groupVersion": "apps/v1", "resources": [{"name": "deployments", "kind": "Deployment"}]},
        ],
        "conditions": [ready_condition(c.ready, previous)],
        "nodeSummary": {"totalNum": s.nodes, "readyNum": ready_nodes},
        "resourceSummary": {
            "allocatable": {"cpu": cpu.to_string(), "memory": format!("{mem_gi}Gi"), "pods": pods.to_string()},
            "allocating": {"cpu": "0", "memory": "0", "pods": "0"},
            "allocated": {"cpu": format!("{}m", used(cpu, 1000)), "memory": format!("{}Mi", used(mem_gi, 1024)), "pods": used(pods, 1).to_string()},
        },
    })
}
