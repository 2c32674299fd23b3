//! Registration with Clusterpedia (on with `--clusterpedia`), as the seed design's
//! virtual-cluster sync registers each instance with container management: one
//! `PediaCluster` per instance, named after it, that reads the instance through a Secret
//! holding a kubeconfig (an `authenticationFrom` reference, never inline) and syncs the
//! kinds Kairship caches. The kubeconfig names the instance's server and CA, as Kairship's
//! own does, with a short-lived token of a read-only ServiceAccount on the instance,
//! renewed before it expires; both are removed when the Instance is deleted. Written by
//! the leader only.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::Resource;
use serde_json::{json, Value};

use super::{Action, Controller, Next, Observed, Report, Scope};
use crate::cache::caches::Kind;
use crate::context::Context;
use crate::crd::Instance;
use crate::host::error::{bounded, fenced, HostError};
use crate::host::kubeconfig::{self, KubeconfigSource};

/// The key of the kubeconfig in the Secret Kairship writes for Clusterpedia.
pub const SECRET_KEY: &str = "kubeconfig";

pub use crate::status::CLUSTERPEDIA_CONDITION as CONDITION;

/// What Clusterpedia says of the instance: its `Ready` condition, or nothing yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub ready: Option<bool>,
    pub reason: String,
    pub message: String,
}

pub fn resource() -> ApiResource {
    ApiResource {
        group: "cluster.clusterpedia.io".into(),
        version: "v1alpha2".into(),
        api_version: "cluster.clusterpedia.io/v1alpha2".into(),
        kind: "PediaCluster".into(),
        plural: "pediaclusters".into(),
    }
}

/// The Secret in Clusterpedia's namespace that carries instance `name`'s kubeconfig.
pub fn secret_name(instance: &str) -> String {
    format!("kairship-{instance}-kubeconfig")
}

/// Makes the PediaCluster what it should be, at most every `--clusterpedia-every` (a third
/// of it until Clusterpedia reports the instance Ready), once the instance is connected
/// (its kubeconfig is known to work). A failure shows in the instance's condition.
#[derive(Default)]
pub struct Clusterpedia {
    /// `--clusterpedia-every-secs`, as the last look read it.
    every: std::time::Duration,
}

impl Controller for Clusterpedia {
    const NAME: &'static str = "clusterpedia";
    type Found = Reported;

    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        _: &Observed,
        report: &mut Report,
    ) -> Next<Reported> {
        let settings = &scope.ctx.settings;
        let (Some(namespace), Some(source), Some(client), true) = (
            settings.clusterpedia.clone(),
            scope.kubeconfig_source.cloned(),
            scope.client.cloned(),
            scope.connected,
        ) else {
            return Next::Idle;
        };
        if report.said(CONDITION).is_some() && !scope.requeued() {
            return Next::Idle;
        }
        self.every = settings.clusterpedia_every;
        let (ctx, instance) = (scope.ctx.clone(), scope.instance.clone());
        Next::Start(Box::pin(async move {
            let r = ensure(&ctx, &instance, &source, &client, &namespace).await;
            Ok(r.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "registering with Clusterpedia failed; retrying");
                Reported {
                    ready: Some(false),
                    reason: "RegistrationFailed".into(),
                    message: e.to_string(),
                }
            }))
        }))
    }

    fn record(&mut self, reported: Reported, report: &mut Report) -> Action {
        let ready = reported.ready == Some(true);
        report.say(CONDITION, reported.ready, reported.reason, reported.message);
        // Three times as often until Clusterpedia reports it Ready.
        Action::requeue(if ready { self.every } else { self.every / 3 })
    }
}

/// The kinds Kairship caches, grouped as `syncResources` lists them; not the optional
/// ones, which an older instance does not serve.
fn sync_resources() -> Value {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in Kind::ALL.into_iter().filter(|k| !k.optional()) {
        let r = kind.resource();
        groups.entry(r.group).or_default().push(r.plural);
    }
    Value::Array(
        groups
            .into_iter()
            .map(|(group, resources)| json!({"group": group, "resources": resources}))
            .collect(),
    )
}

/// The PediaCluster's spec for instance `name`.
pub fn spec(instance: &str) -> Value {
    json!({
        "authenticationFrom": {"kubeconfig": {"name": secret_name(instance), "key": SECRET_KEY}},
        "syncResources": sync_resources(),
    })
}

/// The ServiceAccount (in `kube-system` of each instance, from `deploy/instance-rbac.yaml`)
/// whose tokens Clusterpedia reads the instance with: get, list and watch of the synced
/// kinds, nothing else.
pub const READER: &str = "kairship-clusterpedia";
const READER_NAMESPACE: &str = "kube-system";
/// How long a token Clusterpedia gets lives, and how much of that may be left before a new
/// one is asked for (the registration is looked at every minute once Clusterpedia is Ready).
const TOKEN_SECONDS: i64 = 3600;
const RENEW_WITH_LEFT: i64 = 1800;
/// When the token in the Secret stops working, and what it was issued for (the instance's
/// server and CA), as annotations of the Secret.
const EXPIRES: &str = "kairship.io/token-expires";
const ISSUED_FOR: &str = "kairship.io/token-for";

/// Makes the Secret and the PediaCluster what they should be, and returns what
/// Clusterpedia reports. The Secret holds a kubeconfig for the instance's own server and CA
/// (from `source`, the kubeconfig Kairship connects with) and a short-lived token of the
/// instance's read-only ServiceAccount, asked of the instance with `client` (Kairship's
/// own connection); never Kairship's own credentials.
pub async fn ensure(
    ctx: &Context,
    instance: &Instance,
    source: &KubeconfigSource,
    client: &kube::Client,
    namespace: &str,
) -> Result<Reported, HostError> {
    let name = instance.metadata.name.clone().unwrap_or_default();
    let timeout = ctx.settings.request_timeout;
    let owner = instance.controller_owner_ref(&()).map(|o| vec![o]);

    let ours: Api<Secret> = Api::namespaced(ctx.host.clone(), namespace);
    let secret_name = secret_name(&name);
    let existing = bounded(
        format!("reading secret {namespace}/{secret_name}"),
        timeout,
        ours.get_opt(&secret_name),
    )
    .await?;
    if existing
        .as_ref()
        .is_some_and(|e| !ours_by_label(e.metadata.labels.as_ref()))
    {
        return Ok(taken("Secret", &format!("{namespace}/{secret_name}")));
    }
    let server = server_of(ctx, source).await?;
    let fresh = existing.as_ref().is_some_and(|e| {
        let a = e.metadata.annotations.clone().unwrap_or_default();
        let left = a
            .get(EXPIRES)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map_or(0, |t| t.as_second() - jiff::Timestamp::now().as_second());
        a.get(ISSUED_FOR) == Some(&server.digest()) && left > RENEW_WITH_LEFT
    });
    if !fresh {
        let (token, expires) = match request_token(client, timeout).await {
            Ok(t) => t,
            Err(refused) => return Ok(refused),
        };
        let data = BTreeMap::from([(
            SECRET_KEY.to_string(),
            k8s_openapi::ByteString(server.kubeconfig(&name, &token).into_bytes()),
        )]);
        let annotations = BTreeMap::from([
            (EXPIRES.to_string(), expires),
            (ISSUED_FOR.to_string(), server.digest()),
        ]);
        match existing {
            Some(mut e) => {
                e.data = Some(data);
                e.metadata.annotations = Some(annotations);
                // The resourceVersion read above is the replace's precondition.
                let params = PostParams::default();
                let write = ctx
                    .leadership
                    .fenced(timeout, ours.replace(&secret_name, &params, &e))
                    .await;
                fenced(format!("updating secret {namespace}/{secret_name}"), write)?;
            }
            None => {
                let mut secret = Secret {
                    data: Some(data),
                    ..Default::default()
                };
                secret.metadata.name = Some(secret_name.clone());
                secret.metadata.labels = Some(managed_by());
                secret.metadata.annotations = Some(annotations);
                // Owned by the (cluster-scoped) Instance, so a real host collects it too.
                secret.metadata.owner_references = owner.clone();
                let params = PostParams::default();
                let write = ctx
                    .leadership
                    .fenced(timeout, ours.create(&params, &secret))
                    .await;
                fenced(format!("creating secret {namespace}/{secret_name}"), write)?;
            }
        }
    }

    let pedia: Api<DynamicObject> = Api::all_with(ctx.host.clone(), &resource());
    let want = spec(&name);
    let read = bounded(
        format!("reading PediaCluster {name}"),
        timeout,
        pedia.get_opt(&name),
    );
    let current = match read.await? {
        Some(existing) if !ours_by_label(existing.metadata.labels.as_ref()) => {
            return Ok(taken("PediaCluster", &name));
        }
        Some(existing) if existing.data.get("spec") == Some(&want) => existing,
        Some(_) => {
            // One merge patch that replaces the spec: what Kairship does not set (inline
            // credentials someone added) is removed by sending it as null.
            let mut patch = json!({
                "kubeconfig": null, "apiserver": null, "tokenData": null, "caData": null,
                "certData": null, "keyData": null, "syncAllCustomResources": null,
                "syncResourcesRefName": null, "shardingName": null,
            });
            if let (Some(p), Some(w)) = (patch.as_object_mut(), want.as_object()) {
                p.extend(w.clone());
            }
            let (params, patch) = (
                PatchParams::default(),
                Patch::Merge(json!({ "spec": patch })),
            );
            let write = ctx
                .leadership
                .fenced(timeout, pedia.patch(&name, &params, &patch))
                .await;
            fenced(format!("updating PediaCluster {name}"), write)?
        }
        None => {
            let mut object = DynamicObject::new(&name, &resource()).data(json!({ "spec": want }));
            object.metadata.labels = Some(managed_by());
            object.metadata.owner_references = owner;
            let params = PostParams::default();
            let write = ctx
                .leadership
                .fenced(timeout, pedia.create(&params, &object))
                .await;
            fenced(format!("creating PediaCluster {name}"), write)?
        }
    };
    Ok(reported(&current))
}

/// Where the instance answers and the CA that signs it, from Kairship's own kubeconfig of
/// it (its credentials are not taken).
struct Server {
    url: String,
    ca_data: Option<String>,
    tls_server_name: Option<String>,
}

impl Server {
    /// What a token was issued for: a new server or CA needs a new Secret.
    fn digest(&self) -> String {
        let text = format!(
            "{}\n{}\n{}",
            self.url,
            self.ca_data.as_deref().unwrap_or_default(),
            self.tls_server_name.as_deref().unwrap_or_default()
        );
        let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
        d.as_ref()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// A self-contained kubeconfig (JSON, which is YAML) for Clusterpedia.
    fn kubeconfig(&self, instance: &str, token: &str) -> String {
        let mut cluster = json!({"server": self.url});
        if let Some(ca) = &self.ca_data {
            cluster["certificate-authority-data"] = ca.clone().into();
        }
        if let Some(n) = &self.tls_server_name {
            cluster["tls-server-name"] = n.clone().into();
        }
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": instance, "cluster": cluster}],
            "users": [{"name": READER, "user": {"token": token}}],
            "contexts": [{"name": instance, "context": {"cluster": instance, "user": READER}}],
            "current-context": instance,
        })
        .to_string()
    }
}

async fn server_of(ctx: &Context, source: &KubeconfigSource) -> Result<Server, HostError> {
    let bytes = kubeconfig::secret_value(
        &ctx.host,
        ctx.settings.host_call_timeout,
        &source.namespace,
        &source.name,
        &source.key,
    )
    .await
    .map_err(|e| HostError::Secret(e.to_string()))?;
    let bad = |why: String| {
        HostError::Secret(format!(
            "secret {}/{} key {:?}: {why}",
            source.namespace, source.name, source.key
        ))
    };
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
    let kc = kubeconfig::parse_kubeconfig(&text, "an instance").map_err(bad)?;
    let current = kc.current_context.clone().unwrap_or_default();
    let cluster_name = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let cluster = kc
        .clusters
        .iter()
        .find(|c| cluster_name.as_ref().is_none_or(|n| &c.name == n))
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| bad("names no cluster".into()))?;
    Ok(Server {
        url: cluster
            .server
            .ok_or_else(|| bad("its cluster names no server".into()))?,
        ca_data: cluster.certificate_authority_data,
        tls_server_name: cluster.tls_server_name,
    })
}

/// A token of the instance's read-only ServiceAccount and when it expires; what stands in
/// the way, in words, when the instance refuses.
async fn request_token(
    client: &kube::Client,
    timeout: std::time::Duration,
) -> Result<(String, String), Reported> {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS}});
    let path = format!("/api/v1/namespaces/{READER_NAMESPACE}/serviceaccounts/{READER}/token");
    let failed = |reason: &str, message: String| Reported {
        ready: Some(false),
        reason: reason.into(),
        message,
    };
    let req = http::Request::post(&path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string().into_bytes())
        .map_err(|e| failed("TokenRequestFailed", e.to_string()))?;
    let answer: Value = match tokio::time::timeout(timeout, client.request(req)).await {
        Err(_) => {
            return Err(failed(
                "TokenRequestFailed",
                format!("the instance did not answer a token request within {timeout:?}"),
            ))
        }
        Ok(Err(kube::Error::Api(s))) if s.code == 404 => {
            return Err(failed(
                "NoReaderIdentity",
                format!(
                    "the instance has no ServiceAccount {READER_NAMESPACE}/{READER} (apply deploy/instance-rbac.yaml there): Clusterpedia gets read-only tokens of it, never the instance's admin credentials"
                ),
            ))
        }
        Ok(Err(e)) => {
            return Err(failed(
                "TokenRequestFailed",
                format!("asking the instance for a token of {READER_NAMESPACE}/{READER}: {e}"),
            ))
        }
        Ok(Ok(v)) => v,
    };
    let token = answer["status"]["token"].as_str().unwrap_or_default();
    let expires = answer["status"]["expirationTimestamp"]
        .as_str()
        .unwrap_or_default();
    match token.is_empty() {
        true => Err(failed(
            "TokenRequestFailed",
            "the instance's TokenRequest answer holds no token".into(),
        )),
        false => Ok((token.to_string(), expires.to_string())),
    }
}

const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

fn managed_by() -> BTreeMap<String, String> {
    BTreeMap::from([(MANAGED_BY.to_string(), "kairship".to_string())])
}

/// Whether an object is one Kairship made (it never takes over, rewrites or deletes
/// someone else's registration of the same name).
fn ours_by_label(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY))
        .is_some_and(|v| v == "kairship")
}

fn taken(kind: &str, name: &str) -> Reported {
    Reported {
        ready: Some(false),
        reason: "NameTaken".into(),
        message: format!(
            "{kind} {name} exists and is not Kairship's ({MANAGED_BY}=kairship missing): \
             Kairship leaves it alone; delete it to let Kairship register the instance"
        ),
    }
}

/// Clusterpedia's `Ready` condition on the PediaCluster.
fn reported(pedia: &DynamicObject) -> Reported {
    let ready = pedia
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) => Reported {
            ready: match c["status"].as_str() {
                Some("True") => Some(true),
                Some("False") => Some(false),
                _ => None,
            },
            reason: c["reason"].as_str().unwrap_or_default().to_string(),
            message: c["message"].as_str().unwrap_or_default().to_string(),
        },
        None => Reported {
            ready: None,
            reason: "Registered".into(),
            message: "PediaCluster created; clustersynchro-manager has not reported yet".into(),
        },
    }
}

/// Removes instance `name`'s PediaCluster and Secret, if they are Kairship's (each may
/// already be gone). The PediaCluster goes first: Clusterpedia stops reading before its
/// credentials go. Deletes are conditional on the uid read, so a same-named object made
/// meanwhile by someone else stays.
pub async fn remove(ctx: &Context, name: &str, namespace: &str) -> Result<(), HostError> {
    let pedia: Api<DynamicObject> = Api::all_with(ctx.host.clone(), &resource());
    let what = format!("PediaCluster {name}");
    delete_if_ours(ctx, &pedia, name, &what).await?;
    let secrets: Api<Secret> = Api::namespaced(ctx.host.clone(), namespace);
    let secret = secret_name(name);
    let what = format!("secret {namespace}/{secret}");
    delete_if_ours(ctx, &secrets, &secret, &what).await
}

async fn delete_if_ours<K>(
    ctx: &Context,
    api: &Api<K>,
    name: &str,
    what: &str,
) -> Result<(), HostError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let timeout = ctx.settings.request_timeout;
    let found = match bounded(format!("reading {what}"), timeout, api.get_opt(name)).await {
        Ok(found) => found,
        // No such kind in the host (no Clusterpedia CRDs): nothing was registered.
        Err(e) if e.code() == Some(404) => None,
        Err(e) => return Err(e),
    };
    let Some(found) = found else {
        return Ok(());
    };
    if !ours_by_label(found.meta().labels.as_ref()) {
        tracing::info!(object = %what, "not Kairship's: left in place");
        return Ok(());
    }
    let params = kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: found.meta().uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let write = ctx
        .leadership
        .fenced(timeout, api.delete(name, &params))
        .await;
    match fenced(format!("deleting {what}"), write).map(drop) {
        // Gone already, or replaced by someone else's (the uid no longer matches).
        Err(e) if e.code() == Some(404) || e.code() == Some(409) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_syncs_every_cached_kind_by_group_through_a_secret() {
        let s = spec("payments");
        assert_eq!(
            s["authenticationFrom"]["kubeconfig"],
            json!({"name": "kairship-payments-kubeconfig", "key": "kubeconfig"})
        );
        let groups = s["syncResources"].as_array().expect("groups");
        let apps = groups.iter().find(|g| g["group"] == "apps").expect("apps");
        assert_eq!(
            apps["resources"],
            json!(["deployments", "statefulsets", "daemonsets"])
        );
        let total: usize = groups
            .iter()
            .map(|g| g["resources"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(total, Kind::ALL.iter().filter(|k| !k.optional()).count());
        assert!(s.get("kubeconfig").is_none(), "credentials never inline");
    }

    #[test]
    fn clusterpedia_ready_condition_is_reported_in_its_words() {
        let mut o = DynamicObject::new("a", &resource());
        assert_eq!(reported(&o).ready, None);
        o.data = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "ClusterUnhealthy", "message": "dial tcp: refused"}]}});
        assert_eq!(
            reported(&o),
            Reported {
                ready: Some(false),
                reason: "ClusterUnhealthy".into(),
                message: "dial tcp: refused".into()
            }
        );
    }
}

#[cfg(test)]
mod host_tests {
    use std::time::Duration;

    use super::*;
    use crate::controllers::testing::{
        context, fresh, idle, instance, mock, run, says, status, Look,
    };

    #[tokio::test]
    async fn a_registration_the_host_refuses_is_reported_and_tried_three_times_as_often() {
        let (host, calls) = mock(|_| Some((403, status(403, "Forbidden", "secrets is forbidden"))));
        let settings = crate::context::Settings {
            clusterpedia: Some("clusterpedia-system".into()),
            clusterpedia_every: Duration::from_secs(60),
            ..Default::default()
        };
        let mut look = Look::new(instance("team-a"), context(host.clone(), settings));
        let (observed, mut report) = fresh();
        let mut c = Clusterpedia::default();
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "not connected"
        );
        look = look.connected(host);
        look.kubeconfig_source = Some(KubeconfigSource {
            namespace: "kairship-system".into(),
            name: "team-a".into(),
            key: "kubeconfig".into(),
        });
        let reported = run(c.reconcile(&look.scope(), &observed, &mut report))
            .await
            .expect("a report, not an error");
        assert_eq!(
            c.record(reported, &mut report),
            Action::requeue(Duration::from_secs(20))
        );
        says(
            &report,
            CONDITION,
            Some(false),
            "RegistrationFailed",
            "forbidden",
        );
        assert!(calls.writes().is_empty(), "{:?}", calls.writes());
        assert!(
            idle(&c.reconcile(&look.scope(), &observed, &mut report)),
            "reported: the next try waits for its time"
        );
    }
}
