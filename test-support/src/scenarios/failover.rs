//! Cluster failover as Karmada >= 1.14 does it: a member that goes NotReady gets a
//! NoSchedule taint and keeps what it runs; only a ClusterTaintPolicy adds the NoExecute
//! taint that evicts it (policies tolerate nothing unless they say so), and the workload
//! moves to the other member; Kairship's workload view shows the eviction in its failover
//! history. When the member is back, the policy's taint goes. Run against the simulated
//! fleet and the real one, so both must agree.

use std::process::Output;
use std::time::Duration;

use super::apply;

use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::GetWorkloadRequest;
use serde_json::{json, Value};
use tonic::transport::Channel;

const MANIFEST: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: failover-web
  namespace: default
  labels: {app: failover-web}
spec:
  replicas: 1
  selector: {matchLabels: {app: failover-web}}
  template:
    metadata: {labels: {app: failover-web}}
    spec:
      containers: [{name: c, image: nginx}]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: failover-web
  namespace: default
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: failover-web}
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaSchedulingType: Duplicated
"#;

const TAINT_POLICY: &str = r#"apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: evict-not-ready-member2
spec:
  targetClusters:
    clusterNames: [member2]
  addOnConditions:
    - {conditionType: Ready, operator: NotIn, statusValues: ["True"]}
  removeOnConditions:
    - {conditionType: Ready, operator: In, statusValues: ["True"]}
  taints:
    - {key: cluster.karmada.io/not-ready, effect: NoExecute}
"#;

fn get_json(kubectl: &dyn Fn(&[&str]) -> Output, args: &[&str]) -> Value {
    let out = kubectl(args);
    match out.status.success() {
        true => serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        false => Value::Null,
    }
}

fn placed(kubectl: &dyn Fn(&[&str]) -> Output) -> Vec<String> {
    let b = get_json(
        kubectl,
        &[
            "get",
            "resourcebindings.work.karmada.io",
            "failover-web-deployment",
            "-n",
            "default",
            "-o",
            "json",
        ],
    );
    let mut names: Vec<String> = b["spec"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

/// member2's taints as (key, effect).
fn taints(kubectl: &dyn Fn(&[&str]) -> Output) -> Vec<(String, String)> {
    let c = get_json(
        kubectl,
        &[
            "get",
            "clusters.cluster.karmada.io",
            "member2",
            "-o",
            "json",
        ],
    );
    c["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap_or_default().to_string();
            (s("key"), s("effect"))
        })
        .collect()
}

/// `kubectl`: instance karmada-1; `admin`: the fleet's fault API (`sim_admin` of
/// endpoints.json); `workloads` and `request`: Kairship's WorkloadService as a caller who
/// may read the instance; `dir`: where the manifests are written.
pub async fn only_a_taint_policy_evicts(
    kubectl: &(dyn Fn(&[&str]) -> Output + Sync),
    admin: &str,
    workloads: WorkloadServiceClient<Channel>,
    request: impl Fn(GetWorkloadRequest) -> tonic::Request<GetWorkloadRequest>,
    dir: &std::path::Path,
    within: Duration,
) {
    fn block<R>(f: impl FnOnce() -> R) -> R {
        tokio::task::block_in_place(f)
    }
    let member2 = format!("{admin}/clusters/karmada-1/member2");
    let set_ready = |ready: bool| {
        let url = member2.clone();
        async move {
            let body = if ready {
                json!({})
            } else {
                json!({"ready": false})
            };
            let (code, said) = kairship_wire::fault_client::call("POST", &url, Some(body))
                .await
                .unwrap_or_else(|e| panic!("POST {url}: {e}"));
            assert_eq!(code, 200, "POST {url}: {said:?}");
        }
    };
    let manifest = dir.join("failover-web.yaml");
    std::fs::write(&manifest, MANIFEST).expect("write the manifest");
    block(|| apply(kubectl, &manifest));
    block(|| {
        crate::wait(within, "failover-web on member1 and member2", || {
            (placed(kubectl) == ["member1", "member2"]).then_some(())
        })
    });

    set_ready(false).await;
    let not_ready = "cluster.karmada.io/not-ready";
    let unreachable = "cluster.karmada.io/unreachable";
    block(|| {
        crate::wait(within, "member2 tainted NoSchedule as NotReady", || {
            taints(kubectl)
                .iter()
                .any(|(k, e)| (k == not_ready || k == unreachable) && e == "NoSchedule")
                .then_some(())
        })
    });
    // Without a ClusterTaintPolicy Karmada (>= 1.14) evicts nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    block(|| {
        let t = taints(kubectl);
        assert!(
            !t.iter().any(|(_, e)| e == "NoExecute"),
            "NoExecute without a ClusterTaintPolicy: {t:?}"
        );
        assert_eq!(
            placed(kubectl),
            ["member1", "member2"],
            "evicted without a policy"
        );
    });

    let policy = dir.join("evict-not-ready-member2.yaml");
    std::fs::write(&policy, TAINT_POLICY).expect("write the policy");
    block(|| apply(kubectl, &policy));
    block(|| {
        crate::wait(within, "member2 tainted NoExecute by the policy", || {
            taints(kubectl)
                .contains(&(not_ready.to_string(), "NoExecute".to_string()))
                .then_some(())
        })
    });
    block(|| {
        crate::wait(within, "failover-web evicted from member2", || {
            (placed(kubectl) == ["member1"]).then_some(())
        })
    });

    // Kairship's failover history names the eviction Karmada recorded.
    let seen = crate::poll(within, crate::POLL, || {
        let (mut c, req) = (
            workloads.clone(),
            request(GetWorkloadRequest {
                instance: "karmada-1".into(),
                namespace: "default".into(),
                kind: "Deployment".into(),
                name: "failover-web".into(),
            }),
        );
        async move {
            let w = c
                .get_workload(req)
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            let evictions = w.placement.map(|p| p.evictions).unwrap_or_default();
            let done = evictions.iter().any(|e| {
                e.cluster == "member2"
                    && !e.in_progress
                    && e.reason == "EvictWorkloadFromClusterSucceed"
            });
            match done {
                true => Ok(()),
                false => Err(format!("{evictions:?}")),
            }
        }
    })
    .await;
    if let Err(last) = seen {
        panic!("Kairship's failover history of failover-web: {last}");
    }

    set_ready(true).await;
    block(|| {
        crate::wait(within, "member2's taints lifted once Ready", || {
            taints(kubectl).is_empty().then_some(())
        })
    });
    for (kind, name) in [
        (
            "clustertaintpolicies.policy.karmada.io",
            "evict-not-ready-member2",
        ),
        ("propagationpolicies.policy.karmada.io", "failover-web"),
        ("deployments", "failover-web"),
    ] {
        let out = block(|| kubectl(&["delete", kind, name, "-n", "default", "--wait=false"]));
        assert!(
            out.status.success(),
            "delete {kind} {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
