//! `kairship ctl instances ...`: list, get, create (External from a kubeconfig Secret,
//! Managed by karmada-operator), update, delete, and an instance's certificates.

use clap::Subcommand;
use serde_json::Value;

use super::{certificates, n, print, s, status, Conn, Output};
use crate::proto::{self, instance_service_client::InstanceServiceClient};
use crate::Error;

#[derive(Debug, Subcommand)]
pub enum InstancesCmd {
    List,
    Get {
        name: String,
    },
    /// Create an instance: External from a kubeconfig Secret, or Managed by karmada-operator.
    Create {
        name: String,
        #[arg(long, value_parser = ["external", "managed"])]
        mode: String,
        /// NAMESPACE/NAME[:KEY] of the kubeconfig Secret (External).
        #[arg(long)]
        secret: Option<String>,
        /// The InstanceClass it follows (its release and Karmada spec, what the instance
        /// sets itself winning); fixed at creation, changed by a class's FleetRollout.
        #[arg(long)]
        class: Option<String>,
        #[command(flatten)]
        managed: ManagedFlags,
    },
    /// Change a managed instance: a new --karmada-version upgrades it; --replicas scales
    /// a component.
    Update {
        name: String,
        #[command(flatten)]
        managed: ManagedFlags,
    },
    Delete {
        name: String,
    },
    /// The certificates the instance is reached with, and when each expires.
    Certificates {
        name: String,
    },
    /// Renew a managed instance's leaf certificates (same CAs and keys), then roll its
    /// components but etcd onto them.
    RenewCertificates {
        name: String,
    },
    /// A managed instance's control-plane components: ready, restarts, last failure.
    Components {
        name: String,
    },
    /// Put a managed instance to sleep: its control plane scaled to zero in the host, its
    /// data kept; the next request through Kairship wakes it.
    Hibernate {
        name: String,
        /// Follow it until it is hibernated, printing each state.
        #[arg(long)]
        wait: bool,
    },
    /// Wake a hibernated instance (it stays awake until its schedule next starts sleep).
    Wake {
        name: String,
        /// Follow it until it runs again, printing each state.
        #[arg(long)]
        wait: bool,
    },
    /// Restart a managed instance's component (as `kubectl rollout restart`).
    RestartComponent {
        name: String,
        component: String,
    },
    /// A component's log (its first pod unless --pod); -f follows it.
    ComponentLogs(super::components::LogsArgs),
    /// What each instance is used for and costs, idle first: the last request through
    /// Kairship, its control plane's requests in the host, its members' capacity.
    Usage,
}

/// What karmada-operator installs for a managed instance; unset: Kairship's defaults.
#[derive(Debug, clap::Args)]
pub struct ManagedFlags {
    /// The Karmada version (vMAJOR.MINOR.PATCH).
    #[arg(long)]
    karmada_version: Option<String>,
    /// One registry for every component image (an air-gapped cluster's mirror).
    #[arg(long)]
    image_registry: Option<String>,
    /// Where karmada-operator downloads Karmada's CRD tarball (http or https).
    #[arg(long)]
    crd_tarball_url: Option<String>,
    /// COMPONENT=N: replicas of a component, for high availability (karmada-operator's
    /// names: etcd, karmadaAPIServer, karmadaScheduler...). Repeat for each.
    #[arg(long = "replicas", value_name = "COMPONENT=N", value_parser = parse_replicas)]
    replicas: Vec<(String, i32)>,
}

fn parse_replicas(v: &str) -> Result<(String, i32), String> {
    let (component, n) = v
        .split_once('=')
        .ok_or_else(|| format!("{v:?}: expected COMPONENT=N, like karmadaScheduler=2"))?;
    let n = n
        .parse::<i32>()
        .map_err(|_| format!("{v:?}: {n:?} is not a number of replicas"))?;
    Ok((component.to_string(), n))
}

impl ManagedFlags {
    /// The first flag given, for refusing them on an external instance.
    fn set_flag(&self) -> Option<&'static str> {
        [
            ("--karmada-version", self.karmada_version.is_some()),
            ("--image-registry", self.image_registry.is_some()),
            ("--crd-tarball-url", self.crd_tarball_url.is_some()),
            ("--replicas", !self.replicas.is_empty()),
        ]
        .into_iter()
        .find_map(|(f, set)| set.then_some(f))
    }

    fn spec(&self) -> proto::InstanceSpec {
        proto::InstanceSpec {
            mode: proto::InstanceMode::Managed as i32,
            karmada_version: self.karmada_version.clone().unwrap_or_default(),
            image_registry: self.image_registry.clone().unwrap_or_default(),
            crd_tarball_url: self.crd_tarball_url.clone().unwrap_or_default(),
            component_replicas: self.replicas.iter().cloned().collect(),
            ..Default::default()
        }
    }
}

pub(crate) fn print_instance(out: Output, i: &proto::Instance) -> Result<(), Error> {
    print(out, "kairship.v1alpha1.Instance", i, |j| {
        instance_rows(std::slice::from_ref(j))
    })
}

fn named(name: &str, spec: proto::InstanceSpec) -> proto::Instance {
    proto::Instance {
        metadata: Some(proto::ObjectMeta {
            name: name.to_string(),
            ..Default::default()
        }),
        spec: Some(spec),
        status: None,
    }
}

pub(crate) fn instance_rows(items: &[Value]) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "NAME".into(),
        "MODE".into(),
        "PHASE".into(),
        "CLUSTERS".into(),
        "NODES".into(),
        "VERSION".into(),
        "CERTS EXPIRE".into(),
    ]];
    for i in items {
        let mode = s(i, "/spec/mode")
            .trim_start_matches("INSTANCE_MODE_")
            .to_lowercase();
        rows.push(vec![
            s(i, "/metadata/name"),
            mode,
            s(i, "/status/phase"),
            format!(
                "{}/{}",
                n(i, "/status/stats/clustersReady"),
                n(i, "/status/stats/clustersTotal")
            ),
            format!(
                "{}/{}",
                n(i, "/status/stats/nodesReady"),
                n(i, "/status/stats/nodesTotal")
            ),
            s(i, "/status/karmadaVersion"),
            s(i, "/status/certificates/0/notAfter"),
        ]);
    }
    rows
}

pub(crate) async fn run(conn: &Conn, out: Output, cmd: &InstancesCmd) -> Result<(), Error> {
    let mut c = InstanceServiceClient::new(conn.channel.clone());
    match cmd {
        InstancesCmd::List => {
            let r = super::every_instance(conn).await?;
            print(out, "kairship.v1alpha1.ListInstancesResponse", &r, |j| {
                instance_rows(j["instances"].as_array().map(Vec::as_slice).unwrap_or(&[]))
            })
        }
        InstancesCmd::Get { name } => {
            let r = c
                .get_instance(conn.request(proto::GetInstanceRequest { name: name.clone() }))
                .await
                .map_err(status)?
                .into_inner();
            print_instance(out, &r)
        }
        InstancesCmd::Create {
            name,
            mode,
            secret,
            class,
            managed,
        } => {
            let spec = match mode.as_str() {
                "external" => {
                    let class_flag = class.as_ref().map(|_| "--class");
                    if let Some(flag) = managed.set_flag().or(class_flag) {
                        return Err(Error::Usage(format!(
                            "{flag} is for --mode managed (an external instance runs what it runs)"
                        )));
                    }
                    let secret = secret.as_deref().ok_or_else(|| {
                        Error::Usage(
                            "--secret NAMESPACE/NAME[:KEY] is required with --mode external".into(),
                        )
                    })?;
                    let (path, key) = secret.split_once(':').unwrap_or((secret, ""));
                    let (ns, sname) = path.split_once('/').ok_or_else(|| {
                        Error::Usage(format!(
                            "--secret {secret:?}: expected NAMESPACE/NAME[:KEY]"
                        ))
                    })?;
                    proto::InstanceSpec {
                        mode: proto::InstanceMode::External as i32,
                        kubeconfig_secret_ref: Some(proto::SecretKeyRef {
                            namespace: ns.into(),
                            name: sname.into(),
                            key: key.into(),
                        }),
                        ..Default::default()
                    }
                }
                _ => proto::InstanceSpec {
                    class_name: class.clone().unwrap_or_default(),
                    ..managed.spec()
                },
            };
            let r = c
                .create_instance(conn.request(proto::CreateInstanceRequest {
                    instance: Some(named(name, spec)),
                }))
                .await
                .map_err(status)?
                .into_inner();
            print_instance(out, &r)
        }
        InstancesCmd::Update { name, managed } => {
            let r = c
                .update_instance(conn.request(proto::UpdateInstanceRequest {
                    instance: Some(named(name, managed.spec())),
                }))
                .await
                .map_err(status)?
                .into_inner();
            print_instance(out, &r)
        }
        InstancesCmd::Delete { name } => {
            c.delete_instance(conn.request(proto::DeleteInstanceRequest { name: name.clone() }))
                .await
                .map_err(status)?;
            println!("instance {name} deleted");
            Ok(())
        }
        InstancesCmd::Certificates { name } => certificates::list(conn, out, name).await,
        InstancesCmd::RenewCertificates { name } => certificates::renew(conn, out, name).await,
        InstancesCmd::Components { name } => super::components::list(conn, out, name).await,
        InstancesCmd::RestartComponent { name, component } => {
            super::components::restart(conn, out, name, component).await
        }
        InstancesCmd::ComponentLogs(a) => super::components::logs(conn, a).await,
        InstancesCmd::Hibernate { name, wait } => print_instance(
            out,
            &super::hibernation::run(conn, name, true, *wait).await?,
        ),
        InstancesCmd::Wake { name, wait } => print_instance(
            out,
            &super::hibernation::run(conn, name, false, *wait).await?,
        ),
        InstancesCmd::Usage => super::usage::list(conn, out).await,
    }
}
