//! `kairship demo --fleet cluster`: the real fleet plus a kubelet-backed node on its host
//! cluster, and Kairship installed there by its own Helm chart as a user would (three
//! replicas, leader election, the PodDisruptionBudget). Instances are attached through
//! kubeconfig Secrets naming their karmada-apiservers as pods reach them, and
//! endpoints.json points at Kairship's Service, which this machine reaches through the
//! node's link and kube-proxy's rules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams};

use super::setup::{
    attach_all, bind_roles, io, step, wait_running, write_endpoints, write_tokens, Attach,
    Endpoints,
};
use super::{DemoArgs, RealRun, NAMESPACE};
use crate::Error;

/// Kairship's Service address: fixed, so the serving certificate can name it.
pub const SERVICE_IP: &str = "10.96.0.50";
pub const RELEASE: &str = "kairship";
/// `helm install --wait`: the image is local, so this covers scheduling, probes and the
/// first leader election with room to spare.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(480);

const TOTAL: usize = 6;

fn usage(e: impl std::fmt::Display) -> Error {
    Error::Usage(e.to_string())
}

/// What `--fleet cluster` needs on the machine, each missing piece naming how to get it.
struct Prerequisites {
    helm: PathBuf,
    /// karmada-operator and every component it deploys, both Karmada releases.
    operator_images: Vec<PathBuf>,
    chart: PathBuf,
    image_archive: PathBuf,
}

fn prerequisites(args: &DemoArgs) -> Result<Prerequisites, Error> {
    let helm = kairship_realfleet::default_bin_dir().join("helm");
    if !helm.is_file() {
        return Err(usage(format!(
            "{} is missing: run scripts/real-fleet/build.sh (it builds Helm with the cluster's binaries)",
            helm.display()
        )));
    }
    if !args.chart.join("Chart.yaml").is_file() {
        return Err(usage(format!(
            "no Helm chart at {}: run from the repository's checkout or pass --chart",
            args.chart.display()
        )));
    }
    let image_archive = args.image_archive.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "target/image/kairship-{}.oci.tar",
            env!("CARGO_PKG_VERSION")
        ))
    });
    if !image_archive.is_file() {
        return Err(usage(format!(
            "Kairship's image {} is not built: run scripts/image/build.sh (or pass --image-archive)",
            image_archive.display()
        )));
    }
    let absolute =
        |p: &Path| std::path::absolute(p).map_err(io(format!("resolving {}", p.display())));
    let operator_images =
        kairship_realfleet::operator::images(&kairship_realfleet::default_bin_dir())
            .map_err(usage)?;
    Ok(Prerequisites {
        helm,
        operator_images,
        chart: absolute(&args.chart)?,
        image_archive: absolute(&image_archive)?,
    })
}

/// Runs helm with the host's kubeconfig; its output, or an error with it.
pub async fn helm(
    helm: &Path,
    kubeconfig: &Path,
    args: &[String],
    within: Duration,
) -> Result<String, Error> {
    let run = tokio::process::Command::new(helm)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(within, run)
        .await
        .map_err(|_| usage(format!("helm {} took over {within:?}", args.join(" "))))?
        .map_err(io(format!("running {}", helm.display())))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(usage(format!(
            "helm {}: {}{}",
            args.join(" "),
            text,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(text)
}

async fn apply_secret(
    host: &kube::Client,
    name: &str,
    kind: &str,
    data: BTreeMap<&str, Vec<u8>>,
) -> Result<(), Error> {
    let data: BTreeMap<&str, String> = data.into_iter().map(|(k, v)| (k, base64_of(&v))).collect();
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "type": kind,
        "metadata": {"name": name, "namespace": NAMESPACE}, "data": data});
    Api::<Secret>::namespaced(host.clone(), NAMESPACE)
        .patch(
            name,
            &PatchParams::apply("kairship-demo").force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|e| usage(format!("writing Secret {NAMESPACE}/{name}: {e}")))?;
    Ok(())
}

/// The chart's values for an OIDC provider given to the demo (its CA, when given, in the
/// Secret `kairship-oidc-ca`; the pods must be able to reach the provider).
fn oidc_values(oidc: &crate::cli::run::OidcArgs) -> Vec<String> {
    let Some(issuer) = &oidc.oidc_issuer_url else {
        return Vec::new();
    };
    let mut v = vec![
        format!("auth.oidc.issuerURL={issuer}"),
        format!(
            "auth.oidc.clientID={}",
            oidc.oidc_client_id.clone().unwrap_or_default()
        ),
        format!(
            "auth.oidc.jwksURL={}",
            oidc.oidc_jwks_url.clone().unwrap_or_default()
        ),
        format!("auth.oidc.usernameClaim={}", oidc.oidc_username_claim),
        format!("auth.oidc.groupsClaim={}", oidc.oidc_groups_claim),
    ];
    if let Some(p) = &oidc.oidc_username_prefix {
        v.push(format!("auth.oidc.usernamePrefix={p}"));
    }
    if !oidc.oidc_groups_prefix.is_empty() {
        v.push(format!(
            "auth.oidc.groupsPrefix={}",
            oidc.oidc_groups_prefix
        ));
    }
    if oidc.oidc_ca_file.is_some() {
        v.push("auth.oidc.caSecretName=kairship-oidc-ca".into());
    }
    v
}

/// karmada-operator from its own manifests, and Karmada's CRD tarballs (both releases) in
/// ConfigMaps Kairship serves to it: the node has no way out, as an air-gapped cluster.
/// Each pod of the namespace with its phase and every container's state, then the
/// namespace's latest Warning events: what an SRE would look at after a failed install.
async fn pods_report(host: &kube::Client) -> String {
    use k8s_openapi::api::core::v1::{Event, Pod};
    use kube::api::ListParams;
    let mut out = format!("pods in {NAMESPACE}:");
    match Api::<Pod>::namespaced(host.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
    {
        Ok(pods) => {
            for pod in pods {
                let name = pod.metadata.name.unwrap_or_default();
                let status = pod.status.unwrap_or_default();
                out.push_str(&format!(
                    "\n  {name}: {}",
                    status.phase.as_deref().unwrap_or("Unknown")
                ));
                for c in status.container_statuses.unwrap_or_default() {
                    let state = c.state.unwrap_or_default();
                    let what = if let Some(w) = state.waiting {
                        format!(
                            "waiting {} {}",
                            w.reason.unwrap_or_default(),
                            w.message.unwrap_or_default()
                        )
                    } else if let Some(t) = state.terminated {
                        format!(
                            "terminated {} (exit {})",
                            t.reason.unwrap_or_default(),
                            t.exit_code
                        )
                    } else {
                        "running".to_string()
                    };
                    out.push_str(&format!(
                        "\n    {}: {what}, ready {}, {} restart(s)",
                        c.name, c.ready, c.restart_count
                    ));
                }
            }
        }
        Err(e) => out.push_str(&format!(" (listing them failed: {e})")),
    }
    out.push_str("\nlatest Warning events:");
    if let Ok(events) = Api::<Event>::namespaced(host.clone(), NAMESPACE)
        .list(&ListParams::default().fields("type=Warning"))
        .await
    {
        let mut items = events.items;
        items.sort_by_key(|e| e.last_timestamp.clone().map(|t| t.0));
        for e in items.iter().rev().take(10) {
            out.push_str(&format!(
                "\n  {} {}: {} ({}x)",
                e.involved_object.name.as_deref().unwrap_or(""),
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or(""),
                e.count.unwrap_or(1)
            ));
        }
    }
    out
}

async fn operator(host: &kube::Client) -> Result<(), Error> {
    use kairship_realfleet::operator;
    let bin = kairship_realfleet::default_bin_dir();
    operator::install(host, &bin).await.map_err(usage)?;
    for version in [operator::KARMADA_VERSION, operator::PREVIOUS_VERSION] {
        let tarball = operator::crd_tarball(&bin, version).map_err(usage)?;
        let name = format!("karmada-crds-{}", version.replace('.', "-"));
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {crate::api::http::KARMADA_CRDS_LABEL: version}},
            "binaryData": {crate::api::http::KARMADA_CRDS_KEY: base64_of(&tarball)}});
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(host.clone(), NAMESPACE)
            .patch(
                &name,
                &PatchParams::apply("kairship-demo").force(),
                &Patch::Apply(&cm),
            )
            .await
            .map_err(|e| usage(format!("writing ConfigMap {NAMESPACE}/{name}: {e}")))?;
    }
    Ok(())
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The chart's `managedDefaults` for this node: every image from the imported registry,
/// the CRD tarball from Kairship's own Service.
fn managed_defaults() -> Vec<String> {
    use kairship_realfleet::operator;
    let mut v = vec![
        format!("managedDefaults.karmadaVersion={}", operator::KARMADA_VERSION),
        format!("managedDefaults.imageRegistry={}", operator::REGISTRY),
        format!(
            "managedDefaults.crdTarballURL=http://{RELEASE}.{NAMESPACE}.svc:8080/karmada-crds/{{version}}/crds.tar.gz"
        ),
    ];
    for (component, tag) in operator::IMAGE_TAGS {
        v.push(format!("managedDefaults.imageTags.{component}={tag}"));
    }
    v
}

/// The values the demo installs the chart with (the rest are the chart's defaults).
pub fn chart_values(image: &str, degraded_after_secs: u64) -> Result<Vec<String>, Error> {
    let (repository, tag) = image
        .rsplit_once(':')
        .filter(|(r, _)| !r.is_empty())
        .ok_or_else(|| usage(format!("--image {image}: expected REPOSITORY:TAG")))?;
    Ok([
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        format!("service.clusterIP={SERVICE_IP}"),
        format!("instanceDomain={}", instance_hosts().domain()),
        "auth.tokenFile.secretName=kairship-auth".to_string(),
        "auth.webhookSecret.secretName=kairship-auth".to_string(),
        format!("instanceDegradedAfterSeconds={degraded_after_secs}"),
        // Every pod runs every instance first: the cluster tier measures a leader's loss
        // that way, then switches to the chart's default, sharded (tests/cluster/sharded.rs).
        "sharding.enabled=false".to_string(),
    ]
    .into_iter()
    .flat_map(|v| ["--set".to_string(), v])
    .chain(
        managed_defaults()
            .into_iter()
            .flat_map(|v| ["--set-string".to_string(), v]),
    )
    .collect())
}

pub(super) async fn run(args: &DemoArgs) -> Result<(), Error> {
    let pre = prerequisites(args)?;
    let dir = &args.state_dir;
    step(1, TOTAL, &format!(
        "starting a real fleet with a kubelet-backed node: host kube-apiserver + {} Karmada instance(s) x {} member cluster(s); containerd, kubelet, kube-proxy, CoreDNS",
        args.instances, args.clusters
    ));
    let mut images = vec![pre.image_archive.clone()];
    images.extend(pre.operator_images.clone());
    let real = RealRun::start(args, Some(images)).await?;
    let result = tokio::select! {
        r = install_and_serve(args, &pre, &real) => r,
        _ = super::super::shutdown_signal() => {
            println!("interrupted");
            Ok(())
        }
    };
    println!("stopping (pods, containerd, the node's network namespace, mounts and cgroups)...");
    let _ = std::fs::remove_file(dir.join("endpoints.json"));
    real.stop().await;
    println!("stopped");
    result
}

async fn install_and_serve(
    args: &DemoArgs,
    pre: &Prerequisites,
    real: &RealRun,
) -> Result<(), Error> {
    let dir = &args.state_dir;
    let view = real.view();
    let host_kubeconfig = view.host_kubeconfig.clone();
    let host = super::client_from(&host_kubeconfig).await?;

    step(2, TOTAL, "Kairship's namespace, TLS and token Secrets");
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    Api::<Namespace>::all(host.clone())
        .patch(
            NAMESPACE,
            &PatchParams::apply("kairship-demo"),
            &Patch::Apply(&ns),
        )
        .await
        .map_err(|e| usage(format!("creating namespace {NAMESPACE}: {e}")))?;
    let service = format!("{RELEASE}.{NAMESPACE}.svc");
    let names = vec![
        SERVICE_IP.to_string(),
        RELEASE.to_string(),
        format!("{RELEASE}.{NAMESPACE}"),
        service.clone(),
        format!("{service}.cluster.local"),
        instance_hosts().wildcard(),
    ];
    let cert = kairship_wire::tls::generate_for("kairship", &names).map_err(usage)?;
    apply_secret(
        &host,
        "kairship-tls",
        "kubernetes.io/tls",
        BTreeMap::from([
            ("tls.crt", cert.cert_pem.clone().into_bytes()),
            ("tls.key", cert.key_pem.clone().into_bytes()),
            // As cert-manager writes it: sharded pods trust each other by this CA.
            ("ca.crt", cert.ca_pem.clone().into_bytes()),
        ]),
    )
    .await?;
    operator(&host).await?;
    let tokens = write_tokens(dir)?;
    let read = |p: &Path| std::fs::read(p).map_err(io(format!("reading {}", p.display())));
    apply_secret(
        &host,
        "kairship-auth",
        "Opaque",
        BTreeMap::from([
            ("tokens.csv", read(&tokens.token_file)?),
            ("webhook.secret", read(&tokens.webhook_secret)?),
        ]),
    )
    .await?;

    step(
        3,
        TOTAL,
        &format!(
            "helm install {RELEASE} {} (3 replicas, image {})",
            pre.chart.display(),
            args.image
        ),
    );
    let mut install = vec![
        "upgrade".to_string(),
        "--install".into(),
        RELEASE.into(),
        pre.chart.display().to_string(),
        format!("--namespace={NAMESPACE}"),
        "--wait".into(),
        format!("--timeout={}s", INSTALL_TIMEOUT.as_secs()),
    ];
    install.extend(chart_values(
        &args.image,
        args.instance_degraded_after_secs,
    )?);
    if let Some(ca) = &args.oidc.oidc_ca_file {
        let ca = read(ca)?;
        apply_secret(
            &host,
            "kairship-oidc-ca",
            "Opaque",
            BTreeMap::from([("ca.crt", ca)]),
        )
        .await?;
    }
    install.extend(
        oidc_values(&args.oidc)
            .into_iter()
            .flat_map(|v| ["--set".to_string(), v]),
    );
    let out = match helm(
        &pre.helm,
        &host_kubeconfig,
        &install,
        INSTALL_TIMEOUT + Duration::from_secs(30),
    )
    .await
    {
        Ok(out) => out,
        // helm's "context deadline exceeded" says nothing of why: say what the pods do.
        Err(e) => return Err(usage(format!("{e}\n{}", pods_report(&host).await))),
    };
    for line in out
        .lines()
        .filter(|l| l.starts_with("STATUS") || l.starts_with("REVISION"))
    {
        println!("      {line}");
    }

    step(
        4,
        TOTAL,
        "binding the demo's roles and attaching the instances",
    );
    let instance_names: Vec<String> = view.instances.iter().map(|(n, _)| n.clone()).collect();
    bind_roles(&host, instance_names.first()).await?;
    let mut list = Vec::new();
    for (name, seed) in &view.instances {
        let kubeconfig = real
            .fleet
            .pod_kubeconfig(name)
            .await
            .ok_or_else(|| usage(format!("no instance {name} in the fleet")))?;
        list.push(Attach {
            name: name.clone(),
            seed: seed.clone(),
            kubeconfig: kubeconfig.into_bytes(),
        });
    }
    attach_all(&host, list).await?;
    wait_running(&host).await?;

    step(
        5,
        TOTAL,
        "writing endpoints.json and kubeconfigs (through Kairship's Service)",
    );
    let https = format!("https://{SERVICE_IP}");
    write_endpoints(
        dir,
        &Endpoints {
            grpc: format!("{SERVICE_IP}:50051"),
            // The chart serves the gRPC port with TLS, verified with the same CA.
            grpc_tls: true,
            audit_log: None,
            https: https.clone(),
            ca_pem: &cert.ca_pem,
            sim_admin: view.admin_url.clone(),
            metrics: Some(format!("http://{SERVICE_IP}:8080/metrics")),
            host_kubeconfig: &host_kubeconfig,
            names: &instance_names,
            instance_hosts: Some(&instance_hosts()),
            admin: &tokens.admin,
            viewer: &tokens.viewer,
            replicas: Vec::new(),
        },
    )?;

    step(6, TOTAL, "serving");
    let d = dir.display();
    let h = host_kubeconfig.display();
    let first = instance_names.first().cloned().unwrap_or_default();
    println!();
    println!(
        "Kairship runs as pods ({} instances).",
        instance_names.len()
    );
    println!("  pods:        kubectl --kubeconfig {h} -n {NAMESPACE} get pods -o wide");
    println!("  leader:      kubectl --kubeconfig {h} -n {NAMESPACE} get lease kairship-controller-manager");
    println!("  gRPC:        {SERVICE_IP}:50051   HTTPS: {https} (CA: {d}/ca.crt)");
    println!("  console:     {https}/ui/   (sign in with the admin token below)");
    println!("  kubectl:     kubectl --kubeconfig {d}/kubeconfigs/{first}.kubeconfig get clusters");
    println!(
        "  helm:        {} --kubeconfig {h} -n {NAMESPACE} status {RELEASE}",
        pre.helm.display()
    );
    println!("  endpoints:   {d}/endpoints.json");
    println!("Press Ctrl-C to stop (everything the node made is removed).");
    std::future::pending::<()>().await;
    Ok(())
}

/// The instances' own hosts (the demo's domain; the certificate covers them).
fn instance_hosts() -> crate::api::instance_hosts::InstanceHosts {
    crate::api::instance_hosts::InstanceHosts::new(crate::api::instance_hosts::DEMO_DOMAIN)
        .unwrap_or_else(|e| unreachable!("the demo's domain is valid: {e}"))
}
