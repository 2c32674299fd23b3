//! Karmada on a karmada-apiserver: its CRDs, the aggregated API server behind an
//! APIService (Clusters), controller-manager and scheduler, and Push-mode joins.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use crate::apiserver::ApiServer;
use crate::pki;
use crate::process::{free_port, Proc};
use crate::Error;

const MANAGER: &str = "kairship-realfleet";

pub(crate) fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// Server-side applies one object (idempotent).
pub async fn apply(client: &kube::Client, res: &ApiResource, obj: Value) -> Result<(), Error> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ns = obj["metadata"]["namespace"].as_str().map(String::from);
    let o: DynamicObject =
        serde_json::from_value(obj).map_err(|e| Error::Invalid(e.to_string()))?;
    let api: Api<DynamicObject> = match &ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, res),
        None => Api::all_with(client.clone(), res),
    };
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&o),
    )
    .await
    .map_err(Error::kube(format!("applying {} {name}", res.kind)))?;
    Ok(())
}

pub async fn namespace(client: &kube::Client, name: &str) -> Result<(), Error> {
    apply(
        client,
        &ar("", "v1", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await
}

/// Creates every CRD in `dir` (the Karmada module's `charts/karmada/_crds/bases`).
pub async fn install_crds(client: &kube::Client, dir: &Path) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let entries =
        std::fs::read_dir(dir).map_err(Error::io(format!("reading {}", dir.display())))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(Error::io(format!("reading {}", path.display())))?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
        for doc in docs
            .into_iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition")
        {
            let crd: CustomResourceDefinition = serde_json::from_value(doc)
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))?;
            match api.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    return Err(Error::kube(format!("creating CRD from {}", path.display()))(e))
                }
            }
        }
    }
    Ok(())
}

/// Waits until the API server serves `path` (a discovery document).
pub async fn wait_served(
    client: &kube::Client,
    path: &str,
    within: Duration,
    what: &str,
    log: &Path,
) -> Result<(), Error> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(req) = http::Request::get(path).body(Vec::new()) {
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                what: what.to_string(),
                secs: within.as_secs(),
                log: log.display().to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Starts karmada-aggregated-apiserver and registers it for `cluster.karmada.io`. The
/// aggregator reaches it through an ExternalName Service (`localhost`): there is no
/// kube-proxy, and Endpoints may not name loopback addresses.
pub async fn aggregated_apiserver(
    bin: &Path,
    karmada: &ApiServer,
    client: &kube::Client,
    etcd: &str,
) -> Result<Proc, Error> {
    let dir = karmada.dir.join("aggregated-apiserver");
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let serving = pki::serving_for(
        &dir,
        "karmada-aggregated-apiserver",
        &["karmada-aggregated-apiserver.karmada-system.svc"],
    )?;
    let port = free_port()?;
    let kc = karmada.kubeconfig.display().to_string();
    let p = |x: &Path| x.display().to_string();
    let proc = Proc::spawn(
        &format!("karmada-aggregated-apiserver {}", karmada.name),
        &bin.join("karmada-aggregated-apiserver"),
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            format!("--etcd-servers={etcd}"),
            format!("--etcd-prefix=/{}-aggregated", karmada.name),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", p(&serving.cert_file)),
            format!("--tls-private-key-file={}", p(&serving.key_file)),
            "--v=1".into(),
        ],
        dir.join("karmada-aggregated-apiserver.log"),
    )?;
    namespace(client, "karmada-system").await?;
    apply(
        client,
        &ar("", "v1", "Service", "services"),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "karmada-aggregated-apiserver", "namespace": "karmada-system"},
               "spec": {"type": "ExternalName", "externalName": "localhost",
                        "ports": [{"port": port, "protocol": "TCP"}]}}),
    )
    .await?;
    let ca = base64::engine::general_purpose::STANDARD.encode(&serving.ca_pem);
    apply(
        client,
        &ar("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1alpha1.cluster.karmada.io"},
               "spec": {"group": "cluster.karmada.io", "version": "v1alpha1",
                        "groupPriorityMinimum": 2000, "versionPriority": 10, "caBundle": ca,
                        "service": {"namespace": "karmada-system", "name": "karmada-aggregated-apiserver", "port": port}}}),
    )
    .await?;
    Ok(proc)
}

/// karmada-webhook and its configurations: it gives each PropagationPolicy its permanent
/// id (the scheduler ignores bindings without one) and defaults and validates policies.
pub async fn webhook(
    bin: &Path,
    karmada: &ApiServer,
    client: &kube::Client,
) -> Result<Proc, Error> {
    let dir = karmada.dir.join("webhook");
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let serving = pki::serving(&dir, "karmada-webhook")?;
    for (from, to) in [
        (&serving.cert_file, "tls.crt"),
        (&serving.key_file, "tls.key"),
    ] {
        std::fs::copy(from, dir.join(to)).map_err(Error::io(format!("writing {to}")))?;
    }
    let port = free_port()?;
    let addr = || -> Result<String, Error> { Ok(format!("127.0.0.1:{}", free_port()?)) };
    let proc = Proc::spawn(
        &format!("karmada-webhook {}", karmada.name),
        &bin.join("karmada-webhook"),
        vec![
            format!("--kubeconfig={}", karmada.kubeconfig.display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.display()),
            format!("--metrics-bind-address={}", addr()?),
            format!("--health-probe-bind-address={}", addr()?),
            "--v=1".into(),
        ],
        dir.join("karmada-webhook.log"),
    )?;
    // Policies are refused while the webhook is not serving (failurePolicy Fail).
    let deadline = Instant::now() + Duration::from_secs(120);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                what: format!("karmada-webhook {}", karmada.name),
                secs: 120,
                log: proc.log.display().to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(&serving.ca_pem);
    let hook = |name: &str, group: &str, version: &str, resource: &str, path: &str| {
        json!({"name": format!("{name}.karmada.io"), "admissionReviewVersions": ["v1"],
               "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
               "clientConfig": {"url": format!("https://localhost:{port}/{path}"), "caBundle": ca},
               "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [group],
                          "apiVersions": [version], "resources": [resource], "scope": "*"}]})
    };
    let binding_hook = |name: &str, resource: &str, scope: &str| {
        json!({"name": format!("{name}.karmada.io"), "admissionReviewVersions": ["v1"],
               "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 10,
               "clientConfig": {"url": format!("https://localhost:{port}/mutate-{name}"), "caBundle": ca},
               "rules": [{"operations": ["CREATE"], "apiGroups": ["work.karmada.io"],
                          "apiVersions": ["*"], "resources": [resource], "scope": scope}]})
    };
    let p = "policy.karmada.io";
    apply(
        client,
        &ar("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": "mutating-config"},
               "webhooks": [
                   hook("propagationpolicy", p, "v1alpha1", "propagationpolicies", "mutate-propagationpolicy"),
                   hook("clusterpropagationpolicy", p, "v1alpha1", "clusterpropagationpolicies", "mutate-clusterpropagationpolicy"),
                   hook("overridepolicy", p, "v1alpha1", "overridepolicies", "mutate-overridepolicy"),
                   hook("work", "work.karmada.io", "v1alpha1", "works", "mutate-work"),
                   // Bindings get their permanent ids here, as in Karmada's own webhook
                   // configuration; without them every binding's Works share the empty id,
                   // and one binding's orphan cleanup deletes another's Works.
                   binding_hook("resourcebinding", "resourcebindings", "Namespaced"),
                   binding_hook("clusterresourcebinding", "clusterresourcebindings", "Cluster"),
               ]}),
    )
    .await?;
    apply(
        client,
        &ar("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "validating-config"},
               "webhooks": [
                   hook("propagationpolicy", p, "v1alpha1", "propagationpolicies", "validate-propagationpolicy"),
                   hook("clusterpropagationpolicy", p, "v1alpha1", "clusterpropagationpolicies", "validate-clusterpropagationpolicy"),
                   hook("overridepolicy", p, "v1alpha1", "overridepolicies", "validate-overridepolicy"),
                   hook("clusteroverridepolicy", p, "v1alpha1", "clusteroverridepolicies", "validate-clusteroverridepolicy"),
               ]}),
    )
    .await?;
    Ok(proc)
}

/// karmada-controller-manager, karmada-scheduler and kube-controller-manager for one instance.
pub fn controllers(bin: &Path, karmada: &ApiServer) -> Result<Vec<Proc>, Error> {
    let kc = karmada.kubeconfig.display().to_string();
    let addr = || -> Result<String, Error> { Ok(format!("127.0.0.1:{}", free_port()?)) };
    let cm = Proc::spawn(
        &format!("karmada-controller-manager {}", karmada.name),
        &bin.join("karmada-controller-manager"),
        vec![
            format!("--kubeconfig={kc}"),
            "--leader-elect=false".into(),
            format!("--metrics-bind-address={}", addr()?),
            format!("--health-probe-bind-address={}", addr()?),
            // Statistics show up quickly in Kairship.
            "--cluster-status-update-frequency=5s".into(),
            // A member that stops answering is NotReady after 10 s (30 s by default).
            "--cluster-failure-threshold=10s".into(),
            // Failover as Kairship's users run it (both are off by default): taints from
            // ClusterTaintPolicies, and NoExecute taints evicting what does not tolerate them.
            "--feature-gates=Failover=true".into(),
            "--enable-no-execute-taint-eviction=true".into(),
            "--v=1".into(),
        ],
        karmada.dir.join("karmada-controller-manager.log"),
    )?;
    let scheduler = Proc::spawn(
        &format!("karmada-scheduler {}", karmada.name),
        &bin.join("karmada-scheduler"),
        vec![
            format!("--kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--enable-scheduler-estimator=false".into(),
            format!("--metrics-bind-address={}", addr()?),
            format!("--health-probe-bind-address={}", addr()?),
            "--v=1".into(),
        ],
        karmada.dir.join("karmada-scheduler.log"),
    )?;
    // As Karmada's installers do: kube-controller-manager for namespace deletion, garbage
    // collection and, above all, ClusterRole aggregation (the default view/edit/admin roles
    // are empty without it).
    let kcm = kube_controller_manager(bin, karmada)?;
    Ok(vec![cm, scheduler, kcm])
}

/// kube-controller-manager with what an API server without workloads needs: ClusterRole
/// aggregation (the default view/edit/admin roles stay empty without it), namespace
/// deletion, garbage collection and ServiceAccount token Secrets (`karmadactl join`, and
/// Kairship's, wait for the member to fill them). Every real cluster runs it; members need
/// it too, so Kairship's roles propagated there (`view`, `edit`) grant what they say.
pub fn kube_controller_manager(bin: &Path, api: &ApiServer) -> Result<Proc, Error> {
    let kc = api.kubeconfig.display().to_string();
    Proc::spawn(
        &format!("kube-controller-manager {}", api.name),
        &bin.join("kube-controller-manager"),
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--leader-elect=false".into(),
            "--controllers=clusterrole-aggregation,namespace,garbagecollector,serviceaccount-token,bootstrapsigner,tokencleaner,csrsigning,csrcleaner"
                .into(),
            // Pull mode, as Karmada's installers run it: bootstrapsigner signs cluster-info
            // for each bootstrap token, csrsigning issues the client certificates
            // karmada-agent asks for (karmada-controller-manager approves them).
            format!("--cluster-signing-cert-file={}", api.dir.join("ca.crt").display()),
            format!("--cluster-signing-key-file={}", api.dir.join("ca.key").display()),
            format!(
                "--service-account-private-key-file={}",
                api.dir.join("sa.key").display()
            ),
            format!("--root-ca-file={}", api.dir.join("ca.crt").display()),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()?),
            "--use-service-account-credentials=false".into(),
            "--v=1".into(),
        ],
        api.dir.join("kube-controller-manager.log"),
    )
}

/// A member cluster as Karmada knows it: its Cluster name and credentials.
pub struct Member<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub token: &'a str,
    pub ca_pem: &'a str,
}

/// Joins `member` in Push mode as `karmadactl join` does: the member's credentials in a
/// Secret of `karmada-cluster`, the Cluster pointing at them, and its execution namespace.
pub async fn join(client: &kube::Client, member: &Member<'_>) -> Result<(), Error> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    namespace(client, "karmada-cluster").await?;
    let secret = ar("", "v1", "Secret", "secrets");
    for name in [
        member.name.to_string(),
        format!("{}-impersonator", member.name),
    ] {
        apply(
            client,
            &secret,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "namespace": "karmada-cluster"},
                   "data": {"token": b64(member.token), "caBundle": b64(member.ca_pem)}}),
        )
        .await?;
    }
    apply(
        client,
        &ar("cluster.karmada.io", "v1alpha1", "Cluster", "clusters"),
        json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
               "metadata": {"name": member.name},
               "spec": {"syncMode": "Push", "apiEndpoint": member.url,
                        "secretRef": {"namespace": "karmada-cluster", "name": member.name},
                        "impersonatorSecretRef": {"namespace": "karmada-cluster", "name": format!("{}-impersonator", member.name)}}}),
    )
    .await?;
    namespace(client, &format!("karmada-es-{}", member.name)).await
}

/// Waits until every Cluster in `names` is Ready and free of the not-ready and
/// unreachable taints. Karmada's scheduler leaves tainted clusters out and does not
/// reschedule a binding when one becomes Ready later, so a workload created before that
/// stays where it was first placed (the nginx sample on one member instead of two).
pub async fn wait_clusters_ready(
    client: &kube::Client,
    names: &[&str],
    within: Duration,
    log: &Path,
) -> Result<(), Error> {
    let api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ar("cluster.karmada.io", "v1alpha1", "Cluster", "clusters"),
    );
    let schedulable = |c: &DynamicObject| {
        let ready = c.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["type"] == "Ready" && x["status"] == "True");
        let tainted = c.data["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| {
                t["key"] == "cluster.karmada.io/not-ready"
                    || t["key"] == "cluster.karmada.io/unreachable"
            });
        ready && !tainted
    };
    let deadline = Instant::now() + within;
    loop {
        let listed =
            tokio::time::timeout(Duration::from_secs(5), api.list(&Default::default())).await;
        if let Ok(Ok(list)) = listed {
            let ready: Vec<&str> = list
                .items
                .iter()
                .filter(|c| schedulable(c))
                .filter_map(|c| c.metadata.name.as_deref())
                .collect();
            if names.iter().all(|n| ready.contains(n)) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                what: format!("Clusters {names:?} Ready and untainted"),
                secs: within.as_secs(),
                log: log.display().to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
