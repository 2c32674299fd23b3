//! Removing member clusters, as `karmadactl unjoin` does: refused while workloads are
//! propagated to the cluster, naming them; forced, the cluster is tainted NoExecute so
//! Karmada moves them (bounded), the Cluster is deleted once Karmada has emptied its
//! execution namespace, and, given the member's kubeconfig, what the join created there
//! is removed.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::{json, Value};

use super::cluster_join::{
    check_cluster_name, cluster_role, service_account, CLUSTER_NAMESPACE, IMPERSONATOR,
    SYSTEM_LABEL,
};
use crate::api::member::Member;
use crate::api::objects;
use crate::api::request::OnInstance;
use crate::cache::caches::Kind;
use crate::controllers::member_access;
use crate::error::ApiError;
use crate::proto;

/// The taint a forced removal puts on the cluster so Karmada moves what runs there.
pub const REMOVING_TAINT: &str = "kairship.io/removing";
/// How long a deleted Cluster may take to go (Karmada's cluster controller first removes
/// its execution namespace and Works).
const DELETE_WAIT: Duration = Duration::from_secs(90);

/// Workloads ("namespace/Kind/name") whose bindings place them on `cluster`, sorted:
/// ResourceBindings from the cache, ClusterResourceBindings (not cached) read live.
async fn propagated_to(on: &OnInstance, cluster: &str) -> Result<Vec<String>, ApiError> {
    let (reads, _) = on.list(Kind::ResourceBinding, "").await?;
    let mut bindings = reads
        .store(Kind::ResourceBinding)?
        .state()
        .iter()
        .map(|b| objects::decoded(b))
        .collect::<Result<Vec<_>, _>>()?;
    let crb = member_access::bindings();
    let cluster_scoped = on
        .live("ClusterResourceBindings", |client| async move {
            let api: Api<DynamicObject> = Api::all_with(client, &crb);
            api.list(&Default::default()).await
        })
        .await?;
    bindings.extend(cluster_scoped.items);
    // Kairship's own roles, propagated to every member, go with the cluster.
    let kairships = |b: &DynamicObject| {
        let claim = kairship_wire::policy_claim::CPP_NAME;
        [&b.metadata.annotations, &b.metadata.labels]
            .into_iter()
            .flatten()
            .any(|m| m.get(claim).map(String::as_str) == Some(member_access::POLICY))
    };
    let mut out: Vec<String> = bindings
        .iter()
        .filter(|b| !kairships(b))
        .filter(|b| {
            b.data
                .pointer("/spec/clusters")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["name"] == cluster))
        })
        .map(|b| {
            let r = &b.data["spec"]["resource"];
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            match s("namespace").as_str() {
                "" => format!("{}/{}", s("kind"), s("name")),
                ns => format!("{ns}/{}/{}", s("kind"), s("name")),
            }
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

fn named_few(names: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

pub async fn remove(
    on: &OnInstance,
    req: proto::RemoveClusterRequest,
    networks: &crate::member_networks::MemberNetworks,
) -> Result<proto::RemoveClusterResponse, ApiError> {
    let name = req.name.as_str();
    check_cluster_name(name)?;
    let wait = match req.wait_seconds {
        0 => Duration::from_secs(60),
        s @ 1..=300 => Duration::from_secs(s as u64),
        s => {
            return Err(ApiError::invalid(
                "wait_seconds",
                format!("{s} is not between 1 and 300"),
            ))
        }
    };
    // Reached first, so a wrong kubeconfig fails before anything is removed.
    let member = match req.kubeconfig.is_empty() {
        true => None,
        false => {
            Some(Member::connect("kubeconfig", (&req.kubeconfig, &req.context), networks).await?)
        }
    };
    let live = objects::get_live(on, Kind::Cluster, None, name).await?;
    if live.data.pointer("/spec/syncMode").and_then(Value::as_str) == Some("Pull") {
        return Err(ApiError::FailedPrecondition(format!(
            "cluster {name:?} is a Pull mode member: unregister it with its karmada-agent (karmadactl unregister)"
        )));
    }
    let workloads = propagated_to(on, name).await?;
    if !workloads.is_empty() && !req.force {
        return Err(ApiError::FailedPrecondition(format!(
            "cluster {name:?} still runs {} propagated workload(s): {}; move them first, or remove with force (Karmada moves them where their policies allow)",
            workloads.len(),
            named_few(&workloads)
        )));
    }
    let mut not_moved = Vec::new();
    if !workloads.is_empty() {
        taint_removing(on, name, &live).await?;
        let deadline = Instant::now() + wait;
        loop {
            not_moved = propagated_to(on, name).await?;
            if not_moved.is_empty() || Instant::now() > deadline {
                break;
            }
            tracing::info!(
                instance = on.instance(),
                cluster = name,
                left = not_moved.len(),
                "waiting for Karmada to move workloads off the cluster"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    objects::delete(on, Kind::Cluster, None, name).await?;
    wait_gone(on, name).await?;
    let member_cleaned = match &member {
        Some(m) => clean_member(m, name).await?,
        None => Vec::new(),
    };
    Ok(proto::RemoveClusterResponse {
        workloads,
        not_moved,
        member_cleaned,
    })
}

/// NoExecute, so Karmada's taint manager evicts what does not tolerate it and its
/// scheduler places nothing new there.
async fn taint_removing(on: &OnInstance, name: &str, live: &DynamicObject) -> Result<(), ApiError> {
    let mut taints: Vec<Value> = live
        .data
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if taints.iter().any(|t| t["key"] == REMOVING_TAINT) {
        return Ok(());
    }
    taints.push(json!({"key": REMOVING_TAINT, "effect": "NoExecute"}));
    let patch = json!({
        "metadata": {"resourceVersion": live.metadata.resource_version},
        "spec": {"taints": taints},
    });
    objects::merge_patch(on, Kind::Cluster, None, name, &patch).await?;
    Ok(())
}

/// Until the Cluster is gone: Karmada's cluster controller removes its execution
/// namespace (and so what the Works put on the member) before letting it go.
async fn wait_gone(on: &OnInstance, name: &str) -> Result<(), ApiError> {
    let deadline = Instant::now() + DELETE_WAIT;
    loop {
        match objects::get_live(on, Kind::Cluster, None, name).await {
            Err(ApiError::NotFound(_)) | Err(ApiError::Missing(_)) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) if Instant::now() > deadline => {
                return Err(ApiError::DeadlineExceeded(format!(
                    "cluster {name:?} is still being deleted after {DELETE_WAIT:?}: Karmada's cluster controller has not finished removing its execution namespace karmada-es-{name}; the member was not cleaned"
                )))
            }
            Ok(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// What the join created on the member, removed (`karmadactl unjoin`'s list); what is
/// already gone is skipped.
async fn clean_member(member: &Member, name: &str) -> Result<Vec<String>, ApiError> {
    let c = &member.client;
    let role = cluster_role(name);
    let account = service_account(name);
    let dp = DeleteParams::default();
    let mut cleaned = Vec::new();
    let crb: Api<ClusterRoleBinding> = Api::all(c.clone());
    let cr: Api<ClusterRole> = Api::all(c.clone());
    let sa: Api<ServiceAccount> = Api::namespaced(c.clone(), CLUSTER_NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(c.clone(), CLUSTER_NAMESPACE);
    delete_noting(
        member,
        &crb,
        &role,
        format!("ClusterRoleBinding {role}"),
        &mut cleaned,
    )
    .await?;
    delete_noting(
        member,
        &cr,
        &role,
        format!("ClusterRole {role}"),
        &mut cleaned,
    )
    .await?;
    let sa_what = format!("ServiceAccount {CLUSTER_NAMESPACE}/{account}");
    delete_noting(member, &sa, &account, sa_what, &mut cleaned).await?;
    let secret_what = format!("Secret {CLUSTER_NAMESPACE}/{account}");
    delete_noting(member, &secrets, &account, secret_what, &mut cleaned).await?;
    // The namespace (with the impersonator) only when Karmada's own and nothing else of
    // Karmada's is left in it (another instance may have joined the member too).
    let ns_api: Api<Namespace> = Api::all(c.clone());
    let ns = member
        .call_unless_missing(
            "get namespace karmada-cluster",
            ns_api.get(CLUSTER_NAMESPACE),
        )
        .await?;
    let ours = ns.as_ref().is_some_and(|n| {
        n.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SYSTEM_LABEL.0))
            .is_some_and(|v| v == SYSTEM_LABEL.1)
    });
    if ours {
        let left = member
            .call(
                "list serviceaccounts in karmada-cluster",
                sa.list(&Default::default()),
            )
            .await?;
        let others = left.items.iter().any(|a| {
            let n = a.metadata.name.as_deref().unwrap_or_default();
            n.starts_with("karmada-") && n != IMPERSONATOR
        });
        if !others {
            member
                .call(
                    "delete namespace karmada-cluster",
                    ns_api.delete(CLUSTER_NAMESPACE, &dp),
                )
                .await?;
            cleaned.push(format!("Namespace {CLUSTER_NAMESPACE}"));
        }
    }
    Ok(cleaned)
}

/// Deletes `name` through `api` on the member, noting `what` in `cleaned` unless it was
/// gone already.
async fn delete_noting<K>(
    member: &Member,
    api: &Api<K>,
    name: &str,
    what: String,
    cleaned: &mut Vec<String>,
) -> Result<(), ApiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let call = format!("delete {what}");
    if member
        .call_unless_missing(&call, api.delete(name, &DeleteParams::default()))
        .await?
        .is_some()
    {
        cleaned.push(what);
    }
    Ok(())
}
