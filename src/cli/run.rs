//! `kairship run`: the production entry point against a real host cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::actors::context::Settings;
use crate::actors::leader::LeaderConfig;
use crate::actors::tree::Tree;
use crate::Error;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Role {
    /// Leader-elected controllers: instance caches, stats, status sync, registration.
    ControllerManager,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig of the host cluster; in-cluster or $KUBECONFIG when absent.
    #[arg(long, env = "KAIRSHIP_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "controller-manager")]
    pub role: Role,
    /// Elect a leader through a Lease (turn off only for a single replica).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_namespace: String,
    #[arg(long, default_value = "kairship-controller-manager")]
    pub leader_elect_lease_name: String,
    #[arg(long, default_value_t = 15)]
    pub leader_elect_lease_duration_secs: u64,
    #[arg(long, default_value_t = 10)]
    pub leader_elect_renew_deadline_secs: u64,
    #[arg(long, default_value_t = 2)]
    pub leader_elect_retry_period_secs: u64,
    /// Holder identity; defaults to $POD_NAME, else host name and pid.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Namespace of the Karmada objects of managed instances.
    #[arg(long, default_value = "kairship-system")]
    pub managed_namespace: String,
}

pub async fn host_client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| Error::Usage(format!("reading kubeconfig {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Usage(format!("kubeconfig {}: {e}", path.display())))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| Error::Usage(format!("no host cluster: pass --kubeconfig ({e})")))?,
    };
    kube::Client::try_from(config)
        .map_err(|e| Error::Usage(format!("building the host client: {e}")))
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "kairship".into());
    format!("{host}-{}", std::process::id())
}

pub async fn run(args: RunArgs) -> Result<(), Error> {
    let Role::ControllerManager = args.role;
    let host = host_client(args.kubeconfig.as_ref()).await?;
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let leader = args.leader_elect.then(|| LeaderConfig {
        lease_duration: Duration::from_secs(args.leader_elect_lease_duration_secs),
        renew_deadline: Duration::from_secs(args.leader_elect_renew_deadline_secs),
        retry_period: Duration::from_secs(args.leader_elect_retry_period_secs),
        ..LeaderConfig::new(
            &args.leader_elect_namespace,
            &args.leader_elect_lease_name,
            &identity,
        )
    });
    if let Some(l) = &leader {
        if l.renew_deadline >= l.lease_duration {
            return Err(Error::Usage("--leader-elect-renew-deadline-secs must be shorter than --leader-elect-lease-duration-secs".into()));
        }
    }
    let settings = Settings {
        managed_namespace: args.managed_namespace.clone(),
        ..Settings::default()
    };
    let tree = Tree::start(host, leader, &identity, settings)
        .await
        .map_err(|e| Error::Usage(e.to_string()))?;
    tracing::info!(identity = %identity, "kairship controller-manager running");
    super::shutdown_signal().await;
    tracing::info!("shutting down");
    tree.shutdown().await;
    Ok(())
}
