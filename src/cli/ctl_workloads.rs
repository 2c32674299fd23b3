//! `kairship ctl workloads` and `cordon`/`uncordon`: where each workload runs (per-cluster
//! replicas and readiness, the binding's conditions, the policies that apply), and taking a
//! member cluster out of scheduling.

use clap::Subcommand;
use serde_json::Value;

use super::ctl::{n, print, s, status, Conn, Output};
use crate::proto::{
    self, cluster_service_client::ClusterServiceClient,
    workload_service_client::WorkloadServiceClient,
};
use crate::Error;

#[derive(Debug, Clone, Subcommand)]
pub enum WorkloadsCmd {
    /// Every workload with its placement summary.
    List { instance: String },
    /// One workload: per-cluster placement and readiness, conditions, policies.
    Get {
        instance: String,
        name: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        #[arg(long, default_value = "Deployment")]
        kind: String,
    },
}

/// `member1:1/1 member2:1/1`: each target cluster with ready/desired replicas.
fn placement_summary(w: &Value) -> String {
    let p = &w["placement"];
    let ready = |cluster: &str| {
        p["aggregatedStatus"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["clusterName"] == cluster)
            .map(|a| n(a, "/readyReplicas"))
            .unwrap_or_else(|| "0".into())
    };
    let parts: Vec<String> = p["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = s(c, "/name");
            format!("{name}:{}/{}", ready(&name), n(c, "/replicas"))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

fn policies(w: &Value) -> String {
    let names: Vec<String> = w["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}/{}", s(p, "/kind"), s(p, "/name")))
        .collect();
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

pub async fn run(conn: &Conn, out: Output, cmd: WorkloadsCmd) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    match cmd {
        WorkloadsCmd::List { instance } => {
            let r = c
                .list_workloads(conn.request(proto::ListWorkloadsRequest {
                    instance,
                    ..Default::default()
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.ListWorkloadsResponse", &r, |j| {
                let mut rows = vec![[
                    "NAMESPACE",
                    "NAME",
                    "KIND",
                    "READY",
                    "PLACEMENT (ready/replicas)",
                    "POLICIES",
                ]
                .map(String::from)
                .to_vec()];
                for w in j["workloads"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    rows.push(vec![
                        s(w, "/metadata/namespace"),
                        s(w, "/metadata/name"),
                        s(w, "/kind"),
                        format!("{}/{}", n(w, "/readyReplicas"), n(w, "/replicas")),
                        placement_summary(w),
                        policies(w),
                    ]);
                }
                rows
            })
        }
        WorkloadsCmd::Get {
            instance,
            name,
            namespace,
            kind,
        } => {
            let w = c
                .get_workload(conn.request(proto::GetWorkloadRequest {
                    instance,
                    namespace,
                    kind,
                    name,
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.Workload", &w, |j| {
                let mut rows = vec![["CLUSTER", "REPLICAS", "READY", "APPLIED", "HEALTH"]
                    .map(String::from)
                    .to_vec()];
                let p = &j["placement"];
                for c in p["clusters"].as_array().into_iter().flatten() {
                    let name = s(c, "/name");
                    let agg = p["aggregatedStatus"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|a| a["clusterName"] == name.as_str())
                        .cloned()
                        .unwrap_or_default();
                    rows.push(vec![
                        name,
                        n(c, "/replicas"),
                        n(&agg, "/readyReplicas"),
                        (agg["applied"] == Value::Bool(true)).to_string(),
                        s(&agg, "/health"),
                    ]);
                }
                rows.push(vec![]);
                rows.push(vec![
                    format!(
                        "{} {}/{}",
                        s(j, "/kind"),
                        s(j, "/metadata/namespace"),
                        s(j, "/metadata/name")
                    ),
                    format!("ready {}/{}", n(j, "/readyReplicas"), n(j, "/replicas")),
                    format!("binding {}", s(p, "/bindingName")),
                    format!("policies {}", policies(j)),
                ]);
                for cond in p["conditions"].as_array().into_iter().flatten() {
                    rows.push(vec![
                        format!("condition {}", s(cond, "/type")),
                        s(cond, "/status"),
                        s(cond, "/reason"),
                        s(cond, "/message"),
                    ]);
                }
                rows
            })
        }
    }
}

pub async fn cordon(
    conn: &Conn,
    out: Output,
    instance: String,
    cluster: String,
    on: bool,
) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let req = conn.request(proto::CordonClusterRequest {
        instance,
        name: cluster,
    });
    let r = if on {
        c.cordon_cluster(req).await
    } else {
        c.uncordon_cluster(req).await
    }
    .map_err(status)?
    .into_inner();
    print(out, "kairship.v1alpha1.Cluster", &r, |j| {
        vec![
            vec!["NAME".into(), "READY".into(), "SCHEDULABLE".into()],
            vec![
                s(j, "/metadata/name"),
                (j["ready"] == Value::Bool(true)).to_string(),
                (j["unschedulable"] != Value::Bool(true)).to_string(),
            ],
        ]
    })
}
