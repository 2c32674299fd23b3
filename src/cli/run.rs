//! `kairship run`: the production entry point against a real host cluster.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kube::config::Kubeconfig;

use crate::actors::tree::{Election, Tree};
use crate::cache::budget::CacheBudget;
use crate::context::Settings;
use crate::host::leader::LeaderConfig;
use crate::server;
use crate::Error;

pub use super::caller_args::{AuthArgs, LimitArgs, OidcArgs};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Role {
    /// Both roles in one process.
    All,
    /// The API (gRPC, REST, proxy): caches for reads, never writes status; every replica.
    Apiserver,
    /// Leader-elected controllers: instance caches, stats, status sync, registration.
    ControllerManager,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig of the host cluster; in-cluster or $KUBECONFIG when absent.
    #[arg(long, env = "KAIRSHIP_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "all")]
    pub role: Role,
    #[arg(long, default_value = "0.0.0.0:50051")]
    pub grpc_addr: std::net::SocketAddr,
    /// HTTPS address of REST, the proxy and the probes.
    #[arg(long, default_value = "0.0.0.0:8443")]
    pub http_addr: std::net::SocketAddr,
    /// Plain-HTTP `/metrics`, `/healthz` and `/readyz`, for probes and scrapers.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub probes_addr: std::net::SocketAddr,
    /// PEM certificate chain for HTTPS (roles all and apiserver).
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key for HTTPS.
    #[arg(long)]
    pub tls_key_file: Option<PathBuf>,
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
    /// This replica's name ($POD_NAME in a pod; else host name and pid). The Lease holder
    /// is this name plus a suffix unique to the process, as kube-controller-manager's, so a
    /// container restarted in the same pod is a new candidate and never inherits the lease
    /// its predecessor left.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Where `kairship chaos run --state-dir` writes its report, for the console to show.
    #[arg(long)]
    pub chaos_report_dir: Option<PathBuf>,
    /// Also serve each instance at `<instance>.<domain>` on the HTTPS port, by TLS server
    /// name (SNI) and Host, so clients that build URLs from the host alone (`kubectl get
    /// --raw`, karmadactl's cluster proxy) work; the serving certificate must cover
    /// `*.<domain>`. The path form stays.
    #[arg(long, value_parser = instance_domain)]
    pub instance_domain: Option<crate::api::instance_hosts::InstanceHosts>,
    /// Where clients reach the HTTPS port (https://host[:port]), for the kubeconfigs
    /// Kairship hands out; by default the address each request was sent to.
    #[arg(long, value_parser = external_url)]
    pub external_url: Option<crate::api::kubeconfigs::ServerUrl>,
    /// PEM of the CA the kubeconfigs Kairship hands out trust its HTTPS certificate with;
    /// by default --peer-ca-file, else the CA certificates after the serving one in
    /// --tls-cert-file, else none (clients use their system's roots).
    #[arg(long)]
    pub kubeconfig_ca_file: Option<PathBuf>,
    /// Namespace of the Karmada objects of managed instances.
    #[arg(long, default_value = "kairship-system")]
    pub managed_namespace: String,
    /// Karmada version of a managed instance created without one (unset: karmada-operator's).
    #[arg(long)]
    pub managed_karmada_version: Option<String>,
    /// Registry of every component image of a managed instance created without one
    /// (<registry>/kube-apiserver, <registry>/karmada-scheduler, ...): an air-gapped
    /// cluster's mirror. Unset: karmada-operator's registries.
    #[arg(long)]
    pub managed_image_registry: Option<String>,
    /// COMPONENT=TAG (repeatable): the tag of a component whose image is not tagged with the
    /// Karmada version (etcd, karmadaAPIServer, kubeControllerManager), for managed
    /// instances created without one.
    #[arg(long = "managed-image-tag", value_name = "COMPONENT=TAG")]
    pub managed_image_tags: Vec<String>,
    /// Where karmada-operator downloads Karmada's CRD tarball for a managed instance created
    /// without one; `{version}` becomes the instance's Karmada version. Unset: the release
    /// on GitHub, which an air-gapped cluster cannot reach.
    #[arg(long)]
    pub managed_crd_tarball_url: Option<String>,
    /// A namespace whose Secrets may hold External instances' kubeconfigs (repeatable).
    /// Default: Kairship's own namespace (--namespace). Kairship never reads a kubeconfig
    /// Secret elsewhere, and reads one only for a caller the host lets read it.
    #[arg(long = "kubeconfig-secret-namespace", value_name = "NAMESPACE")]
    pub kubeconfig_secret_namespaces: Vec<String>,
    /// A namespace managed instances' Karmada objects may be created in, besides
    /// --managed-namespace (repeatable).
    #[arg(long = "managed-allowed-namespace", value_name = "NAMESPACE")]
    pub managed_allowed_namespaces: Vec<String>,
    /// A registry (or repository prefix) managed instances' images may come from
    /// (repeatable). Default: karmada-operator's own (docker.io/karmada, registry.k8s.io);
    /// --managed-image-registry is always allowed.
    #[arg(long = "managed-allowed-image-registry", value_name = "REGISTRY")]
    pub managed_allowed_image_registries: Vec<String>,
    /// A URL prefix karmada-operator may download a managed instance's CRD tarball from
    /// (repeatable). Default: Karmada's releases on GitHub; --managed-crd-tarball-url's
    /// location is always allowed.
    #[arg(long = "managed-allowed-crd-url", value_name = "URL_PREFIX")]
    pub managed_allowed_crd_urls: Vec<String>,
    /// Register every instance with Clusterpedia: the leader keeps one PediaCluster
    /// (cluster.clusterpedia.io/v1alpha2) per Instance, named after it, reading the instance
    /// through a Secret in --clusterpedia-namespace, and reports Clusterpedia's view in the
    /// Instance's ClusterpediaSynced condition.
    #[arg(long)]
    pub clusterpedia: bool,
    /// Where Clusterpedia's clustersynchro-manager runs: the kubeconfig Secrets it reads
    /// are written there.
    #[arg(long, default_value = "clusterpedia-system")]
    pub clusterpedia_namespace: String,
    /// On SIGTERM, seconds `/readyz` fails while every request is still served, so
    /// endpoints drop this replica before its listeners close (kube-apiserver's
    /// --shutdown-delay-duration; in a pod, a few seconds). Then watches end cleanly and
    /// requests in flight drain.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=300))]
    pub shutdown_delay_secs: u64,
    /// Seconds a cache's watch may keep failing, while its instance answers, before the
    /// instance is Degraded (a Karmada CRD missing, a kind Kairship may not list).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub instance_degraded_after_secs: u64,
    /// Days before an instance's first certificate expires that its
    /// `CertificatesExpiring` condition turns True.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub certificate_expiry_warning_days: u64,
    /// Seconds between reads of a managed instance's component pods in the host: a
    /// crash-looping component makes its instance Degraded within this.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub component_check_secs: u64,
    /// Seconds between reads of each instance's certificates by the leader.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub certificate_check_secs: u64,
    /// Days before a managed instance's first leaf certificate expires that the leader
    /// renews them (and rolls its components onto them); 0: only on request.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=3650))]
    pub certificate_auto_renew_days: u64,
    /// The host namespace whose Secrets hold instances' backups (default: Kairship's own,
    /// --namespace). Every replica reads them; each backup is a few Secrets of at most
    /// 700 KiB of compressed JSON.
    #[arg(long, conflicts_with = "backup_dir")]
    pub backup_namespace: Option<String>,
    /// Keep backups as files under this directory instead of Secrets: where a
    /// PersistentVolume is mounted (chart `backups.persistentVolumeClaim`; ReadWriteMany
    /// when replicas share it). It must exist: an unmounted volume fails backups naming it.
    #[arg(long)]
    pub backup_dir: Option<std::path::PathBuf>,
    /// Compressed bytes all backups may hold together; a backup that would pass it fails
    /// naming the space used (the host's etcd keeps them).
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub backup_max_bytes: u64,
    /// Seconds between the leader's checks of each scheduled instance for a backup due.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub backup_check_secs: u64,
    /// The per-instance controllers to run, as Karmada's own flag says it: `*` is every
    /// controller, `name` turns one on, `-name` turns one off (`*,-clusterpedia`). The
    /// controllers: registration, namespace-roles, member-access, guardrails, clusterpedia,
    /// certificates, renewal, components, scheduled-backups, members-ready,
    /// cluster-profiles, class-drift, rollout-steps, phase-events.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Seconds between a controller's checks that what it keeps in place (an instance's
    /// registration, Kairship's roles on its members) is still there; what was changed
    /// or deleted by hand is put back within this.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub controller_resync_secs: u64,
    /// Networks a member cluster's API server may not be in when a caller joins or
    /// removes one (comma-separated CIDRs; set the host's service and pod networks):
    /// Kairship would dial them from inside the host. Loopback, link-local, unspecified
    /// and multicast addresses are refused always.
    #[arg(long, value_delimiter = ',', value_parser = crate::member_networks::parse_cidr)]
    pub member_denied_cidrs: Vec<ipnet::IpNet>,
    /// Networks allowed for member clusters even so (a lab whose members run on loopback).
    #[arg(long, value_delimiter = ',', value_parser = crate::member_networks::parse_cidr)]
    pub member_allowed_cidrs: Vec<ipnet::IpNet>,
    /// Serve the series that name instances on the plain probes port's `/metrics` too
    /// (only where nothing but Prometheus reaches that port: it asks no token). HTTPS
    /// `/metrics` serves them to a caller with a role on every instance.
    #[arg(long)]
    pub probes_instance_series: bool,
    /// Stop as on SIGTERM once standard input ends: `kairship demo --replicas` starts its
    /// extra replicas so, and they go with it however it ends.
    #[arg(long, hide = true)]
    pub stop_when_stdin_closes: bool,
    /// Prometheus's address (http(s)://host:port): the leader reads its firing alerts
    /// (`/api/v1/alerts`) while a fleet rollout runs, and halts rollouts on those their
    /// `haltOnAlerts` names. Unset: rollouts do not read alerts.
    #[arg(long, value_name = "URL")]
    pub alerts_url: Option<String>,
    /// Instance actors of this replica that connect and fill their caches at once, on a
    /// cold start or when it takes over a dead replica's share; the others wait their turn.
    #[arg(long, default_value_t = crate::context::STARTING_AT_ONCE as u32,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub instances_starting_at_once: u32,
    /// How long a request to a hibernated instance (proxy, gRPC or REST) is held while the
    /// instance wakes, before it is answered 503.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub wake_timeout_secs: u64,
    #[command(flatten)]
    pub sharding: super::shard_args::ShardArgs,
    /// Objects of one instance the caches may keep, every kind together (an Instance's
    /// spec.cacheBudget sets its own). Past its budget an instance's caches are dropped,
    /// it shows Degraded naming the budget, and its reads go to the instance.
    #[arg(long, default_value_t = CacheBudget::default().max_objects)]
    pub cache_max_objects: u64,
    /// Bytes of JSON of one instance's cached objects, every kind together.
    #[arg(long, default_value_t = CacheBudget::default().max_bytes)]
    pub cache_max_bytes: u64,
    /// Bytes of JSON one cached object may have.
    #[arg(long, default_value_t = CacheBudget::default().max_object_bytes)]
    pub cache_max_object_bytes: u64,
    /// Serve the gRPC port in plain text instead of TLS (the HTTPS port serves gRPC with
    /// TLS either way). Bearer tokens then cross the network in clear: only behind a
    /// mesh or on loopback.
    #[arg(long)]
    pub grpc_insecure: bool,
    /// Audit events (audit.k8s.io/v1 Event JSON lines, one per write and per refusal on
    /// every surface) go to this file, or to standard output with `-`; without it, to the
    /// log on the target kairship::audit.
    #[arg(long, value_name = "PATH")]
    pub audit_log_path: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub auth: AuthArgs,
}

pub async fn host_client(kubeconfig: Option<&PathBuf>) -> Result<kube::Client, Error> {
    crate::host::client::from_kubeconfig(kubeconfig.map(PathBuf::as_path))
        .await
        .map_err(Error::Usage)
}

const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Who Kairship acts as on the host: in a pod, the service account named by its token's
/// `sub` claim (`system:serviceaccount:NS:NAME`); otherwise the kubeconfig's user.
pub fn operator_identity(kubeconfig: Option<&PathBuf>) -> Result<String, Error> {
    let from_kubeconfig = |kc: Kubeconfig, source: String| {
        let current = kc.current_context.clone().unwrap_or_default();
        kc.contexts
            .iter()
            .find(|c| c.name == current)
            .and_then(|c| c.context.as_ref())
            .and_then(|c| c.user.clone())
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{source}: the current context {current:?} names no user"
                ))
            })
    };
    if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path)
            .map_err(|e| Error::Usage(format!("reading kubeconfig {}: {e}", path.display())))?;
        return from_kubeconfig(kc, path.display().to_string());
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        let token = std::fs::read_to_string(SERVICE_ACCOUNT_TOKEN)
            .map_err(|e| Error::Usage(format!("{SERVICE_ACCOUNT_TOKEN}: {e}")))?;
        return jwt_subject(token.trim()).ok_or_else(|| {
            Error::Usage(format!(
                "{SERVICE_ACCOUNT_TOKEN}: not a service account token with a subject"
            ))
        });
    }
    let kc = Kubeconfig::read().map_err(|e| Error::Usage(format!("reading $KUBECONFIG: {e}")))?;
    from_kubeconfig(kc, "$KUBECONFIG".into())
}

/// The `sub` of a JWT, unverified: used only to name our own credential.
fn jwt_subject(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("sub")?.as_str().map(String::from)
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "kairship".into());
    format!("{host}-{}", std::process::id())
}

fn load_tls(args: &RunArgs) -> Result<std::sync::Arc<rustls::ServerConfig>, Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_key_file) else {
        return Err(Error::Usage("the apiserver serves HTTPS: pass --tls-cert-file and --tls-key-file (or use --role controller-manager)".into()));
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| Error::Usage(format!("--tls-cert-file {}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(Error::Usage(format!(
            "--tls-cert-file {}: no certificate in the file",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::Usage(format!("--tls-key-file {}: {e}", key.display())))?;
    kairship_wire::tls::server_config(chain, key)
        .map_err(|e| Error::Usage(format!("TLS configuration: {e}")))
}

pub async fn run(args: RunArgs) -> Result<(), Error> {
    // The number of instances is not known yet: take what the hard limit allows.
    let files = crate::open_files::raise_open_files();
    tracing::info!(open_files = files, "open-files limit");
    let identity = crate::host::leader::process_identity(
        &args.identity.clone().unwrap_or_else(default_identity),
    );
    let leader = LeaderConfig {
        lease_duration: Duration::from_secs(args.leader_elect_lease_duration_secs),
        renew_deadline: Duration::from_secs(args.leader_elect_renew_deadline_secs),
        retry_period: Duration::from_secs(args.leader_elect_retry_period_secs),
        ..LeaderConfig::new(
            &args.leader_elect_namespace,
            &args.leader_elect_lease_name,
            &identity,
        )
    };
    if args.sharding.shards == Some(true) && matches!(args.role, Role::Apiserver) {
        return Err(Error::Usage(
            "--shards needs a role that runs instance actors (all or controller-manager)".into(),
        ));
    }
    let sharded = args.sharding.enabled(matches!(args.role, Role::All));
    let shards = args.sharding.shards(
        sharded,
        &args.leader_elect_namespace,
        crate::host::leader::replica_of(&identity),
        &identity,
        (
            leader.lease_duration,
            leader.renew_deadline,
            leader.retry_period,
        ),
        args.http_addr,
    );
    let serving_chain = match &args.tls_cert_file {
        Some(p) => Some(
            std::fs::read(p)
                .map_err(|e| Error::Usage(format!("--tls-cert-file {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let forward = match args.role {
        Role::ControllerManager => None,
        _ => args
            .sharding
            .forward(sharded, serving_chain.as_deref(), leader.lease_duration)?,
    };
    let kubeconfigs = match args.role {
        Role::ControllerManager => Default::default(),
        _ => kubeconfig_issuer(&args, serving_chain.as_deref())?,
    };
    // Instance hosts a client cannot verify would make every host-form kubeconfig fail.
    if let (Some(hosts), Some(chain)) = (&args.instance_domain, serving_chain.as_deref()) {
        let wildcard = hosts.wildcard();
        let names = crate::cli::shard_args::dns_names(chain);
        if !names.iter().any(|n| n.eq_ignore_ascii_case(&wildcard)) {
            return Err(Error::Usage(format!(
                "--instance-domain {}: the serving certificate (--tls-cert-file) must name {wildcard}; it names {names:?}",
                hosts.domain()
            )));
        }
    }
    if args.leader_elect && leader.renew_deadline >= leader.lease_duration {
        return Err(Error::Usage("--leader-elect-renew-deadline-secs must be shorter than --leader-elect-lease-duration-secs".into()));
    }
    let election = match (args.role, args.leader_elect) {
        (Role::Apiserver, _) => Election::Never,
        (_, true) => Election::Lease(leader),
        (_, false) => Election::Always,
    };
    let tls = match args.role {
        Role::ControllerManager => None,
        _ => Some(load_tls(&args)?),
    };
    let host = host_client(args.kubeconfig.as_ref()).await?;
    let operator = operator_identity(args.kubeconfig.as_ref())?;
    tracing::info!(operator = %operator, "acting on the host cluster as");
    let auth = match args.role {
        Role::ControllerManager => None,
        _ => Some(
            crate::auth::Auth::new(
                &crate::auth::AuthConfig {
                    operator: Some(operator),
                    ..args.auth.config()?
                },
                host.clone(),
            )
            .await
            .map_err(|e| Error::Usage(format!("authentication: {e}")))?,
        ),
    };
    let settings = Settings {
        managed_namespace: args.managed_namespace.clone(),
        managed_defaults: managed_defaults(&args)?,
        scope: host_scope(&args),
        cache_budget: CacheBudget {
            max_objects: args.cache_max_objects,
            max_bytes: args.cache_max_bytes,
            max_object_bytes: args.cache_max_object_bytes,
        },
        degraded_after: std::time::Duration::from_secs(args.instance_degraded_after_secs),
        certificate_warning: std::time::Duration::from_secs(
            args.certificate_expiry_warning_days * 86_400,
        ),
        component_check_every: std::time::Duration::from_secs(args.component_check_secs),
        certificate_check_every: std::time::Duration::from_secs(args.certificate_check_secs),
        certificate_auto_renew: (args.certificate_auto_renew_days > 0)
            .then(|| std::time::Duration::from_secs(args.certificate_auto_renew_days * 86_400)),
        backup_namespace: args
            .backup_namespace
            .clone()
            .unwrap_or_else(|| args.auth.namespace.clone()),
        backup_max_bytes: args.backup_max_bytes,
        backup_dir: args.backup_dir.clone(),
        backup_check_every: std::time::Duration::from_secs(args.backup_check_secs),
        controllers_off: crate::controllers::Selection::parse(&args.controllers)
            .map_err(|e| Error::Usage(e.to_string()))?
            .off(),
        controller_resync: std::time::Duration::from_secs(args.controller_resync_secs),
        shards,
        probes_instance_series: args.probes_instance_series,
        starting_at_once: args.instances_starting_at_once as usize,
        wake_timeout: std::time::Duration::from_secs(args.wake_timeout_secs),
        alerts_url: match &args.alerts_url {
            Some(url) => {
                crate::rollout::alerts::Reader::new(url, std::time::Duration::from_secs(1))
                    .map_err(Error::Usage)?;
                Some(url.clone())
            }
            None => None,
        },
        member_networks: crate::member_networks::MemberNetworks {
            denied: args.member_denied_cidrs.clone(),
            allowed: args.member_allowed_cidrs.clone(),
        },
        clusterpedia: args
            .clusterpedia
            .then(|| args.clusterpedia_namespace.clone()),
        ..Settings::default()
    };
    match tls.zip(auth) {
        None => {
            // The controller-manager serves only its probes and metrics, as
            // kube-controller-manager does: bound first, so a taken port stops it early.
            let probes = tokio::net::TcpListener::bind(args.probes_addr)
                .await
                .map_err(|e| {
                    Error::Usage(format!(
                        "binding the probes address {}: {e}",
                        args.probes_addr
                    ))
                })?;
            let tree = Tree::start_with(host, election, &identity, settings)
                .await
                .map_err(|e| Error::Usage(e.to_string()))?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let app = crate::api::http::probes(crate::api::context::ApiContext::new(tree.handle()));
            let serving = tokio::spawn(crate::api::http::serve_plain(probes, app, async {
                let _ = stopped.await;
            }));
            tracing::info!(identity = %identity, role = ?args.role, probes = %args.probes_addr, "kairship running");
            super::shutdown_signal().await;
            tracing::info!("shutting down");
            let _ = stop.send(());
            let _ = serving.await;
            tree.shutdown().await;
        }
        Some((tls, auth)) => {
            let grpc_tls = match args.grpc_insecure {
                true => {
                    if !args.grpc_addr.ip().is_loopback() {
                        tracing::warn!(grpc = %args.grpc_addr, "--grpc-insecure: gRPC is served in plain text on a non-loopback address; bearer tokens cross the network in clear");
                    }
                    None
                }
                false => Some(tls.clone()),
            };
            let audit = audit_sink(args.audit_log_path.as_deref())?;
            let config = server::ServerConfig {
                host,
                identity: identity.clone(),
                election,
                settings,
                grpc_addr: args.grpc_addr,
                http_addr: args.http_addr,
                probes_addr: Some(args.probes_addr),
                tls,
                grpc_tls,
                audit,
                limits: args.limits.server(),
                fairness: args.limits.fairness(),
                auth,
                chaos_reports: args.chaos_report_dir.clone(),
                instance_hosts: args.instance_domain.clone().map(std::sync::Arc::new),
                kubeconfigs,
                shutdown_delay: Duration::from_secs(args.shutdown_delay_secs),
                forward,
            };
            let running = server::start(config)
                .await
                .map_err(|e| Error::Usage(e.to_string()))?;
            tracing::info!(identity = %identity, role = ?args.role, grpc = %running.grpc_addr, https = %running.http_addr, "kairship running");
            stop_signal(args.stop_when_stdin_closes).await;
            tracing::info!("shutting down");
            running.shutdown().await;
        }
    }
    Ok(())
}

/// SIGTERM or Ctrl-C; with `stdin`, also the end of standard input (the parent that
/// started this process is gone, or let it go).
async fn stop_signal(stdin: bool) {
    if !stdin {
        return super::shutdown_signal().await;
    }
    // A plain thread: a blocked read must not hold the runtime's shutdown.
    let (tx, closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut input = std::io::stdin();
        let mut buf = [0u8; 64];
        // Whatever is written is ignored; only the end counts.
        while matches!(input.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    tokio::select! {
        _ = super::shutdown_signal() => {}
        _ = closed => tracing::info!("standard input closed"),
    }
}

/// Where audit events go: `--audit-log-path` (a file, or `-` for standard output), else
/// the log.
pub fn audit_sink(
    path: Option<&std::path::Path>,
) -> Result<std::sync::Arc<crate::api::chain::audit::Sink>, Error> {
    use crate::api::chain::audit::Sink;
    let sink = match path {
        None => Sink::Log,
        Some(p) => Sink::open(p)
            .map_err(|e| Error::Usage(format!("--audit-log-path {}: {e}", p.display())))?,
    };
    Ok(std::sync::Arc::new(sink))
}

/// What Kairship may touch on the host for an instance, from the flags (each list's
/// default when the flag is not given).
fn host_scope(args: &RunArgs) -> crate::host::scope::HostScope {
    let defaults = crate::host::scope::HostScope::default();
    let or = |given: &Vec<String>, default: Vec<String>| match given.is_empty() {
        true => default,
        false => given.clone(),
    };
    crate::host::scope::HostScope {
        kubeconfig_namespaces: or(
            &args.kubeconfig_secret_namespaces,
            vec![args.auth.namespace.clone()],
        ),
        managed_namespaces: args.managed_allowed_namespaces.clone(),
        image_registries: or(
            &args.managed_allowed_image_registries,
            defaults.image_registries,
        ),
        crd_urls: or(&args.managed_allowed_crd_urls, defaults.crd_urls),
    }
}

/// The `--managed-*` flags, checked as a request's fields would be, so a typo stops the
/// start instead of failing every managed instance later.
fn managed_defaults(args: &RunArgs) -> Result<crate::crd::karmada_spec::Defaults, Error> {
    let mut image_tags = std::collections::BTreeMap::new();
    for kv in &args.managed_image_tags {
        let (component, tag) = kv.split_once('=').ok_or_else(|| {
            Error::Usage(format!(
                "--managed-image-tag {kv:?}: expected COMPONENT=TAG"
            ))
        })?;
        image_tags.insert(component.to_string(), tag.to_string());
    }
    let defaults = crate::crd::karmada_spec::Defaults {
        karmada_version: args.managed_karmada_version.clone(),
        image_registry: args.managed_image_registry.clone(),
        image_tags,
        crd_tarball_url: args.managed_crd_tarball_url.clone(),
    };
    if let Some(v) = &defaults.karmada_version {
        crate::crd::karmada_spec::check_version("--managed-karmada-version", v)
            .map_err(|e| Error::Usage(e.to_string()))?;
    }
    defaults
        .fragment(None)
        .map_err(|e| Error::Usage(e.to_string()))?;
    Ok(defaults)
}

/// `--external-url`, checked as the flag is read.
pub fn external_url(s: &str) -> Result<crate::api::kubeconfigs::ServerUrl, String> {
    crate::api::kubeconfigs::ServerUrl::parse(s).map_err(|e| e.to_string())
}

/// What the kubeconfigs Kairship hands out name, from the flags and the serving chain.
fn kubeconfig_issuer(
    args: &RunArgs,
    serving_chain: Option<&[u8]>,
) -> Result<crate::api::kubeconfigs::Issuer, Error> {
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| Error::Usage(format!("{flag} {}: {e}", p.display())))
    };
    let ca_pem = match (&args.kubeconfig_ca_file, &args.sharding.peer_ca_file) {
        (Some(p), _) => Some(("--kubeconfig-ca-file", read("--kubeconfig-ca-file", p)?)),
        (None, Some(p)) => Some(("--peer-ca-file", read("--peer-ca-file", p)?)),
        (None, None) => serving_chain
            .and_then(crate::cli::shard_args::chain_ca)
            .map(|pem| ("--tls-cert-file", pem)),
    };
    let ca_pem = match ca_pem {
        Some((flag, pem)) if !pem.contains("-----BEGIN CERTIFICATE-----") => {
            return Err(Error::Usage(format!(
                "{flag}: no PEM certificate in the file"
            )))
        }
        other => other.map(|(_, pem)| pem),
    };
    Ok(crate::api::kubeconfigs::Issuer {
        external: args.external_url.clone(),
        ca_pem,
        hosts: None,
    })
}

/// `--instance-domain`, checked as the flag is read.
pub fn instance_domain(s: &str) -> Result<crate::api::instance_hosts::InstanceHosts, String> {
    crate::api::instance_hosts::InstanceHosts::new(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_is_the_kubeconfig_user_or_the_token_subject() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: kairship-operator}\nclusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: kairship-operator\n  user: {token: t}\n",
        )
        .expect("write");
        assert_eq!(
            operator_identity(Some(&path)).expect("identity"),
            "kairship-operator"
        );
        let e = operator_identity(Some(&dir.path().join("missing"))).expect_err("missing");
        assert!(e.to_string().contains("missing"), "{e}");
        // header.payload.signature with payload {"sub":"system:serviceaccount:ks:kairship"}
        let token = "e30.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3M6a2FpcnNoaXAifQ.sig";
        assert_eq!(
            jwt_subject(token).as_deref(),
            Some("system:serviceaccount:ks:kairship")
        );
        assert_eq!(jwt_subject("not-a-jwt"), None);
    }
}
