//! Building the client of one instance: from its kubeconfig Secret (External), or from
//! the karmada-operator `Karmada` object Kairship creates and waits for (Managed).

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::KubeConfigOptions;
use serde_json::{json, Value};

use super::now;
use crate::context::Context;
use crate::crd::{Instance, InstanceMode};
use crate::host::karmada::{karmada_resource, owned};
use crate::host::kubeconfig::{self, parse_kubeconfig, without_detail, KubeconfigSource};
use crate::host::scope::OWNER_LABEL;

/// Why an instance cannot be connected yet.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConnectError {
    /// The managed control plane is still being installed.
    #[error("provisioning Karmada {0}")]
    Provisioning(String),
    /// karmada-operator is moving an installed control plane to a new spec; `failing`
    /// names a component whose new pods cannot run (an image that does not pull, a crash
    /// loop), which no amount of waiting fixes.
    #[error("upgrading Karmada {what}")]
    Upgrading {
        what: String,
        failing: Option<String>,
    },
    #[error("{0}")]
    Failed(String),
}

pub struct Connected {
    pub client: kube::Client,
    /// HTTP/1.1 only, for upgraded connections (exec, attach, port-forward), which
    /// kube-apiserver takes over HTTP/1.1 alone.
    pub upgrades: kube::Client,
    /// The Secret the kubeconfig came from (Clusterpedia reads the instance through a copy).
    pub source: KubeconfigSource,
    pub endpoint: String,
    pub karmada_version: Option<String>,
    /// What the certificate checks need (the kubeconfig's CA, the endpoint, the operator's
    /// Secrets for a managed instance).
    pub certificates: crate::certificates::Inputs,
}

pub async fn connect(ctx: &Context, instance: &Instance) -> Result<Connected, ConnectError> {
    let name = instance.metadata.name.clone().unwrap_or_default();
    match instance.spec.mode {
        InstanceMode::External => {
            let ext = instance.spec.external.as_ref().ok_or_else(|| {
                ConnectError::Failed("spec.external is required when spec.mode is External".into())
            })?;
            let r = &ext.kubeconfig_secret_ref;
            // Checked again here: an Instance written straight to the host skips the API.
            ctx.settings
                .scope
                .check_kubeconfig_namespace(
                    "spec.external.kubeconfigSecretRef.namespace",
                    &r.namespace,
                )
                .map_err(|e| ConnectError::Failed(e.to_string()))?;
            let key = r.key.clone().unwrap_or_else(|| "kubeconfig".into());
            let config = read_secret_key(ctx, &r.namespace, &r.name, &key).await?;
            let source = KubeconfigSource {
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                key,
            };
            client_from(ctx, &config, source, None, None).await
        }
        InstanceMode::Managed => {
            let ns = ctx.settings.managed_namespace_of(instance);
            ctx.settings
                .scope
                .check_managed_namespace(
                    "spec.managed.namespace",
                    &ns,
                    &ctx.settings.managed_namespace,
                )
                .map_err(|e| ConnectError::Failed(e.to_string()))?;
            let karmada = ensure_karmada(ctx, instance, &ns, &name).await?;
            let spec = karmada.data.get("spec").unwrap_or(&Value::Null);
            let secret = karmada.data.pointer("/status/secretRef").cloned();
            let (true, Some(secret)) = (ready(&karmada), secret) else {
                let failing = failing_component(ctx, &ns, &name).await;
                return Err(not_ready(instance, &karmada, &ns, &name, None, failing));
            };
            // The operator reports Ready once it has written the Deployments, not once
            // they have rolled: an upgrade is done when every component runs the new spec.
            if let Some(rolling) = rolling_components(ctx, &ns, &name).await? {
                let failing = failing_component(ctx, &ns, &name).await;
                return Err(not_ready(
                    instance,
                    &karmada,
                    &ns,
                    &name,
                    Some(rolling),
                    failing,
                ));
            }
            let sns = secret["namespace"].as_str().unwrap_or(&ns).to_string();
            // The operator writes the admin kubeconfig beside the Karmada object; a
            // secretRef elsewhere is not the operator's to hand Kairship.
            if sns != ns {
                return Err(ConnectError::Failed(format!(
                    "Karmada {ns}/{name} reports its kubeconfig Secret in namespace {sns:?}; Kairship reads it only from {ns:?}"
                )));
            }
            let sname = secret["name"].as_str().ok_or_else(|| {
                ConnectError::Failed(format!(
                    "Karmada {ns}/{name} reports a secretRef without a name"
                ))
            })?;
            let config = read_secret_key(ctx, &sns, sname, "karmada.config").await?;
            let source = KubeconfigSource {
                namespace: sns.clone(),
                name: sname.to_string(),
                key: "karmada.config".into(),
            };
            // karmada-operator reports no version: the spec it has just completed is it.
            let version = crate::crd::karmada_spec::version_of(spec);
            client_from(
                ctx,
                &config,
                source,
                version,
                Some((ns.clone(), name.clone())),
            )
            .await
        }
    }
}

/// The annotation with the time Kairship last wrote the Karmada object's spec.
/// karmada-operator keeps neither `observedGeneration` nor the version it installed, and
/// its `Ready` condition stays `True` from the previous run until it picks up a new spec;
/// a `Ready` condition older than this write is about the old spec.
pub const SPEC_APPLIED_AT: &str = "kairship.io/spec-applied-at";

/// The operator's `Ready` condition, if it speaks about the current spec.
fn ready_condition(karmada: &DynamicObject) -> Option<&Value> {
    let c = karmada
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?;
    let applied = karmada
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SPEC_APPLIED_AT));
    let at = c["lastTransitionTime"].as_str().unwrap_or_default();
    // RFC 3339 in UTC with seconds, as both sides write it, orders as text.
    applied.is_none_or(|a| at >= a.as_str()).then_some(c)
}

fn ready(karmada: &DynamicObject) -> bool {
    let current = ready_condition(karmada).is_some_and(|c| c["status"] == "True");
    // A double that does keep observedGeneration (the simulator once did) must agree.
    let observed = karmada
        .data
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    current && observed.is_none_or(|g| Some(g) == karmada.metadata.generation)
}

/// Why a Karmada object is not usable yet, with the operator's own words: an instance that
/// has run (it reported a version) is being upgraded; anything else is provisioning.
fn not_ready(
    instance: &Instance,
    karmada: &DynamicObject,
    ns: &str,
    name: &str,
    rolling: Option<String>,
    failing: Option<String>,
) -> ConnectError {
    let progress = rolling
        .map(|r| format!(": rolling out {r}"))
        .or_else(|| {
            ready_condition(karmada).map(|c| {
                let (reason, message) = (
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default(),
                );
                format!(": karmada-operator says {reason}: {message}")
            })
        })
        .unwrap_or_else(|| ": karmada-operator has not reported on this spec yet".into());
    let progress = match &failing {
        Some(f) => format!("{progress}; {f}"),
        None => progress,
    };
    let spec = karmada.data.get("spec");
    match instance
        .status
        .as_ref()
        .and_then(|s| s.karmada_version.as_deref())
    {
        Some(from) => ConnectError::Upgrading {
            what: format!("{}{progress}", upgrade_message(Some(from), ns, name, spec)),
            failing,
        },
        None => ConnectError::Provisioning(format!("{ns}/{name}{progress}")),
    }
}

/// The operator's Deployments of instance `name` that have not rolled out their current
/// spec (as `kubectl rollout status` judges), named with their progress; None when all
/// have. A host that refuses the list (an older chart's RBAC) does not hold the instance.
async fn rolling_components(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<Option<String>, ConnectError> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(ctx.host.clone(), ns);
    let params = kube::api::ListParams::default().labels(&format!(
        "app.kubernetes.io/managed-by=karmada-operator,app.kubernetes.io/instance={name}"
    ));
    let list = match bounded(ctx, api.list(&params)).await? {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(namespace = %ns, error = %e, "cannot list the operator's Deployments; not waiting for their rollout");
            return Ok(None);
        }
    };
    let rolling: Vec<String> = list
        .items
        .iter()
        .filter_map(|d| {
            let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let st = d.status.clone().unwrap_or_default();
            let updated = st.updated_replicas.unwrap_or(0);
            let (total, available) = (st.replicas.unwrap_or(0), st.available_replicas.unwrap_or(0));
            let done = st.observed_generation >= d.metadata.generation
                && updated >= want
                && total <= want
                && available >= want;
            (!done).then(|| {
                format!(
                    "{} ({updated}/{want} updated, {available} available, {} old)",
                    d.metadata.name.as_deref().unwrap_or_default(),
                    total.saturating_sub(updated)
                )
            })
        })
        .collect();
    Ok(Some(rolling.join(", ")).filter(|r| !r.is_empty()))
}

/// The first of a not-yet-ready managed instance's pods that cannot run (an image that
/// does not pull, a crash loop), as the components controller words it. The operator
/// may wait minutes for such a component before it says anything; this says it now.
/// Only a hint: a refused or slow list says nothing.
async fn failing_component(ctx: &Context, ns: &str, name: &str) -> Option<String> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.host.clone(), ns);
    let params =
        kube::api::ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let list = bounded(ctx, pods.list(&params)).await.ok()?.ok()?;
    let pods: Vec<Value> = list
        .items
        .into_iter()
        .filter_map(|p| serde_json::to_value(p).ok())
        .collect();
    crate::controllers::components::first_failure(&pods)
}

fn upgrade_message(from: Option<&str>, ns: &str, name: &str, spec: Option<&Value>) -> String {
    let to = spec.and_then(crate::crd::karmada_spec::version_of);
    match (from, to.as_deref()) {
        (Some(f), Some(t)) if f != t => format!("{ns}/{name} from {f} to {t}"),
        (_, Some(t)) => format!("{ns}/{name} to {t}"),
        _ => format!("{ns}/{name}"),
    }
}

/// A leader-only write on the host (see [`crate::host::leader::Leadership::fenced`]).
async fn fenced<T>(
    ctx: &Context,
    write: impl std::future::Future<Output = T>,
) -> Result<T, ConnectError> {
    ctx.leadership
        .fenced(ctx.settings.request_timeout, write)
        .await
        .map_err(|e| ConnectError::Failed(format!("writing the Karmada object: {e}")))
}

async fn read_secret_key(
    ctx: &Context,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<String, ConnectError> {
    let bytes = secret_value(ctx, ns, name, key).await?;
    String::from_utf8(bytes)
        .map_err(|_| ConnectError::Failed(format!("secret {ns}/{name} key {key:?} is not UTF-8")))
}

/// The value under `key` of Secret `ns/name` on the host, bounded by the request timeout.
async fn secret_value(
    ctx: &Context,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Vec<u8>, ConnectError> {
    kubeconfig::secret_value(&ctx.host, ctx.settings.request_timeout, ns, name, key)
        .await
        .map_err(ConnectError::Failed)
}

async fn bounded<T>(
    ctx: &Context,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, ConnectError> {
    tokio::time::timeout(ctx.settings.request_timeout, fut)
        .await
        .map_err(|_| ConnectError::Failed("the host API did not answer in time".into()))
}

/// Gets the instance's `Karmada` object, creating it when this replica leads.
async fn ensure_karmada(
    ctx: &Context,
    instance: &Instance,
    ns: &str,
    name: &str,
) -> Result<DynamicObject, ConnectError> {
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.host.clone(), ns, &karmada_resource());
    let failed = |what: &str, e: kube::Error| {
        ConnectError::Failed(format!("{what} Karmada {ns}/{name}: {e}"))
    };
    let wanted = instance
        .spec
        .managed
        .as_ref()
        .and_then(|m| m.karmada_spec.clone());
    if let Some(w) = &wanted {
        ctx.settings
            .scope
            .check_karmada_spec(w, &ctx.settings.managed_defaults)
            .map_err(|e| ConnectError::Failed(format!("spec.managed.karmadaSpec: {e}")))?;
    }
    if let Some(k) = bounded(ctx, api.get_opt(name))
        .await?
        .map_err(|e| failed("reading", e))?
    {
        if !owned(&k, name) {
            return Err(ConnectError::Failed(format!(
                "Karmada {ns}/{name} exists and is not Kairship's (it lacks the label {OWNER_LABEL}={name}): Kairship neither adopts nor changes it; choose another name or namespace"
            )));
        }
        // The Instance asks for more than the object has (a new version): patch it, and
        // karmada-operator upgrades; the leader alone writes.
        let stale = wanted.as_ref().is_some_and(|w| {
            !crate::crd::karmada_spec::contains(k.data.get("spec").unwrap_or(&Value::Null), w)
        });
        if stale && ctx.leadership.is_leader() {
            // Conditional on the version just read, so a deposed leader's late patch fails.
            let patch = json!({"metadata": {
                "resourceVersion": k.metadata.resource_version,
                "annotations": {SPEC_APPLIED_AT: now()},
            }, "spec": wanted});
            tracing::info!(karmada = %name, namespace = %ns, "patching the Karmada object's spec (upgrade)");
            let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
            fenced(ctx, api.patch(name, &params, &patch))
                .await?
                .map_err(|e| failed("patching", e))?;
            let from = instance
                .status
                .as_ref()
                .and_then(|s| s.karmada_version.as_deref());
            return Err(ConnectError::Upgrading {
                what: upgrade_message(from, ns, name, wanted.as_ref()),
                failing: None,
            });
        }
        return Ok(k);
    }
    if !ctx.leadership.is_leader() {
        return Err(ConnectError::Provisioning(format!(
            "{ns}/{name} (created by the leader)"
        )));
    }
    // An Instance written directly (not through the API) gets Kairship's defaults here,
    // under what it says itself.
    let spec = ctx
        .settings
        .managed_defaults
        .under(&wanted.unwrap_or_else(|| json!({})))
        .map_err(|e| ConnectError::Failed(e.to_string()))?;
    let mut obj = DynamicObject::new(name, &karmada_resource())
        .within(ns)
        .data(json!({"spec": spec}));
    obj.metadata.labels = Some(
        [
            (OWNER_LABEL.to_string(), name.to_string()),
            (
                "app.kubernetes.io/managed-by".to_string(),
                "kairship".to_string(),
            ),
        ]
        .into(),
    );
    obj.metadata.annotations = Some([(SPEC_APPLIED_AT.to_string(), now())].into());
    let params = PostParams::default();
    match fenced(ctx, api.create(&params, &obj)).await? {
        Ok(k) => Ok(k),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(ConnectError::Failed(format!(
            "namespace {ns} for managed Karmada objects does not exist"
        ))),
        Err(e) => Err(failed("creating", e)),
    }
}

async fn client_from(
    ctx: &Context,
    kubeconfig: &str,
    source: KubeconfigSource,
    karmada_version: Option<String>,
    operator: Option<(String, String)>,
) -> Result<Connected, ConnectError> {
    let named = |e: String| {
        ConnectError::Failed(format!(
            "Secret {}/{} key {:?}: {e}",
            source.namespace, source.name, source.key
        ))
    };
    let kc = parse_kubeconfig(kubeconfig, "an instance").map_err(named)?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| named(format!("invalid kubeconfig: {}", without_detail(&e))))?;
    // Accepted, since some do run that way, but never silently: Kairship would send the
    // instance's admin credentials where anyone on the path can read or replace them.
    if config.cluster_url.scheme_str() == Some("http") {
        tracing::warn!(server = %config.cluster_url, "the instance's kubeconfig uses plain http://: its credentials cross the network in clear");
    }
    if config.accept_invalid_certs {
        tracing::warn!(server = %config.cluster_url, "the instance's kubeconfig sets insecure-skip-tls-verify: anyone on the path can pose as the instance");
    }
    config.connect_timeout = Some(ctx.settings.connect_timeout);
    config.write_timeout = Some(ctx.settings.request_timeout);
    let endpoint = config.cluster_url.to_string();
    let certificates = crate::certificates::Inputs {
        endpoint: Some(config.cluster_url.clone()),
        server_name: config.tls_server_name.clone(),
        roots: config.root_cert.clone().unwrap_or_default(),
        kubeconfig: crate::certificates::from_config(&config),
        operator,
    };
    let client = crate::host::client::build(&config)
        .map_err(|e| ConnectError::Failed(format!("building client for {endpoint}: {e}")))?;
    let upgrades = crate::host::client::build_upgrades(&config)
        .map_err(|e| ConnectError::Failed(format!("building client for {endpoint}: {e}")))?;
    // One request before the caches start their watches all at once: until a connection
    // has negotiated HTTP/2, the pool cannot know it may share one, and each concurrent
    // request would open its own (about four sockets per instance instead of one).
    // Best effort: an unreachable instance is reported by the probes, not here.
    let _ = tokio::time::timeout(ctx.settings.probe_timeout, client.apiserver_version()).await;
    Ok(Connected {
        client,
        upgrades,
        source,
        endpoint,
        karmada_version,
        certificates,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_kubeconfig;

    fn kubeconfig(user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: AAAA\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        )
    }

    #[test]
    fn only_self_contained_kubeconfigs_are_accepted() {
        assert!(parse_kubeconfig(&kubeconfig("    token: abc"), "an instance").is_ok());
        for (user, named) in [
            (
                "    exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}",
                "exec",
            ),
            ("    auth-provider: {name: gcp}", "auth-provider"),
            ("    client-certificate: /etc/passwd", "client-certificate"),
            ("    tokenFile: /var/run/secrets/token", "tokenFile"),
        ] {
            let e = parse_kubeconfig(&kubeconfig(user), "an instance").expect_err(named);
            assert!(e.contains(named), "{e}");
        }
        let e = parse_kubeconfig("clusters: [", "an instance").expect_err("not YAML");
        assert!(e.starts_with("invalid kubeconfig"), "{e}");
    }
}
