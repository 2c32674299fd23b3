//! Removing member clusters, as `karmadactl unjoin` does: refused while workloads are
//! propagated to the cluster, naming them; forced, the cluster is tainted NoExecute so
//! Karmada moves them (bounded), the Cluster is deleted once Karmada has emptied its
//! execution namespace, and, given the member's kubeconfig, what the join created there
//! is removed. A Pull mode member goes as `karmadactl unregister` takes it: its Works are
//! deleted first and its agent removes what they put on it, then the Cluster and the
//! agent's RBAC in the instance go, and, given the member's kubeconfig, the agent itself
//! (`cluster_register`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::{json, Value};

use super::cluster_join::{
    check_cluster_name, cluster_role, service_account, CLUSTER_NAMESPACE, IMPERSONATOR,
    SYSTEM_LABEL,
};
use super::cluster_register::{self, delete_on};
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
    let pull = live.data.pointer("/spec/syncMode").and_then(Value::as_str) == Some("Pull");
    // Checked before anything is removed: the kubeconfig reaches this very member, and a
    // Pull member's agent there is this cluster's (a member may serve several).
    let mut agent_elsewhere = None;
    if let Some(m) = &member {
        same_member(m, name, &live).await?;
        if pull {
            agent_elsewhere = cluster_register::agent_cluster(m)
                .await?
                .filter(|registers| registers != name);
        }
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
    // A Pull member is tainted even when idle: Kairship's own roles are propagated there
    // too, and Karmada would make their Works again as fast as they are drained.
    if !workloads.is_empty() || pull {
        taint_removing(on, name, &live).await?;
    }
    if !workloads.is_empty() {
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
    if pull {
        let stuck = cluster_register::drain_works(on, name).await?;
        if !stuck.is_empty() {
            tracing::warn!(instance = on.instance(), cluster = name, works = ?stuck, "the agent did not release every Work in time; deleting the cluster anyway");
        }
    }
    objects::delete(on, Kind::Cluster, None, name).await?;
    wait_gone(on, name, pull).await?;
    let instance_cleaned = match pull {
        true => cluster_register::remove_agent_rbac(on, name).await?,
        false => Vec::new(),
    };
    let mut member_cleaned = Vec::new();
    let mut member_left = Vec::new();
    match &member {
        Some(m) => {
            if pull && agent_elsewhere.is_none() {
                member_cleaned.extend(cluster_register::remove_agent(m).await?);
            }
            member_cleaned.extend(clean_member(m, name).await?);
        }
        None if pull => member_left = cluster_register::agent_left(),
        None => {}
    }
    if let Some(other) = agent_elsewhere {
        tracing::info!(instance = on.instance(), cluster = name, agent_registers = %other, "the member's karmada-agent is another cluster's: left running");
    }
    Ok(proto::RemoveClusterResponse {
        workloads,
        not_moved,
        member_cleaned,
        instance_cleaned,
        member_left,
    })
}

/// Refuses a kubeconfig that reaches another cluster than the one `live` records (its
/// kube-system uid is the Cluster's `spec.id`), so nothing is removed from the wrong one.
async fn same_member(member: &Member, name: &str, live: &DynamicObject) -> Result<(), ApiError> {
    let recorded = live
        .data
        .pointer("/spec/id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = member.cluster_id().await?;
    if !recorded.is_empty() && !id.is_empty() && id != recorded {
        return Err(ApiError::invalid(
            "kubeconfig",
            format!(
                "the cluster at {} is not member {name:?} (its kube-system uid {id} is not the Cluster's id {recorded}); nothing was removed",
                member.url
            ),
        ));
    }
    Ok(())
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
/// namespace (and so what the Works put on the member) before letting it go; for a Pull
/// member its karmada-agent removes what the Works put there.
async fn wait_gone(on: &OnInstance, name: &str, pull: bool) -> Result<(), ApiError> {
    let who = match pull {
        true => "its karmada-agent has not removed the Works of its execution namespace (is the agent running?)",
        false => "Karmada's cluster controller has not finished removing its execution namespace",
    };
    let deadline = Instant::now() + DELETE_WAIT;
    loop {
        match objects::get_live(on, Kind::Cluster, None, name).await {
            Err(ApiError::NotFound(_)) | Err(ApiError::Missing(_)) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) if Instant::now() > deadline => {
                return Err(ApiError::DeadlineExceeded(format!(
                    "cluster {name:?} is still being deleted after {DELETE_WAIT:?}: {who} (karmada-es-{name}); the member was not cleaned"
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
    let mut noting = |deleted: bool, what: String| {
        if deleted {
            cleaned.push(what);
        }
    };
    let what = format!("ClusterRoleBinding {role}");
    noting(delete_on(member, &crb, &role, &what).await?, what);
    let what = format!("ClusterRole {role}");
    noting(delete_on(member, &cr, &role, &what).await?, what);
    let what = format!("ServiceAccount {CLUSTER_NAMESPACE}/{account}");
    noting(delete_on(member, &sa, &account, &what).await?, what);
    let what = format!("Secret {CLUSTER_NAMESPACE}/{account}");
    noting(delete_on(member, &secrets, &account, &what).await?, what);
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
