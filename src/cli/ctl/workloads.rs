//! `kairship ctl workloads list|get INSTANCE [NAME]`: where each workload runs (cluster,
//! replicas, ready), its binding's conditions, the policies that apply, and what the
//! override policies changed for each cluster; `kairship ctl promote` adopts one that
//! runs in a member cluster.

use clap::Subcommand;
use serde_json::Value;

use super::{n, print, s, status, Conn, Output};
use crate::proto::{self, workload_service_client::WorkloadServiceClient};
use crate::Error;

#[derive(Debug, Subcommand)]
pub enum WorkloadsCmd {
    /// Workloads of an instance with their placement.
    List {
        instance: String,
        /// Only this namespace (default: all).
        #[arg(short, long, default_value = "")]
        namespace: String,
    },
    /// One workload: per-cluster placement, conditions, policies, override changes.
    Get {
        instance: String,
        name: String,
        #[arg(short, long, default_value = "default")]
        namespace: String,
        /// Deployment, StatefulSet, DaemonSet or Job.
        #[arg(short, long, default_value = "Deployment")]
        kind: String,
    },
    /// Adopt a workload running in a member cluster (as `karmadactl promote`).
    Promote(PromoteArgs),
}

#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    instance: String,
    name: String,
    /// The member cluster it runs in.
    #[arg(short = 'C', long)]
    cluster: String,
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Deployment, StatefulSet, DaemonSet or Job.
    #[arg(short, long, default_value = "Deployment")]
    kind: String,
    /// Objects of its namespace adopted with it: ConfigMap/NAME, Secret/NAME or
    /// Service/NAME (repeat, or comma-separated).
    #[arg(long, value_delimiter = ',')]
    with: Vec<String>,
    /// The PropagationPolicy's name (default NAME-KIND).
    #[arg(long, default_value = "")]
    policy_name: String,
}

pub(crate) async fn promote(conn: &Conn, out: Output, a: &PromoteArgs) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    let r = c
        .promote_workload(conn.request_within(
            proto::PromoteWorkloadRequest {
                instance: a.instance.clone(),
                cluster: a.cluster.clone(),
                namespace: a.namespace.clone(),
                kind: a.kind.clone(),
                name: a.name.clone(),
                dependencies: a.with.clone(),
                policy_name: a.policy_name.clone(),
            },
            std::time::Duration::from_secs(60),
        ))
        .await
        .map_err(status)?
        .into_inner();
    print(out, "kairship.v1alpha1.PromoteWorkloadResponse", &r, |j| {
        let mut rows = vec![vec!["PROMOTED".into(), "POLICY".into()]];
        for p in j["promoted"].as_array().into_iter().flatten() {
            rows.push(vec![
                p.as_str().unwrap_or_default().into(),
                s(j, "/policyName"),
            ]);
        }
        rows
    })
}

/// "member1:1 member2:1" from a workload's placement.
fn clusters_cell(w: &Value) -> String {
    w.pointer("/placement/clusters")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}:{}", s(c, "/name"), n(c, "/replicas")))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

fn list_rows(ws: &[Value]) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "NAMESPACE".into(),
        "KIND".into(),
        "NAME".into(),
        "READY".into(),
        "CLUSTERS".into(),
        "POLICIES".into(),
    ]];
    for w in ws {
        let policies: Vec<String> = w["policies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| s(p, "/name"))
            .collect();
        rows.push(vec![
            s(w, "/metadata/namespace"),
            s(w, "/kind"),
            s(w, "/metadata/name"),
            format!("{}/{}", n(w, "/readyReplicas"), n(w, "/replicas")),
            clusters_cell(w),
            policies.join(","),
        ]);
    }
    rows
}

/// The sections of `get`: placement table, then conditions, policies and overrides.
fn get_rows(w: &Value) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "CLUSTER".into(),
        "REPLICAS".into(),
        "READY".into(),
        "APPLIED".into(),
        "HEALTH".into(),
    ]];
    let agg: Vec<Value> = w
        .pointer("/placement/aggregatedStatus")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in w
        .pointer("/placement/clusters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = s(c, "/name");
        let a = agg.iter().find(|a| s(a, "/clusterName") == name);
        rows.push(vec![
            name.clone(),
            n(c, "/replicas"),
            a.map(|a| n(a, "/readyReplicas"))
                .unwrap_or_else(|| "0".into()),
            a.map(|a| (a["applied"] == true).to_string())
                .unwrap_or_else(|| "false".into()),
            a.map(|a| s(a, "/health")).unwrap_or_default(),
        ]);
    }
    let mut more = vec![
        vec![],
        vec![format!(
            "{} {}/{}: {}/{} ready, binding {}",
            s(w, "/kind"),
            s(w, "/metadata/namespace"),
            s(w, "/metadata/name"),
            n(w, "/readyReplicas"),
            n(w, "/replicas"),
            s(w, "/placement/bindingName"),
        )],
    ];
    for c in w
        .pointer("/placement/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        more.push(vec![format!(
            "condition {}={} ({}): {}",
            s(c, "/type"),
            s(c, "/status"),
            s(c, "/reason"),
            s(c, "/message")
        )]);
    }
    for p in w["policies"].as_array().into_iter().flatten() {
        let ns = s(p, "/namespace");
        let at = if ns.is_empty() {
            String::new()
        } else {
            format!("{ns}/")
        };
        more.push(vec![format!(
            "policy {} {at}{}",
            s(p, "/kind"),
            s(p, "/name")
        )]);
    }
    for o in w
        .pointer("/placement/overrides")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let policies: Vec<String> = o["policies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str().map(String::from))
            .collect();
        more.push(vec![format!(
            "overrides on {} ({}):",
            s(o, "/cluster"),
            if policies.is_empty() {
                "none".into()
            } else {
                policies.join(", ")
            }
        )]);
        for c in o["changes"].as_array().into_iter().flatten() {
            more.push(vec![format!("  {}", c.as_str().unwrap_or_default())]);
        }
    }
    for e in w
        .pointer("/placement/evictions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let state = match e["inProgress"].as_bool() {
            Some(true) => "under way",
            _ => "done",
        };
        more.push(vec![format!(
            "evicted from {} ({state}, {}): {} {}",
            s(e, "/cluster"),
            s(e, "/time"),
            s(e, "/reason"),
            s(e, "/message")
        )]);
    }
    rows.extend(more);
    rows
}

pub(crate) async fn run(conn: &Conn, out: Output, cmd: &WorkloadsCmd) -> Result<(), Error> {
    let mut c = WorkloadServiceClient::new(conn.channel.clone());
    match cmd {
        WorkloadsCmd::List {
            instance,
            namespace,
        } => {
            let r = c
                .list_workloads(conn.request(proto::ListWorkloadsRequest {
                    instance: instance.clone(),
                    namespace: namespace.clone(),
                    ..Default::default()
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.ListWorkloadsResponse", &r, |j| {
                list_rows(j["workloads"].as_array().map(Vec::as_slice).unwrap_or(&[]))
            })
        }
        WorkloadsCmd::Get {
            instance,
            name,
            namespace,
            kind,
        } => {
            let r = c
                .get_workload(conn.request(proto::GetWorkloadRequest {
                    instance: instance.clone(),
                    namespace: namespace.clone(),
                    kind: kind.clone(),
                    name: name.clone(),
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.Workload", &r, get_rows)
        }
        WorkloadsCmd::Promote(a) => promote(conn, out, a).await,
    }
}
