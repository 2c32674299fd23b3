//! Joining member clusters, as `karmadactl join` does (Push mode):
//! on the member, with the kubeconfig the caller hands in, a ServiceAccount bound to a
//! ClusterRole and an impersonator ServiceAccount in `karmada-cluster`, whose tokens the
//! member's token controller fills; on the instance, as the caller, those tokens in
//! Secrets of `karmada-cluster` owned by the new Cluster object (removal:
//! `cluster_remove`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

use crate::api::member::Member;
use crate::api::request::OnInstance;
use crate::api::{convert, objects};
use crate::cache::caches::Kind;
use crate::error::ApiError;
use crate::proto;

/// Where both sides keep the cluster's credentials (karmadactl's default).
pub(super) const CLUSTER_NAMESPACE: &str = "karmada-cluster";
/// Karmada's label for what it created in a cluster.
pub(super) const SYSTEM_LABEL: (&str, &str) = ("karmada.io/system", "true");
pub(super) const IMPERSONATOR: &str = "karmada-impersonator";
/// How long the member's token controller has to fill a token Secret (karmadactl's).
const TOKEN_WAIT: Duration = Duration::from_secs(30);
const FIELD_MANAGER: &str = "kairship";

pub(super) fn service_account(cluster: &str) -> String {
    format!("karmada-{cluster}")
}

pub(super) fn cluster_role(cluster: &str) -> String {
    format!("karmada-controller-manager:{}", service_account(cluster))
}

/// Karmada's limit on Cluster names (a DNS label of at most 48 characters).
pub(super) fn check_cluster_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    match ok {
        true => Ok(()),
        false => Err(ApiError::invalid(
            "name",
            format!("{name:?} is not a valid cluster name: a DNS label (lowercase alphanumerics and '-') of at most 48 characters"),
        )),
    }
}

fn labels() -> BTreeMap<String, String> {
    [(SYSTEM_LABEL.0.to_string(), SYSTEM_LABEL.1.to_string())].into()
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::Internal(e.to_string()))
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

pub async fn join(
    on: &OnInstance,
    req: proto::JoinClusterRequest,
    networks: &crate::member_networks::MemberNetworks,
) -> Result<proto::Cluster, ApiError> {
    check_cluster_name(&req.name)?;
    let name = req.name.as_str();
    let instance = on.instance().to_string();
    let existing = cached_clusters(on).await?;
    if existing
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(name))
    {
        return Err(ApiError::AlreadyExists(format!(
            "cluster {name:?} already exists in instance {instance:?}"
        )));
    }
    let member = Member::connect("kubeconfig", (&req.kubeconfig, &req.context), networks).await?;
    let id = member.cluster_id().await?;
    if let Some(other) = existing
        .iter()
        .find(|c| !id.is_empty() && c.data.pointer("/spec/id").and_then(Value::as_str) == Some(&id))
    {
        return Err(ApiError::AlreadyExists(format!(
            "the member at {} is already cluster {:?} of instance {instance:?}",
            member.url,
            other.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    let creds = member_credentials(&member, name).await?;
    tracing::info!(%instance, cluster = name, member = %member.url, "member credentials ready; registering the cluster");
    register(on, &req, &member, &id, creds).await
}

/// Tokens (and the CA) Karmada will reach the member with.
struct Credentials {
    token: String,
    ca_pem: String,
    impersonator_token: String,
}

/// What `karmadactl join` creates on the member, then both tokens once filled.
async fn member_credentials(member: &Member, name: &str) -> Result<Credentials, ApiError> {
    let c = &member.client;
    let ns: Namespace =
        typed(json!({"metadata": {"name": CLUSTER_NAMESPACE, "labels": labels()}}))?;
    let ns_api: Api<Namespace> = Api::all(c.clone());
    member
        .call(
            "create namespace karmada-cluster",
            ns_api.patch(CLUSTER_NAMESPACE, &apply_params(), &Patch::Apply(&ns)),
        )
        .await?;
    let sa_api: Api<ServiceAccount> = Api::namespaced(c.clone(), CLUSTER_NAMESPACE);
    let sa = service_account(name);
    for account in [IMPERSONATOR, sa.as_str()] {
        let obj: ServiceAccount = typed(
            json!({"metadata": {"name": account, "namespace": CLUSTER_NAMESPACE, "labels": labels()}}),
        )?;
        member
            .call(
                &format!("create serviceaccount {CLUSTER_NAMESPACE}/{account}"),
                sa_api.patch(account, &apply_params(), &Patch::Apply(&obj)),
            )
            .await?;
    }
    let role = cluster_role(name);
    // Karmada's: everything, and GET on every non-resource URL.
    let cr: ClusterRole = typed(json!({
        "metadata": {"name": role, "labels": labels()},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["get"]},
        ],
    }))?;
    let cr_api: Api<ClusterRole> = Api::all(c.clone());
    member
        .call(
            &format!("create clusterrole {role}"),
            cr_api.patch(&role, &apply_params(), &Patch::Apply(&cr)),
        )
        .await?;
    let crb: ClusterRoleBinding = typed(json!({
        "metadata": {"name": role, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": CLUSTER_NAMESPACE}],
    }))?;
    let crb_api: Api<ClusterRoleBinding> = Api::all(c.clone());
    member
        .call(
            &format!("create clusterrolebinding {role}"),
            crb_api.patch(&role, &apply_params(), &Patch::Apply(&crb)),
        )
        .await?;
    let impersonator = token_of(member, IMPERSONATOR).await?;
    let main = token_of(member, &sa).await?;
    let ca_pem = main.1.or_else(|| member.ca_pem.clone()).unwrap_or_default();
    Ok(Credentials {
        token: main.0,
        ca_pem,
        impersonator_token: impersonator.0,
    })
}

/// The long-lived token of ServiceAccount `account` (a `service-account-token` Secret of
/// its name, filled by the member's token controller), with the member's CA if given.
async fn token_of(member: &Member, account: &str) -> Result<(String, Option<String>), ApiError> {
    let api: Api<Secret> = Api::namespaced(member.client.clone(), CLUSTER_NAMESPACE);
    let secret: Secret = typed(json!({
        "metadata": {"name": account, "namespace": CLUSTER_NAMESPACE, "labels": labels(),
                     "annotations": {"kubernetes.io/service-account.name": account}},
        "type": "kubernetes.io/service-account-token",
    }))?;
    let what = format!("create secret {CLUSTER_NAMESPACE}/{account}");
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(member.error(&what, e)),
    }
    let deadline = Instant::now() + TOKEN_WAIT;
    loop {
        let got = member
            .call(
                &format!("get secret {CLUSTER_NAMESPACE}/{account}"),
                api.get(account),
            )
            .await?;
        let data = got.data.unwrap_or_default();
        if let Some(token) = data.get("token").filter(|t| !t.0.is_empty()) {
            let token = String::from_utf8_lossy(&token.0).into_owned();
            let ca = data
                .get("ca.crt")
                .map(|c| String::from_utf8_lossy(&c.0).into_owned());
            return Ok((token, ca));
        }
        if Instant::now() > deadline {
            return Err(ApiError::FailedPrecondition(format!(
                "the member at {} did not fill the token of Secret {CLUSTER_NAMESPACE}/{account} within {TOKEN_WAIT:?}: its kube-controller-manager's serviceaccount-token controller is not running",
                member.url
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The instance's side, as the caller: the credentials Secrets, then the Cluster that
/// owns them. A Cluster that cannot be created takes its Secrets with it.
async fn register(
    on: &OnInstance,
    req: &proto::JoinClusterRequest,
    member: &Member,
    id: &str,
    creds: Credentials,
) -> Result<proto::Cluster, ApiError> {
    let name = req.name.as_str();
    let ns: Namespace =
        typed(json!({"metadata": {"name": CLUSTER_NAMESPACE, "labels": labels()}}))?;
    on.live("Namespace \"karmada-cluster\"", |client| async move {
        let api: Api<Namespace> = Api::all(client);
        api.patch(CLUSTER_NAMESPACE, &apply_params(), &Patch::Apply(&ns))
            .await
    })
    .await?;
    let impersonator_secret = format!("{name}-impersonator");
    let b64 = |s: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    let secrets = [
        (
            name.to_string(),
            json!({"caBundle": b64(&creds.ca_pem), "token": b64(&creds.token)}),
        ),
        (
            impersonator_secret.clone(),
            json!({"token": b64(&creds.impersonator_token)}),
        ),
    ];
    for (secret, data) in &secrets {
        let obj: Secret = typed(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": CLUSTER_NAMESPACE, "labels": labels()},
            "data": data,
        }))?;
        on.live(
            &format!("Secret {CLUSTER_NAMESPACE}/{secret}"),
            |client| async move {
                let api: Api<Secret> = Api::namespaced(client, CLUSTER_NAMESPACE);
                api.patch(secret, &apply_params(), &Patch::Apply(&obj))
                    .await
            },
        )
        .await?;
    }
    let mut spec = json!({
        "syncMode": "Push",
        "apiEndpoint": member.url.trim_end_matches('/'),
        "id": id,
        "secretRef": {"namespace": CLUSTER_NAMESPACE, "name": name},
        "impersonatorSecretRef": {"namespace": CLUSTER_NAMESPACE, "name": impersonator_secret},
    });
    if !req.provider.is_empty() {
        spec["provider"] = req.provider.clone().into();
    }
    if !req.region.is_empty() {
        spec["region"] = req.region.clone().into();
    }
    if !req.zones.is_empty() {
        spec["zones"] = req.zones.clone().into();
    }
    let cluster: DynamicObject = typed(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name}, "spec": spec,
    }))?;
    let created = match objects::create(on, Kind::Cluster, &cluster).await {
        Ok(c) => c,
        Err(e) => {
            for (secret, _) in &secrets {
                let _ = on
                    .live("cleanup", |client| async move {
                        let api: Api<Secret> = Api::namespaced(client, CLUSTER_NAMESPACE);
                        api.delete(secret, &DeleteParams::default()).await
                    })
                    .await;
            }
            return Err(e);
        }
    };
    // Owned by the Cluster, so deleting it removes them (as karmadactl sets it).
    let owner = json!([{
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "name": name,
        "uid": created.metadata.uid, "controller": true, "blockOwnerDeletion": true,
    }]);
    for (secret, _) in &secrets {
        let patch = json!({"metadata": {"ownerReferences": owner}});
        on.live(
            &format!("Secret {CLUSTER_NAMESPACE}/{secret}"),
            |client| async move {
                let api: Api<Secret> = Api::namespaced(client, CLUSTER_NAMESPACE);
                api.patch(secret, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
            },
        )
        .await?;
    }
    Ok(convert::cluster(&created))
}

pub(super) async fn cached_clusters(on: &OnInstance) -> Result<Vec<DynamicObject>, ApiError> {
    let (reads, _) = on.list(Kind::Cluster, "").await?;
    reads
        .store(Kind::Cluster)?
        .state()
        .iter()
        .map(|c| objects::decoded(c))
        .collect()
}
