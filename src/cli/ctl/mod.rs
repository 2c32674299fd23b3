//! `kairship ctl`: a client for people, over gRPC. Tables by default, `-o json|yaml` for
//! the proto3 JSON shape. The address and token come from flags, the environment, or the
//! demo's endpoints.json.

mod backups;
mod certificates;
mod clusters;
mod components;
mod hibernation;
mod instances;
mod kubeconfig;
mod pods;
mod rollouts;
mod search;
mod trace;
mod usage;
mod workloads;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use prost::Message;
use serde_json::Value;
use tonic::transport::Channel;

use crate::proto::{
    self, access_service_client::AccessServiceClient, cluster_service_client::ClusterServiceClient,
    instance_service_client::InstanceServiceClient,
    supervisor_service_client::SupervisorServiceClient,
};
use crate::Error;

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Output {
    #[default]
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Args)]
pub struct CtlArgs {
    /// gRPC address: `https://host:port` (TLS, as `kairship run` serves it) or `host:port`
    /// (plain text, as the demo serves it on loopback); else $KAIRSHIP_GRPC, else `grpc` in
    /// endpoints.json.
    #[arg(long, env = "KAIRSHIP_GRPC")]
    pub grpc: Option<String>,
    /// CA bundle (PEM) that signs Kairship's certificate, for `https://` addresses; else
    /// $KAIRSHIP_CA, else `ca` in endpoints.json, else the system's roots.
    #[arg(long, env = "KAIRSHIP_CA")]
    pub ca_file: Option<PathBuf>,
    /// Bearer token; else $KAIRSHIP_TOKEN, else the admin token in endpoints.json.
    #[arg(long, env = "KAIRSHIP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Where `kairship demo` wrote endpoints.json.
    #[arg(long, default_value = ".kairship-demo")]
    pub state_dir: PathBuf,
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    pub output: Output,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Debug, Subcommand)]
pub enum CtlCommand {
    /// Karmada instances.
    #[command(subcommand)]
    Instances(instances::InstancesCmd),
    /// An instance's backups: list, create, restore, delete, schedule.
    #[command(subcommand)]
    Backups(backups::BackupsCmd),
    /// Aggregated statistics of one instance.
    Stats { name: String },
    /// Member clusters of one instance.
    Clusters { name: String },
    /// The supervision tree.
    #[command(subcommand)]
    Actors(ActorsCmd),
    /// Mark a member cluster unschedulable (new placements go elsewhere).
    Cordon { instance: String, cluster: String },
    /// Make a cordoned member cluster schedulable again.
    Uncordon { instance: String, cluster: String },
    /// Join a member cluster in Push mode (as `karmadactl join`), from its kubeconfig.
    Join(clusters::JoinArgs),
    /// Remove a member cluster (as `karmadactl unjoin`); refused while workloads run
    /// there unless --force.
    #[command(alias = "unjoin")]
    Remove(clusters::RemoveArgs),
    /// Pull mode: a bootstrap token and the `karmadactl register` command to run against
    /// the member (as `karmadactl token create --print-register-command`).
    RegisterCommand(clusters::RegisterArgs),
    /// Workloads of one instance and where Karmada placed them.
    #[command(subcommand)]
    Workloads(workloads::WorkloadsCmd),
    /// A workload's pods in every member cluster it is placed on.
    Pods(pods::PodsArgs),
    /// A pod's log in a member cluster (`-f` follows it).
    Logs(pods::LogsArgs),
    /// Events of a workload, its binding, and its ReplicaSets and pods on the members.
    Events(pods::PodsArgs),
    /// How a resource template got where it is: the policy that claimed it (and why the
    /// others did not), its binding, the Work and state on each cluster, the events.
    Trace(trace::TraceArgs),
    /// Adopt a workload running in a member cluster (as `karmadactl promote`): it becomes
    /// the instance's, placed on that cluster, without restarting.
    Promote(workloads::PromoteArgs),
    /// Search the fleet: objects in every instance you may view (`-l app=payments`).
    Search(search::SearchArgs),
    /// Fleet rollouts: `plan` shows what one would do before anything moves.
    #[command(subcommand)]
    Rollouts(rollouts::RolloutsCmd),
    /// Who Kairship takes you for, and your role on each instance.
    Whoami,
    /// A kubeconfig for one instance through Kairship (kubectl, karmadactl, helm), with
    /// your token.
    Kubeconfig(kubeconfig::KubeconfigArgs),
}

#[derive(Debug, Subcommand)]
pub enum ActorsCmd {
    List,
    /// Restart one instance actor.
    Restart {
        name: String,
    },
    /// An instance's controllers on the replica that answers: switched on, running here
    /// (leader-only ones run on the leader), failures and the last success.
    Controllers {
        name: String,
    },
}

pub(crate) struct Conn {
    pub(crate) channel: Channel,
    token: Option<String>,
}

impl Conn {
    pub(crate) fn request<T>(&self, msg: T) -> tonic::Request<T> {
        self.request_within(msg, Duration::from_secs(15))
    }

    /// A request that may take longer than most (a join waits for the member's tokens, a
    /// forced removal for Karmada to move workloads).
    pub(crate) fn request_within<T>(&self, msg: T, within: Duration) -> tonic::Request<T> {
        let mut r = self.request_open(msg);
        r.set_timeout(within);
        r
    }

    /// A request with no deadline: a stream that runs until the caller stops it.
    pub(crate) fn request_open<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        if let Some(t) = &self.token {
            if let Ok(v) = format!("Bearer {t}").parse() {
                r.metadata_mut().insert("authorization", v);
            }
        }
        r
    }
}

async fn connect(args: &CtlArgs) -> Result<Conn, Error> {
    let endpoints = || -> Result<Value, Error> {
        let path = args.state_dir.join("endpoints.json");
        let text = std::fs::read(&path).map_err(|source| Error::Io {
            context: format!(
                "reading {} (pass --grpc, or run `kairship demo`)",
                path.display()
            ),
            source,
        })?;
        serde_json::from_slice(&text)
            .map_err(|e| Error::Usage(format!("{} is not valid JSON: {e}", path.display())))
    };
    let (grpc, token, ca) = match (&args.grpc, &args.token) {
        (Some(g), t) => (g.clone(), t.clone(), args.ca_file.clone()),
        (None, t) => {
            let e = endpoints()?;
            let g = e["grpc"]
                .as_str()
                .ok_or_else(|| Error::Usage("endpoints.json has no grpc address".into()))?;
            // A gRPC port served with TLS says so; its CA is the HTTPS one.
            let g = match e["grpc_tls"].as_bool() {
                Some(true) => format!("https://{g}"),
                _ => g.to_string(),
            };
            let ca = args
                .ca_file
                .clone()
                .or_else(|| e["ca"].as_str().map(PathBuf::from));
            (
                g,
                t.clone()
                    .or_else(|| e["tokens"]["admin"].as_str().map(String::from)),
                ca,
            )
        }
    };
    let ca_pem = match &ca {
        Some(path) if grpc.starts_with("https://") => {
            Some(std::fs::read_to_string(path).map_err(|source| Error::Io {
                context: format!("reading the CA bundle {}", path.display()),
                source,
            })?)
        }
        _ => None,
    };
    let channel = grpc_endpoint(&grpc, ca_pem.as_deref())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| Error::Usage(format!("cannot reach Kairship at {grpc}: {e}")))?;
    Ok(Conn { channel, token })
}

/// The endpoint of a gRPC address: `https://host:port` with TLS, verified with `ca_pem`
/// (else the system's roots); `host:port` or `http://host:port` in plain text.
pub fn grpc_endpoint(
    address: &str,
    ca_pem: Option<&str>,
) -> Result<tonic::transport::Endpoint, Error> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    let bad =
        |e: &dyn std::fmt::Display| Error::Usage(format!("bad gRPC address {address:?}: {e}"));
    if !address.starts_with("https://") {
        let plain = match address.starts_with("http://") {
            true => address.to_string(),
            false => format!("http://{address}"),
        };
        return Endpoint::from_shared(plain).map_err(|e| bad(&e));
    }
    let tls = match ca_pem {
        Some(pem) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
        None => ClientTlsConfig::new().with_native_roots(),
    };
    Endpoint::from_shared(address.to_string())
        .map_err(|e| bad(&e))?
        .tls_config(tls)
        .map_err(|e| bad(&e))
}

pub(crate) fn status(e: tonic::Status) -> Error {
    Error::Usage(format!("{:?}: {}", e.code(), e.message()))
}

pub(crate) fn print(
    output: Output,
    full_name: &str,
    msg: &impl Message,
    table: impl FnOnce(&Value) -> Vec<Vec<String>>,
) -> Result<(), Error> {
    let json = crate::api::transcode::message_json(full_name, &msg.encode_to_vec())
        .map_err(Error::Usage)?;
    match output {
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        ),
        Output::Yaml => print!(
            "{}",
            serde_saphyr::to_string(&json).map_err(|e| Error::Usage(e.to_string()))?
        ),
        Output::Table => print_table(table(&json)),
    }
    Ok(())
}

/// Rows as aligned columns; a row of one cell is a line of text below or between them
/// (a section of `workloads get`), printed as it is. Each run of rows between such lines
/// is a table of its own, aligned on its own widths.
fn print_table(rows: Vec<Vec<String>>) {
    let mut block: Vec<Vec<String>> = Vec::new();
    for r in rows {
        if r.len() > 1 {
            block.push(r);
            continue;
        }
        print_aligned(std::mem::take(&mut block));
        println!("{}", r.first().map(String::as_str).unwrap_or_default());
    }
    print_aligned(block);
}

fn print_aligned(rows: Vec<Vec<String>>) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        println!("{}", line.join("   ").trim_end());
    }
}

pub(crate) fn s(v: &Value, path: &str) -> String {
    match v.pointer(path) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A number that proto3 JSON leaves out when it is zero.
pub(crate) fn n(v: &Value, path: &str) -> String {
    let x = s(v, path);
    if x.is_empty() {
        "0".into()
    } else {
        x
    }
}

/// Every instance the caller may see, page after page (a page holds at most 500).
pub(crate) async fn every_instance(conn: &Conn) -> Result<proto::ListInstancesResponse, Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    let mut all = proto::ListInstancesResponse::default();
    let mut token = String::new();
    loop {
        let options = proto::ListOptions {
            page_token: token.clone(),
            ..Default::default()
        };
        let page = c
            .list_instances(conn.request(proto::ListInstancesRequest {
                options: Some(options),
            }))
            .await
            .map_err(status)?
            .into_inner();
        all.instances.extend(page.instances);
        if page.next_page_token.is_empty() {
            return Ok(all);
        }
        // A server handing back the token it was given would never end the loop.
        if page.next_page_token == token {
            return Err(Error::Usage(
                "ListInstances returned the same page token twice".into(),
            ));
        }
        token = page.next_page_token;
    }
}

pub async fn run(args: CtlArgs) -> Result<(), Error> {
    let conn = connect(&args).await?;
    let out = args.output;
    match &args.command {
        CtlCommand::Instances(cmd) => instances::run(&conn, out, cmd).await,
        CtlCommand::Kubeconfig(a) => kubeconfig::run(&conn, out, a).await,
        CtlCommand::Stats { name } => {
            let mut c = InstanceServiceClient::new(conn.channel.clone());
            let r = c
                .get_instance_stats(
                    conn.request(proto::GetInstanceStatsRequest { name: name.clone() }),
                )
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.InstanceStats", &r, |j| {
                let mut rows = vec![vec!["STAT".into(), "VALUE".into()]];
                if let Some(o) = j.as_object() {
                    rows.extend(o.iter().map(|(k, v)| {
                        vec![
                            k.clone(),
                            s(
                                &Value::Object(
                                    [("v".to_string(), v.clone())].into_iter().collect(),
                                ),
                                "/v",
                            ),
                        ]
                    }));
                }
                rows
            })
        }
        CtlCommand::Clusters { name } => {
            let mut c = ClusterServiceClient::new(conn.channel.clone());
            let r = c
                .list_clusters(conn.request(proto::ListClustersRequest {
                    instance: name.clone(),
                    options: None,
                }))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.ListClustersResponse", &r, |j| {
                let mut rows = vec![vec![
                    "NAME".into(),
                    "READY".into(),
                    "VERSION".into(),
                    "MODE".into(),
                    "NODES".into(),
                    "CPU".into(),
                    "MEMORY".into(),
                ]];
                for c in j["clusters"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    rows.push(vec![
                        s(c, "/metadata/name"),
                        if c["ready"] == Value::Bool(true) {
                            "True".into()
                        } else {
                            "False".into()
                        },
                        s(c, "/kubernetesVersion"),
                        s(c, "/syncMode"),
                        format!("{}/{}", n(c, "/nodesReady"), n(c, "/nodesTotal")),
                        format!("{}/{}", s(c, "/allocated/cpu"), s(c, "/allocatable/cpu")),
                        format!(
                            "{}/{}",
                            s(c, "/allocated/memory"),
                            s(c, "/allocatable/memory")
                        ),
                    ]);
                }
                rows
            })
        }
        CtlCommand::Cordon { instance, cluster } => {
            clusters::cordon(&conn, out, instance, cluster, true).await
        }
        CtlCommand::Uncordon { instance, cluster } => {
            clusters::cordon(&conn, out, instance, cluster, false).await
        }
        CtlCommand::Join(args) => clusters::join(&conn, out, args).await,
        CtlCommand::Remove(args) => clusters::remove(&conn, out, args).await,
        CtlCommand::RegisterCommand(args) => clusters::register_command(&conn, out, args).await,
        CtlCommand::Workloads(cmd) => workloads::run(&conn, out, cmd).await,
        CtlCommand::Promote(args) => workloads::promote(&conn, out, args).await,
        CtlCommand::Pods(args) => pods::pods(&conn, out, args).await,
        CtlCommand::Logs(args) => pods::logs(&conn, args).await,
        CtlCommand::Events(args) => pods::events(&conn, out, args).await,
        CtlCommand::Trace(args) => trace::run(&conn, out, args).await,
        CtlCommand::Search(args) => search::run(&conn, out, args).await,
        CtlCommand::Rollouts(cmd) => rollouts::run(&conn, out, cmd).await,
        CtlCommand::Backups(cmd) => backups::run(&conn, out, cmd).await,
        CtlCommand::Whoami => {
            let mut c = AccessServiceClient::new(conn.channel.clone());
            let r = c
                .get_caller(conn.request(proto::GetCallerRequest {}))
                .await
                .map_err(status)?
                .into_inner();
            print(out, "kairship.v1alpha1.Caller", &r, |j| {
                let mut rows = vec![vec!["INSTANCE".into(), "ROLE".into()]];
                if let Some(fleet) = j["fleetRole"].as_str().filter(|f| !f.is_empty()) {
                    rows.push(vec!["(every instance)".into(), fleet.into()]);
                }
                for r in j["roles"].as_array().into_iter().flatten() {
                    rows.push(vec![s(r, "/instance"), s(r, "/role")]);
                }
                println!(
                    "user {} (groups: {})",
                    s(j, "/name"),
                    j["groups"]
                        .as_array()
                        .map(|g| g
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default()
                );
                rows
            })
        }
        CtlCommand::Actors(cmd) => {
            let mut c = SupervisorServiceClient::new(conn.channel.clone());
            let actor_rows = |actors: &[Value]| {
                let mut rows = vec![vec![
                    "ACTOR".into(),
                    "REPLICA".into(),
                    "STATE".into(),
                    "RESTARTS".into(),
                    "UPTIME".into(),
                    "LAST ERROR".into(),
                ]];
                for a in actors {
                    rows.push(vec![
                        s(a, "/name"),
                        crate::host::leader::replica_of(&s(a, "/replica")).to_string(),
                        s(a, "/state"),
                        n(a, "/restartCount"),
                        format!("{}s", n(a, "/uptimeSeconds")),
                        s(a, "/lastError"),
                    ]);
                }
                rows
            };
            match cmd {
                ActorsCmd::List => {
                    let r = c
                        .list_actors(conn.request(proto::ListActorsRequest {}))
                        .await
                        .map_err(status)?
                        .into_inner();
                    print(out, "kairship.v1alpha1.ListActorsResponse", &r, |j| {
                        actor_rows(j["actors"].as_array().map(Vec::as_slice).unwrap_or(&[]))
                    })
                }
                ActorsCmd::Restart { name } => {
                    let r = c
                        .restart_instance(
                            conn.request(proto::RestartInstanceRequest { name: name.clone() }),
                        )
                        .await
                        .map_err(status)?
                        .into_inner();
                    print(out, "kairship.v1alpha1.RestartInstanceResponse", &r, |j| {
                        actor_rows(std::slice::from_ref(&j["actor"]))
                    })
                }
                ActorsCmd::Controllers { name } => {
                    let r = c
                        .list_controllers(
                            conn.request(proto::ListControllersRequest { name: name.clone() }),
                        )
                        .await
                        .map_err(status)?
                        .into_inner();
                    print(out, "kairship.v1alpha1.ListControllersResponse", &r, |j| {
                        controller_rows(j)
                    })
                }
            }
        }
    }
}

fn controller_rows(j: &Value) -> Vec<Vec<String>> {
    let yes = |c: &Value, p: &str| {
        if c.pointer(p) == Some(&Value::Bool(true)) {
            "yes"
        } else {
            "no"
        }
    };
    let mut rows = vec![vec![
        "CONTROLLER".into(),
        "ON".into(),
        "RUNS HERE".into(),
        "FAILURES".into(),
        "LAST SUCCESS".into(),
        "LAST ERROR".into(),
    ]];
    for c in j["controllers"].as_array().into_iter().flatten() {
        rows.push(vec![
            s(c, "/name"),
            yes(c, "/enabled").into(),
            yes(c, "/active").into(),
            n(c, "/failures"),
            s(c, "/lastSucceeded"),
            s(c, "/lastError"),
        ]);
    }
    rows
}
