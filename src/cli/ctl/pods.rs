//! `kairship ctl pods|events INSTANCE NAME` and `kairship ctl logs INSTANCE POD -C
//! CLUSTER`: a workload's pods and what happened to them across its member clusters, and a
//! pod's log (followed with `-f`), through Kairship as the caller.

use std::io::Write;
use std::time::Duration;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, workload_service_client::WorkloadServiceClient};
use crate::Error;

#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    instance: String,
    /// The workload.
    name: String,
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Deployment, StatefulSet, DaemonSet or Job.
    #[arg(short, long, default_value = "Deployment")]
    kind: String,
}

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    instance: String,
    pod: String,
    /// The member cluster the pod runs in.
    #[arg(short = 'C', long)]
    cluster: String,
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// The container (default: the pod's only one).
    #[arg(short, long, default_value = "")]
    container: String,
    /// Lines from the end (default: all).
    #[arg(long, default_value_t = 0)]
    tail: i64,
    #[arg(long, default_value_t = 0)]
    since_seconds: i64,
    /// The previous (terminated) container's log.
    #[arg(short, long)]
    previous: bool,
    /// Keep printing lines as they come, until interrupted.
    #[arg(short, long)]
    follow: bool,
    #[arg(long)]
    timestamps: bool,
}

pub(crate) async fn pods(conn: &Conn, out: Output, a: &PodsArgs) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    let r = c
        .list_workload_pods(conn.request_within(
            proto::ListWorkloadPodsRequest {
                instance: a.instance.clone(),
                namespace: a.namespace.clone(),
                kind: a.kind.clone(),
                name: a.name.clone(),
            },
            Duration::from_secs(30),
        ))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.ListWorkloadPodsResponse", &r, |j| {
        let mut rows = vec![[
            "CLUSTER", "NAME", "READY", "STATUS", "RESTARTS", "NODE", "IP", "CREATED",
        ]
        .map(String::from)
        .to_vec()];
        for c in j["clusters"].as_array().into_iter().flatten() {
            if !s(c, "/error").is_empty() {
                rows.push(vec![
                    s(c, "/cluster"),
                    format!("(unreadable: {})", s(c, "/error")),
                ]);
            }
            for p in c["pods"].as_array().into_iter().flatten() {
                let reason = s(p, "/reason");
                rows.push(vec![
                    s(p, "/cluster"),
                    s(p, "/name"),
                    format!("{}/{}", n(p, "/readyContainers"), n(p, "/containers")),
                    if reason.is_empty() {
                        s(p, "/phase")
                    } else {
                        reason
                    },
                    n(p, "/restarts"),
                    s(p, "/node"),
                    s(p, "/podIp"),
                    s(p, "/created"),
                ]);
            }
        }
        rows
    })
}

pub(crate) async fn events(conn: &Conn, out: Output, a: &PodsArgs) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    let r = c
        .list_workload_events(conn.request_within(
            proto::ListWorkloadEventsRequest {
                instance: a.instance.clone(),
                namespace: a.namespace.clone(),
                kind: a.kind.clone(),
                name: a.name.clone(),
            },
            Duration::from_secs(30),
        ))
        .await
        .map_err(status)?
        .into_inner();
    print(
        out,
        "kairship.v1alpha1.ListWorkloadEventsResponse",
        &r,
        |j| {
            let mut rows = vec![["TIME", "WHERE", "TYPE", "REASON", "OBJECT", "MESSAGE"]
                .map(String::from)
                .to_vec()];
            for e in j["events"].as_array().into_iter().flatten() {
                let place = match s(e, "/cluster") {
                    c if c.is_empty() => "(instance)".to_string(),
                    c => c,
                };
                rows.push(vec![
                    s(e, "/time"),
                    place,
                    s(e, "/type"),
                    s(e, "/reason"),
                    format!("{}/{}", s(e, "/objectKind"), s(e, "/objectName")),
                    s(e, "/message"),
                ]);
            }
            for u in j["unavailable"].as_array().into_iter().flatten() {
                rows.push(vec![format!(
                    "(unreadable: {})",
                    u.as_str().unwrap_or_default()
                )]);
            }
            rows
        },
    )
}

/// Prints the log as it comes; a followed log until the pod's container ends or Ctrl-C.
pub(crate) async fn logs(conn: &Conn, a: &LogsArgs) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    let msg = proto::GetPodLogsRequest {
        instance: a.instance.clone(),
        cluster: a.cluster.clone(),
        namespace: a.namespace.clone(),
        pod: a.pod.clone(),
        container: a.container.clone(),
        tail_lines: a.tail,
        since_seconds: a.since_seconds,
        previous: a.previous,
        follow: a.follow,
        timestamps: a.timestamps,
    };
    let req = match a.follow {
        true => conn.request_open(msg),
        false => conn.request_within(msg, Duration::from_secs(60)),
    };
    let stream = c.get_pod_logs(req).await.map_err(status)?.into_inner();
    print_stream(stream).await
}

/// Prints a log stream's text as it comes.
pub(crate) async fn print_stream(
    mut stream: tonic::Streaming<proto::PodLogChunk>,
) -> Result<(), Error> {
    let mut stdout = std::io::stdout();
    while let Some(chunk) = stream.message().await.map_err(status)? {
        stdout
            .write_all(chunk.text.as_bytes())
            .and_then(|_| stdout.flush())
            .map_err(|e| Error::Usage(format!("writing the log: {e}")))?;
    }
    Ok(())
}
