//! What a kubelet-less member cluster needs to look alive: Node objects with capacity and
//! a Ready condition, and Deployments whose status says their replicas are up.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::Error;

/// Creates `count` Ready nodes of 8 CPUs, 32 GiB and 110 pods each.
pub async fn create_nodes(client: &kube::Client, count: usize) -> Result<(), Error> {
    let api: Api<Node> = Api::all(client.clone());
    for i in 1..=count {
        let name = format!("node-{i}");
        let node: Node = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .map_err(|e| Error::Invalid(e.to_string()))?;
        match api.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::kube(format!("creating node {name}"))(e)),
        }
        let now = jiff_now();
        let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
        let status = json!({"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated by the real-fleet harness",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(Error::kube(format!("setting the status of node {name}")))?;
    }
    Ok(())
}

fn jiff_now() -> String {
    // RFC 3339 seconds, as Kubernetes writes times.
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Every `period`, reports each Deployment's replicas as ready, as a kubelet and the
/// deployment controller would once its pods ran. Runs until aborted.
pub async fn fill_deployment_status(client: kube::Client, period: Duration) {
    let api: Api<Deployment> = Api::all(client);
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            for d in list.items {
                let (Some(ns), Some(name)) =
                    (d.metadata.namespace.clone(), d.metadata.name.clone())
                else {
                    continue;
                };
                let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let generation = d.metadata.generation.unwrap_or(0);
                let st = d.status.clone().unwrap_or_default();
                if st.observed_generation == Some(generation)
                    && st.ready_replicas == Some(want)
                    && st.replicas == Some(want)
                {
                    continue;
                }
                let status = json!({"status": {"observedGeneration": generation, "replicas": want,
                    "readyReplicas": want, "availableReplicas": want, "updatedReplicas": want,
                    "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}});
                let api_ns: Api<Deployment> = Api::namespaced(api.clone().into_client(), &ns);
                if let Err(e) = api_ns
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                {
                    tracing::debug!(%ns, %name, error = %e, "filling deployment status");
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}
