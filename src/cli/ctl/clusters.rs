//! `kairship ctl cordon|uncordon|join|remove INSTANCE CLUSTER`: as `karmadactl cordon`,
//! `join` and `unjoin`, through Kairship's ClusterService.

use std::path::PathBuf;
use std::time::Duration;

use super::{print, s, status, Conn, Output};
use crate::proto::{self, cluster_service_client::ClusterServiceClient};
use crate::Error;

pub(crate) async fn cordon(
    conn: &Conn,
    out: Output,
    instance: &str,
    cluster: &str,
    on: bool,
) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let req = conn.request(proto::CordonClusterRequest {
        instance: instance.into(),
        name: cluster.into(),
    });
    let r = if on {
        c.cordon_cluster(req).await
    } else {
        c.uncordon_cluster(req).await
    }
    .map_err(status)?
    .into_inner();
    print(out, "kairship.v1alpha1.Cluster", &r, |j| {
        let taints: Vec<String> = j["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| format!("{}={}:{}", s(t, "/key"), s(t, "/value"), s(t, "/effect")))
            .collect();
        vec![
            vec!["CLUSTER".into(), "UNSCHEDULABLE".into(), "TAINTS".into()],
            vec![
                s(j, "/metadata/name"),
                (j["unschedulable"] == true).to_string(),
                taints.join(","),
            ],
        ]
    })
}

#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    instance: String,
    /// The Cluster's name in the instance.
    cluster: String,
    /// The member's kubeconfig (inline credentials only; sent once, never stored).
    #[arg(long)]
    cluster_kubeconfig: PathBuf,
    /// The kubeconfig's context for the member; its current context when unset.
    #[arg(long)]
    cluster_context: Option<String>,
    #[arg(long)]
    cluster_provider: Option<String>,
    #[arg(long)]
    cluster_region: Option<String>,
    /// Comma-separated.
    #[arg(long, value_delimiter = ',')]
    cluster_zones: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    instance: String,
    cluster: String,
    /// Remove even while workloads are propagated there: Karmada is made to move them.
    #[arg(long)]
    force: bool,
    /// With --force: seconds to wait for Karmada to move the workloads (1-300).
    #[arg(long, default_value_t = 60)]
    wait: i32,
    /// The member's kubeconfig, to remove what the join created there.
    #[arg(long)]
    cluster_kubeconfig: Option<PathBuf>,
    #[arg(long)]
    cluster_context: Option<String>,
}

fn read_kubeconfig(path: &PathBuf) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "reading --cluster-kubeconfig {}: {e}",
            path.display()
        ))
    })
}

pub(crate) async fn join(conn: &Conn, out: Output, a: &JoinArgs) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let req = conn.request_within(
        proto::JoinClusterRequest {
            instance: a.instance.clone(),
            name: a.cluster.clone(),
            kubeconfig: read_kubeconfig(&a.cluster_kubeconfig)?,
            context: a.cluster_context.clone().unwrap_or_default(),
            provider: a.cluster_provider.clone().unwrap_or_default(),
            region: a.cluster_region.clone().unwrap_or_default(),
            zones: a.cluster_zones.clone(),
        },
        Duration::from_secs(120),
    );
    let r = c.join_cluster(req).await.map_err(status)?.into_inner();
    print(out, "kairship.v1alpha1.Cluster", &r, |j| {
        vec![
            vec![
                "CLUSTER".into(),
                "MODE".into(),
                "ENDPOINT".into(),
                "JOINED".into(),
            ],
            vec![
                s(j, "/metadata/name"),
                s(j, "/syncMode"),
                s(j, "/apiEndpoint"),
                "yes".into(),
            ],
        ]
    })
}

pub(crate) async fn remove(conn: &Conn, out: Output, a: &RemoveArgs) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let kubeconfig = match &a.cluster_kubeconfig {
        Some(p) => read_kubeconfig(p)?,
        None => String::new(),
    };
    let wait = u64::try_from(a.wait.max(0)).unwrap_or(0);
    let req = conn.request_within(
        proto::RemoveClusterRequest {
            instance: a.instance.clone(),
            name: a.cluster.clone(),
            force: a.force,
            wait_seconds: a.wait,
            kubeconfig,
            context: a.cluster_context.clone().unwrap_or_default(),
        },
        // The move (`--wait`), a Pull member's Works (60 s), the Cluster's deletion (90 s).
        Duration::from_secs(wait + 210),
    );
    if a.force {
        eprintln!(
            "removing cluster {:?}: Karmada moves its workloads first (up to {wait} s), then the Cluster is deleted",
            a.cluster
        );
    }
    let r = c.remove_cluster(req).await.map_err(status)?.into_inner();
    print(out, "kairship.v1alpha1.RemoveClusterResponse", &r, |j| {
        let list = |p: &str| {
            j.pointer(p)
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default()
        };
        vec![
            vec![
                "CLUSTER".into(),
                "REMOVED".into(),
                "WORKLOADS".into(),
                "NOT MOVED".into(),
                "MEMBER CLEANED".into(),
                "INSTANCE CLEANED".into(),
            ],
            vec![
                a.cluster.clone(),
                "yes".into(),
                list("/workloads"),
                list("/notMoved"),
                list("/memberCleaned"),
                list("/instanceCleaned"),
            ],
        ]
    })?;
    if !r.member_left.is_empty() {
        eprintln!(
            "cluster {:?} was a Pull mode member: its karmada-agent may no longer reach the instance; what `--cluster-kubeconfig` would have removed is still on the member: {}",
            a.cluster,
            r.member_left.join(", ")
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct RegisterArgs {
    instance: String,
    /// Hours the token registers clusters (1-168).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(i64).range(1..=168))]
    ttl_hours: i64,
    /// The karmada-apiserver address the member reaches (https://host:port), when it is
    /// not the one Kairship uses.
    #[arg(long)]
    api_endpoint: Option<String>,
}

pub(crate) async fn register_command(
    conn: &Conn,
    out: Output,
    a: &RegisterArgs,
) -> Result<(), Error> {
    let mut c = ClusterServiceClient::new(conn.channel.clone());
    let req = conn.request(proto::CreateRegistrationTokenRequest {
        instance: a.instance.clone(),
        ttl_seconds: a.ttl_hours * 3600,
        description: String::new(),
        api_endpoint: a.api_endpoint.clone().unwrap_or_default(),
    });
    let r = c
        .create_registration_token(req)
        .await
        .map_err(status)?
        .into_inner();
    if matches!(out, Output::Table) {
        // What an administrator copies: the command alone, the expiry on stderr.
        eprintln!("the token expires at {}", r.expiration);
        println!("{}", r.register_command);
        return Ok(());
    }
    print(out, "kairship.v1alpha1.RegistrationToken", &r, |_| {
        Vec::new()
    })
}
