//! A hostile instance (`kind: hostile`): the victim fills itself with large objects and
//! keeps rewriting them (endless watch events; written with the instance's own credentials,
//! as an editor of it or a compromised control plane would), while a viewer of it opens
//! pass-through watches through Kairship as fast as Kairship lets them. The victim's cache budget is set small for the
//! experiment, so it must go Degraded naming the budget; the other instances must not
//! notice.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

/// The label on every object the hostile editor writes (so clearing finds them).
const LABEL: &str = "kairship.io/chaos-hostile";

/// The running attack; dropped, its tasks end.
pub struct Hostile {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn resource() -> kube::discovery::ApiResource {
    kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&())
}

fn object(name: &str, bytes: usize, round: u64) -> DynamicObject {
    let v = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "labels": {LABEL: "true"},
            "annotations": {"filler": "x".repeat(bytes), "round": round.to_string()}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    });
    DynamicObject::new(name, &resource()).data(v)
}

/// Sets (or with `None` clears) the victim's cache budget on its Instance.
pub async fn set_budget(
    host: &kube::Client,
    victim: &str,
    bytes: Option<u64>,
) -> Result<(), String> {
    let instances: Api<crate::crd::Instance> = Api::all(host.clone());
    let budget = bytes.map(|b| json!({"maxBytes": b}));
    let patch = json!({"spec": {"cacheBudget": budget}});
    tokio::time::timeout(
        Duration::from_secs(5),
        instances.patch(victim, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map_err(|_| "the host did not answer within 5s".to_string())?
    .map(drop)
    .map_err(|e| format!("setting {victim}'s cache budget: {e}"))
}

/// Starts the editor (`editor`: the victim's own API server) and the viewer's watches
/// (`viewer`: the victim through Kairship's proxy, as a viewer).
pub fn start(
    editor: kube::Client,
    viewer: kube::Client,
    object_bytes: u64,
    per_second: u32,
    watchers: u32,
) -> Hostile {
    let mut tasks = Vec::new();
    let bytes = usize::try_from(object_bytes).unwrap_or(usize::MAX);
    let deployments: Api<DynamicObject> = Api::namespaced_with(editor, "default", &resource());
    tasks.push(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
        // Twenty objects, written again and again: each write is a watch event.
        let mut n = 0u64;
        loop {
            ticker.tick().await;
            let name = format!("hostile-{}", n % 20);
            let (api, round) = (deployments.clone(), n / 20);
            tokio::spawn(async move {
                let o = object(&name, bytes, round);
                let params = PatchParams::apply("chaos-hostile").force();
                let patch = Patch::Apply(&o);
                let write = api.patch(&name, &params, &patch);
                let _ = tokio::time::timeout(Duration::from_secs(10), write).await;
            });
            n += 1;
        }
    }));
    let viewer = Arc::new(viewer);
    for _ in 0..watchers {
        let viewer = viewer.clone();
        tasks.push(tokio::spawn(async move {
            // As fast as it is let: a refused watch is asked again at once (a 429 comes
            // after Kairship's queue wait), an open one is held until it ends.
            loop {
                let req = http::Request::get("/api/v1/namespaces/default/configmaps?watch=1")
                    .body(kube::client::Body::empty());
                let Ok(req) = req else { return };
                match viewer.send(req).await {
                    Ok(r) if r.status().is_success() => {
                        use http_body_util::BodyExt;
                        let mut body = r.into_body();
                        while let Some(Ok(_)) = body.frame().await {}
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }));
    }
    Hostile { tasks }
}

/// Deletes what the editor wrote.
pub async fn clean(editor: kube::Client) -> Result<(), String> {
    let deployments: Api<DynamicObject> = Api::namespaced_with(editor, "default", &resource());
    let params = ListParams::default().labels(&format!("{LABEL}=true"));
    let clean = async {
        let list = deployments.list(&params).await?;
        for o in list.items {
            if let Some(name) = o.metadata.name {
                deployments.delete(&name, &DeleteParams::default()).await?;
            }
        }
        Ok::<(), kube::Error>(())
    };
    match tokio::time::timeout(Duration::from_secs(20), clean).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("deleting the hostile objects: {e}")),
        Err(_) => Err("deleting the hostile objects: no answer within 20s".into()),
    }
}
