//! Kubernetes Events on Kairship's own cluster-scoped objects (Instances, FleetRollouts),
//! written by the leader so `kubectl describe` and `kubectl get events` tell an SRE what
//! happened. Events of a cluster-scoped object live in `default`, as kube-apiserver's own
//! do.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::Context;
use crate::host::error::{fenced, HostError};

/// Where the events of cluster-scoped objects go.
pub const NAMESPACE: &str = "default";
/// Who the events say reported them.
pub const COMPONENT: &str = "kairship";

/// Records `event`, fenced to the leader's term; `what` names it in the error.
pub async fn create(ctx: &Context, event: Event, what: &str) -> Result<(), HostError> {
    let api: Api<Event> = Api::namespaced(ctx.host.clone(), NAMESPACE);
    let timeout = ctx.settings.host_call_timeout;
    let write = ctx
        .leadership
        .fenced(timeout, api.create(&PostParams::default(), &event))
        .await;
    fenced(format!("recording {what}"), write).map(drop)
}

/// A cluster-scoped Kairship object an Event is about.
pub struct About<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

/// An Event on `about` (in [`NAMESPACE`]), reported by this replica (`reporter`).
pub fn event_on(
    about: &About<'_>,
    reason: &str,
    message: &str,
    warning: bool,
    reporter: &str,
) -> Event {
    let now = jiff::Timestamp::now();
    let at = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    // kube-apiserver refuses an Event whose message passes 1 KiB... in bytes, so cut on a
    // character boundary below it.
    let message: String = message.chars().take(1000).collect();
    let value = json!({
        "metadata": {
            "name": format!("{}.{:x}", about.name, now.as_nanosecond()),
            "namespace": NAMESPACE,
        },
        "involvedObject": {
            "apiVersion": "kairship.io/v1alpha1",
            "kind": about.kind,
            "name": about.name,
            "uid": about.uid,
        },
        "reason": reason,
        "message": message,
        "type": if warning { "Warning" } else { "Normal" },
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": reporter,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    });
    // Every field above is one Event has: this cannot fail.
    serde_json::from_value(value).unwrap_or_default()
}
