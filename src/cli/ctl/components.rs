//! `kairship ctl instances components|restart-component|component-logs`: a managed
//! instance's control plane as karmada-operator runs it in the host.

use std::time::Duration;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, instance_service_client::InstanceServiceClient};
use crate::Error;

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    name: String,
    component: String,
    /// One of the component's pods (default: its first).
    #[arg(long, default_value = "")]
    pod: String,
    #[arg(short, long, default_value = "")]
    container: String,
    #[arg(long, default_value_t = 0)]
    tail: i64,
    #[arg(short, long)]
    previous: bool,
    #[arg(short, long)]
    follow: bool,
}

fn rows(components: &[serde_json::Value]) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "COMPONENT",
        "KIND",
        "READY",
        "UP-TO-DATE",
        "RESTARTS",
        "HEALTH",
        "LAST TERMINATION",
        "REASON",
    ]
    .map(String::from)
    .to_vec()];
    for c in components {
        rows.push(vec![
            s(c, "/name"),
            s(c, "/kind"),
            format!("{}/{}", n(c, "/readyReplicas"), n(c, "/replicas")),
            n(c, "/updatedReplicas"),
            n(c, "/restarts"),
            s(c, "/health"),
            s(c, "/lastTermination"),
            s(c, "/reason"),
        ]);
    }
    rows
}

pub(crate) async fn list(conn: &Conn, out: Output, name: &str) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = c
        .list_components(conn.request(proto::ListComponentsRequest { name: name.into() }))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.ListComponentsResponse", &r, |j| {
        rows(j["components"].as_array().map(Vec::as_slice).unwrap_or(&[]))
    })
}

pub(crate) async fn restart(
    conn: &Conn,
    out: Output,
    name: &str,
    component: &str,
) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let r = c
        .restart_component(conn.request(proto::RestartComponentRequest {
            name: name.into(),
            component: component.into(),
        }))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.Component", &r, |j| {
        rows(std::slice::from_ref(j))
    })
}

pub(crate) async fn logs(conn: &Conn, a: &LogsArgs) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let msg = proto::GetComponentLogsRequest {
        name: a.name.clone(),
        component: a.component.clone(),
        pod: a.pod.clone(),
        container: a.container.clone(),
        tail_lines: a.tail,
        previous: a.previous,
        follow: a.follow,
    };
    let req = match a.follow {
        true => conn.request_open(msg),
        false => conn.request_within(msg, Duration::from_secs(60)),
    };
    let stream = c
        .get_component_logs(req)
        .await
        .map_err(status)?
        .into_inner();
    super::pods::print_stream(stream).await
}
