//! Which policy Karmada lets claim a workload, as Kairship's workload view shows it: two
//! PropagationPolicies select `claimed-web` (one by `matchExpressions` with priority 10,
//! one every Deployment of the namespace with priority 0) and only the first claims it;
//! `other-app` is selected by the second alone (the expression does not match it). Run
//! against the simulated fleet and the real one, so both must agree.

use std::process::Output;
use std::time::Duration;

use super::apply;

use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::{GetWorkloadRequest, PolicyRef};
use serde_json::Value;
use tonic::transport::Channel;

const NAMESPACE: &str = "claims";

const POLICIES: &str = r#"apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: frontend-by-expression
  namespace: claims
spec:
  priority: 10
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      labelSelector:
        matchExpressions:
          - {key: tier, operator: In, values: [frontend]}
  placement:
    clusterAffinity:
      clusterNames: [member1]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: every-deployment
  namespace: claims
spec:
  priority: 0
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  placement:
    clusterAffinity:
      clusterNames: [member2]
"#;

fn deployment(name: &str, tier: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: claims
  labels: {{app: {name}, tier: {tier}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: nginx}}]
"#
    )
}

/// (kind, namespace/name, claimed) of each policy, sorted.
fn policies(refs: &[PolicyRef]) -> Vec<(String, String, bool)> {
    let mut out: Vec<_> = refs
        .iter()
        .map(|p| {
            (
                p.kind.clone(),
                format!("{}/{}", p.namespace, p.name),
                p.claimed,
            )
        })
        .collect();
    out.sort();
    out
}

/// `kubectl`: the instance (directly or through Kairship's proxy); `workloads` and
/// `request`: Kairship's WorkloadService as a caller who may read the instance; `dir`: a
/// directory to write the manifests into.
pub async fn claiming_policy_only(
    kubectl: &(dyn Fn(&[&str]) -> Output + Sync),
    workloads: WorkloadServiceClient<Channel>,
    request: impl Fn(GetWorkloadRequest) -> tonic::Request<GetWorkloadRequest>,
    dir: &std::path::Path,
    within: Duration,
) {
    let created = kubectl(&["create", "namespace", NAMESPACE]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let policies_file = dir.join("claims-policies.yaml");
    std::fs::write(&policies_file, POLICIES).expect("write the policies");
    tokio::task::block_in_place(|| apply(kubectl, &policies_file));
    // Both policies are in Karmada's informer caches before the templates arrive, so the
    // claim is Karmada's choice between them, not a race.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let templates = dir.join("claims-deployments.yaml");
    let both = format!(
        "{}---\n{}",
        deployment("claimed-web", "frontend"),
        deployment("other-app", "backend")
    );
    std::fs::write(&templates, both).expect("write the deployments");
    tokio::task::block_in_place(|| apply(kubectl, &templates));

    for (name, want) in [
        ("claimed-web", "frontend-by-expression"),
        ("other-app", "every-deployment"),
    ] {
        // Karmada's own record of the claim, on the template.
        let annotations = tokio::task::block_in_place(|| {
            crate::wait(within, &format!("Karmada's claim on {name}"), || {
                let out = kubectl(&["get", "deployment", name, "-n", NAMESPACE, "-o", "json"]);
                let v: Value = serde_json::from_slice(&out.stdout).ok()?;
                let a = v["metadata"]["annotations"].clone();
                a.get("propagationpolicy.karmada.io/name")
                    .is_some()
                    .then_some(a)
            })
        });
        assert_eq!(
            annotations["propagationpolicy.karmada.io/name"], want,
            "{name}"
        );
        let expected = vec![(
            "PropagationPolicy".to_string(),
            format!("{NAMESPACE}/{want}"),
            true,
        )];
        let seen = crate::poll(within, crate::POLL, || {
            let (mut c, req) = (
                workloads.clone(),
                request(GetWorkloadRequest {
                    instance: "karmada-1".into(),
                    namespace: NAMESPACE.into(),
                    kind: "Deployment".into(),
                    name: name.into(),
                }),
            );
            let expected = expected.clone();
            async move {
                let got = match c.get_workload(req).await {
                    Ok(w) => policies(&w.into_inner().policies),
                    Err(e) => return Err(format!("{e}")),
                };
                match got == expected {
                    true => Ok(()),
                    false => Err(format!("{got:?}")),
                }
            }
        })
        .await;
        if let Err(last) = seen {
            panic!("{name}: Kairship shows {last}, Karmada claimed it for {want}");
        }
    }
}
