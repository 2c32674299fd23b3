//! What every flavour of the demo does to its fleet, whatever runs Kairship: seed each
//! instance (Kairship's roles in its RBAC, Karmada's nginx sample), attach it as an
//! External Instance, write the demo's tokens and role bindings, wait for Running, and
//! write endpoints.json with a kubeconfig per instance through Kairship's proxy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kairship_wire::kubeconfig;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use super::NAMESPACE;
use crate::{bootstrap, Error};

/// Instances seeded and attached at once in step 2.
const ATTACH_CONCURRENCY: usize = 16;

pub(super) fn step(n: usize, total: usize, what: &str) {
    println!("[{n}/{total}] {what}");
}

pub(super) fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

pub(super) fn random_token() -> Result<String, Error> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Usage("no system randomness for the demo's tokens".into()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Owner-only, since it holds credentials.
pub(super) fn write_secret(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(contents)
}

pub(super) fn sample_objects() -> Vec<(ApiResource, Value)> {
    let ar = |group: &str, version: &str, kind: &str, plural: &str| ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    vec![
        (
            ar("apps", "v1", "Deployment", "deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}}, "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}),
        ),
        (
            ar(
                "policy.karmada.io",
                "v1alpha1",
                "PropagationPolicy",
                "propagationpolicies",
            ),
            // Karmada's own nginx sample: replicas divided 1:1 between member1 and member2.
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "nginx-propagation", "namespace": "default"},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]},
                    "replicaScheduling": {"replicaDivisionPreference": "Weighted", "replicaSchedulingType": "Divided",
                        "weightPreference": {"staticWeightList": [
                            {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                            {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}}}),
        ),
        (
            ar(
                "policy.karmada.io",
                "v1alpha1",
                "OverridePolicy",
                "overridepolicies",
            ),
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy", "metadata": {"name": "nginx-op", "namespace": "default"},
                "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx"}],
                "overrideRules": [
                    {"targetCluster": {"clusterNames": ["member2"]}, "overriders": {"labelsOverrider": [
                        {"operator": "add", "value": {"env": "skoala-dev"}},
                        {"operator": "add", "value": {"env-stat": "skoala-stage"}},
                        {"operator": "remove", "value": {"for": "for"}},
                        {"operator": "replace", "value": {"bar": "test"}}]}},
                    {"targetCluster": {"clusterNames": ["member1"]}, "overriders": {"annotationsOverrider": [
                        {"operator": "add", "value": {"env": "skoala-stage"}},
                        {"operator": "remove", "value": {"bom": "bom"}},
                        {"operator": "replace", "value": {"emma": "sophia"}}]}}]}}),
        ),
    ]
}

pub(super) async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    crate::cli::run::host_client(Some(&path.to_path_buf())).await
}

pub(super) async fn seed(instance_kubeconfig: &Path) -> Result<(), Error> {
    let client = client_from(instance_kubeconfig).await?;
    // What an operator installing Kairship does on each instance: identities passed
    // through the proxy meet these role bindings.
    bootstrap::apply_instance_rbac(&client)
        .await
        .map_err(|e| Error::Usage(format!("{}: {e}", instance_kubeconfig.display())))?;
    for (ar, obj) in sample_objects() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let o: DynamicObject =
            serde_json::from_value(obj).map_err(|e| Error::Usage(e.to_string()))?;
        match api.create(&PostParams::default(), &o).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                return Err(Error::Usage(format!(
                    "seeding {} in {}: {e}",
                    ar.kind,
                    instance_kubeconfig.display()
                )))
            }
        }
    }
    Ok(())
}

/// The demo's callers: an admin and a viewer in a token file, and the webhook's secret.
pub(super) struct DemoTokens {
    pub admin: String,
    pub viewer: String,
    pub token_file: PathBuf,
    pub webhook_secret: PathBuf,
}

/// Writes the token file and the webhook secret into `dir`.
pub(super) fn write_tokens(dir: &Path) -> Result<DemoTokens, Error> {
    let (admin, viewer) = (random_token()?, random_token()?);
    let token_file = dir.join("tokens.csv");
    let text =
        format!("{admin},admin,demo-admin,\"platform-admins\"\n{viewer},viewer,demo-viewer\n");
    write_secret(&token_file, text.as_bytes())
        .map_err(io(format!("writing {}", token_file.display())))?;
    let webhook_secret = dir.join("webhook.secret");
    write_secret(&webhook_secret, random_token()?.as_bytes())
        .map_err(io(format!("writing {}", webhook_secret.display())))?;
    Ok(DemoTokens {
        admin,
        viewer,
        token_file,
        webhook_secret,
    })
}

/// Binds `admin` to every instance and `viewer` to `viewer_instance`.
pub(super) async fn bind_roles(
    host: &kube::Client,
    viewer_instance: Option<&String>,
) -> Result<(), Error> {
    use crate::crd::{InstanceRoleBinding, InstanceRoleBindingSpec, Role, Subject, SubjectKind};
    let bindings: Api<InstanceRoleBinding> = Api::all(host.clone());
    let grants = [
        ("demo-admin", Role::Admin, "*".to_string(), "admin"),
        (
            "demo-viewer",
            Role::View,
            viewer_instance.cloned().unwrap_or_default(),
            "viewer",
        ),
    ];
    for (name, role, instance, user) in grants {
        let b = InstanceRoleBinding::new(
            name,
            InstanceRoleBindingSpec {
                role,
                instances: vec![instance],
                subjects: vec![Subject {
                    kind: SubjectKind::User,
                    name: user.into(),
                }],
            },
        );
        match bindings.create(&PostParams::default(), &b).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::Usage(format!("creating binding {name}: {e}"))),
        }
    }
    grant_kubeconfig_reads(host, "admin").await
}

/// What an operator grants the platform team on the host so they may attach External
/// instances: reading the kubeconfig Secrets in Kairship's namespace (Kairship asks the
/// host before it reads one for them).
async fn grant_kubeconfig_reads(host: &kube::Client, user: &str) -> Result<(), Error> {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    let name = "kairship-kubeconfig-readers";
    let mut role = Role::default();
    role.metadata.name = Some(name.into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".into()]),
        verbs: vec!["get".into()],
        ..Default::default()
    }]);
    let mut binding = RoleBinding::default();
    binding.metadata.name = Some(name.into());
    binding.role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "Role".into(),
        name: name.into(),
    };
    binding.subjects = Some(vec![Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: "User".into(),
        name: user.into(),
        namespace: None,
    }]);
    let created = async {
        match Api::<Role>::namespaced(host.clone(), NAMESPACE)
            .create(&PostParams::default(), &role)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            other => drop(other?),
        }
        match Api::<RoleBinding>::namespaced(host.clone(), NAMESPACE)
            .create(&PostParams::default(), &binding)
            .await
        {
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            other => other.map(drop),
        }
    };
    created.await.map_err(|e| {
        Error::Usage(format!(
            "granting {user} kubeconfig reads in {NAMESPACE}: {e}"
        ))
    })
}

/// Where Kairship answers, for `endpoints.json` (the shape pinned in ../shared/DESIGN.md).
pub(super) struct Endpoints<'a> {
    pub grpc: String,
    /// Whether the gRPC port is served with TLS (the CA is `ca`).
    pub grpc_tls: bool,
    /// Where this process writes its audit events (none when Kairship runs in pods).
    pub audit_log: Option<&'a Path>,
    pub https: String,
    pub ca_pem: &'a str,
    pub sim_admin: Option<String>,
    pub metrics: Option<String>,
    pub host_kubeconfig: &'a Path,
    pub names: &'a [String],
    /// Each instance's own host: its kubeconfig names it as `tls-server-name`.
    pub instance_hosts: Option<&'a crate::api::instance_hosts::InstanceHosts>,
    pub admin: &'a str,
    pub viewer: &'a str,
    /// The other replicas, when sharded (`--replicas`): name, HTTPS address, pid, log.
    pub replicas: Vec<serde_json::Value>,
}

/// Writes the CA, a kubeconfig per instance through Kairship's proxy, and endpoints.json.
pub(super) fn write_endpoints(dir: &Path, e: &Endpoints<'_>) -> Result<(), Error> {
    let ca_path = dir.join("ca.crt");
    std::fs::write(&ca_path, e.ca_pem).map_err(io(format!("writing {}", ca_path.display())))?;
    let mut entries = Vec::new();
    for name in e.names {
        let server = format!(
            "{}/apis/kairship.io/v1alpha1/instances/{name}/proxy",
            e.https
        );
        let path = dir.join(format!("kubeconfigs/{name}.kubeconfig"));
        // Both forms in one: the path for clients that keep the server's path, the
        // instance's host as TLS server name for requests that drop it (`get --raw`).
        let mut kc = kubeconfig::build(name, &server, e.ca_pem, e.admin);
        if let Some(hosts) = e.instance_hosts {
            kc = kubeconfig::with_tls_server_name(kc, &hosts.host_of(name));
        }
        kubeconfig::write(&path, &kc).map_err(io(format!("writing {}", path.display())))?;
        entries.push(json!({"name": name, "kubeconfig": path.display().to_string()}));
    }
    let endpoints = json!({
        "grpc": e.grpc,
        "grpc_tls": e.grpc_tls,
        "http": e.https,
        "ca": ca_path.display().to_string(),
        "sim_admin": e.sim_admin,
        "metrics": e.metrics,
        "host_kubeconfig": e.host_kubeconfig.display().to_string(),
        "instances": entries,
        "tokens": {"admin": e.admin, "viewer": e.viewer, "viewer_instance": e.names.first()},
        "webhook_secret_file": dir.join("webhook.secret").display().to_string(),
        "audit_log": e.audit_log.map(|p| p.display().to_string()),
        "replicas": e.replicas,
    });
    let text = serde_json::to_vec_pretty(&endpoints).map_err(|e| Error::Usage(e.to_string()))?;
    kubeconfig::write_atomic(&dir.join("endpoints.json"), &text)
        .map_err(io("writing endpoints.json".into()))
}

/// An instance to attach: its name, a kubeconfig to seed it through, and the kubeconfig
/// Kairship is given in its Secret (the same file, unless Kairship reaches the instance
/// at another address, as pods do).
pub(super) struct Attach {
    pub name: String,
    pub seed: PathBuf,
    pub kubeconfig: Vec<u8>,
}

/// Seeds each instance (its RBAC for Kairship's roles, the nginx sample) and attaches it
/// as an External Instance.
pub(super) async fn attach_all(host: &kube::Client, list: Vec<Attach>) -> Result<(), Error> {
    // Each instance is a handful of round trips; done one after another they took
    // minutes for 1,000 instances, so a bounded number run at once.
    use futures::{StreamExt, TryStreamExt};
    let attach_one = |a: Attach| {
        let host = host.clone();
        async move {
            seed(&a.seed).await?;
            bootstrap::attach_external(&host, NAMESPACE, &a.name, a.kubeconfig)
                .await
                .map_err(|e| Error::Usage(format!("attaching instance {}: {e}", a.name)))
        }
    };
    let count = list.len();
    let mut attached = 0usize;
    let mut attaching = futures::stream::iter(list.into_iter().map(attach_one))
        .buffer_unordered(ATTACH_CONCURRENCY);
    while let Some(()) = attaching.try_next().await? {
        attached += 1;
        if count >= 100 && (attached.is_multiple_of(100) || attached == count) {
            println!("      attached {attached}/{count}");
        }
    }
    Ok(())
}

/// Waits (at most two minutes, then serves anyway) for every Instance to be Running.
pub(super) async fn wait_running(host: &kube::Client) -> Result<(), Error> {
    let started = Instant::now();
    let mut last = usize::MAX;
    loop {
        // A loaded host may fail one call; the wait is bounded below, not by one error.
        let (ready, total) = match bootstrap::running_instances(host).await {
            Ok(counts) => counts,
            Err(e) if started.elapsed() <= Duration::from_secs(120) => {
                println!("      listing instances failed ({e}); retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => return Err(Error::Usage(format!("listing instances: {e}"))),
        };
        if ready != last {
            println!("      instances running: {ready}/{total}");
            last = ready;
        }
        if ready == total {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            println!("      still waiting after 2 minutes; serving anyway (check `kubectl get instances`)");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
