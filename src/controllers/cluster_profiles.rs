//! The cluster inventory: each member cluster of the instance as a `ClusterProfile` (SIG
//! Multicluster's `multicluster.x-k8s.io/v1alpha1`, which Argo CD, OCM and MultiKueue
//! read) in the host's managed namespace, named `<instance>-<cluster>`, labelled with its
//! instance and its manager, its status from the Cluster cache: health, version,
//! capacity, region. Profiles of clusters that left are deleted. A member joined to more
//! than one instance (one `spec.id`, its kube-system uid, as karmadactl records it) is
//! flagged on each of its profiles (`SharedMember`) and in each instance's
//! `MembersShared` condition. Leader-only; it looks again when what it would publish
//! changes, and at the resync.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{json, Value};

use super::{Action, Controller, ControllerError, Next, Observed, Report, Scope};
use crate::context::Context;
use crate::crd::cluster_profile::{
    ClusterManager, ClusterProfile, ClusterProfileSpec, ClusterProfileStatus, ClusterVersion,
    Property,
};
use crate::crd::Condition;
use crate::host::error::{bounded, fenced, gone_is_fine, HostError};

/// The manager every profile names (and its `x-k8s.io/cluster-manager` label).
pub const MANAGER: &str = "kairship";
pub const MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";
/// The instance a profile's cluster is a member of.
pub const INSTANCE_LABEL: &str = "kairship.io/instance";
/// The member's identity (a digest of its `spec.id`), shared by its profiles in every
/// instance it is joined to.
pub const MEMBER_LABEL: &str = "kairship.io/member-id";
/// On a profile: the member is also joined to another instance.
pub const SHARED: &str = "SharedMember";
/// On the Instance: some of its members are joined to other instances too.
pub const CONDITION: &str = "MembersShared";

/// One member cluster as the profile shows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    pub cluster: String,
    /// A digest of the Cluster's `spec.id`, when Karmada recorded one.
    pub id: Option<String>,
    pub ready: Option<bool>,
    pub version: String,
    pub properties: Vec<(String, String)>,
}

/// A Cluster object (JSON) as a member.
pub fn member(instance: &str, c: &Value) -> Member {
    let s = |p: &str| c.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let ready = c["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|x| x["type"] == "Ready")
        .and_then(|x| x["status"].as_str())
        .map(|x| x == "True");
    let mut properties = vec![
        ("kairship.io/instance".to_string(), instance.to_string()),
        (
            "kairship.io/karmada-cluster".to_string(),
            s("/metadata/name").to_string(),
        ),
    ];
    for (name, path) in [
        ("kairship.io/sync-mode", "/spec/syncMode"),
        ("kairship.io/provider", "/spec/provider"),
        ("kairship.io/region", "/spec/region"),
        ("kairship.io/zone", "/spec/zone"),
        ("cpu.allocatable", "/status/resourceSummary/allocatable/cpu"),
        (
            "memory.allocatable",
            "/status/resourceSummary/allocatable/memory",
        ),
        (
            "pods.allocatable",
            "/status/resourceSummary/allocatable/pods",
        ),
        ("nodes.ready", "/status/nodeSummary/readyNum"),
        ("nodes.total", "/status/nodeSummary/totalNum"),
    ] {
        let v = match c.pointer(path) {
            Some(Value::String(x)) => x.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        properties.push((name.to_string(), v));
    }
    Member {
        cluster: s("/metadata/name").to_string(),
        id: Some(s("/spec/id")).filter(|i| !i.is_empty()).map(digest),
        ready,
        version: s("/status/kubernetesVersion").to_string(),
        properties,
    }
}

/// A label-safe digest of a member's id.
fn digest(id: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    d.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The profile's name: instances may each have a `member1`.
pub fn profile_name(instance: &str, cluster: &str) -> String {
    format!("{instance}-{cluster}")
}

/// The profile of `m` (metadata and spec; the status is written apart).
pub fn profile(instance: &str, namespace: &str, m: &Member) -> ClusterProfile {
    let mut p = ClusterProfile::new(
        &profile_name(instance, &m.cluster),
        ClusterProfileSpec {
            display_name: m.cluster.clone(),
            cluster_manager: ClusterManager {
                name: MANAGER.into(),
            },
        },
    );
    p.metadata.namespace = Some(namespace.into());
    let mut labels = BTreeMap::from([
        (MANAGER_LABEL.to_string(), MANAGER.to_string()),
        (INSTANCE_LABEL.to_string(), instance.to_string()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "kairship".to_string(),
        ),
    ]);
    if let Some(id) = &m.id {
        labels.insert(MEMBER_LABEL.into(), id.clone());
    }
    p.metadata.labels = Some(labels);
    p
}

/// A condition, keeping the transition time `before` gave it when its status holds.
fn condition(
    before: &[Condition],
    type_: &str,
    ok: Option<bool>,
    reason: &str,
    message: String,
    now: &str,
) -> Condition {
    crate::status::condition(before, type_, ok, reason, &message, None, now)
}

/// The `SharedMember` condition for a member also joined to `others` (instance names).
fn shared(before: &[Condition], others: &BTreeSet<String>, now: &str) -> Condition {
    match others.is_empty() {
        true => condition(
            before,
            SHARED,
            Some(false),
            "NotShared",
            "a member of this instance only".into(),
            now,
        ),
        false => {
            let names: Vec<&str> = others.iter().map(String::as_str).collect();
            condition(
                before,
                SHARED,
                Some(true),
                "JoinedToSeveralInstances",
                format!("also a member of instance {}", names.join(", ")),
                now,
            )
        }
    }
}

/// The profile's status for `m`, also joined to `others`.
pub fn status(
    m: &Member,
    others: &BTreeSet<String>,
    before: &[Condition],
    now: &str,
) -> ClusterProfileStatus {
    let healthy = match m.ready {
        Some(true) => (
            Some(true),
            "ClusterReady",
            "the member's Ready condition is True".to_string(),
        ),
        Some(false) => (
            Some(false),
            "ClusterNotReady",
            "the member's Ready condition is False".to_string(),
        ),
        None => (
            None,
            "ClusterReadyUnknown",
            "the member has not reported Ready yet".to_string(),
        ),
    };
    ClusterProfileStatus {
        conditions: vec![
            condition(
                before,
                "ControlPlaneHealthy",
                healthy.0,
                healthy.1,
                healthy.2,
                now,
            ),
            condition(
                before,
                "Joined",
                Some(true),
                "JoinedToKarmada",
                "a member cluster of its Karmada instance".into(),
                now,
            ),
            shared(before, others, now),
        ],
        version: (!m.version.is_empty()).then(|| ClusterVersion {
            kubernetes: m.version.clone(),
        }),
        properties: m
            .properties
            .iter()
            .map(|(name, value)| Property {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
    }
}

/// What a pass found: for each shared member, the other instances it is a member of.
pub struct Published {
    shared: BTreeMap<String, BTreeSet<String>>,
}

/// A Cluster's name and the version of it last seen.
type Version = (String, u64);

#[derive(Default)]
pub struct ClusterProfiles {
    /// What the last pass published (`looked_at`), and what the pass under way will.
    published: Option<u64>,
    publishing: Option<u64>,
    resync: std::time::Duration,
    /// The members as last decoded, with the Clusters' names and versions they came from:
    /// `watches` runs at every tick, and a Cluster is decoded again only when it changed.
    decoded: parking_lot::Mutex<(Vec<Version>, Vec<Member>)>,
}

/// The members the Cluster cache holds now, in name order.
impl ClusterProfiles {
    /// The members the Cluster cache holds now, in name order.
    fn members_now(&self, scope: &Scope<'_>) -> Option<Vec<Member>> {
        let clusters = scope.clusters?.state();
        let versions: Vec<Version> = clusters
            .iter()
            .map(|c| (c.name().to_string(), c.resource_version()))
            .collect();
        let mut memo = self.decoded.lock();
        if memo.0 != versions {
            let mut out: Vec<Member> = clusters
                .iter()
                .filter_map(|c| serde_json::from_slice::<Value>(c.json()).ok())
                .map(|c| member(scope.name, &c))
                .collect();
            out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
            *memo = (versions, out);
        }
        Some(memo.1.clone())
    }
}

impl Controller for ClusterProfiles {
    const NAME: &'static str = "cluster-profiles";
    type Found = Published;

    fn reconcile(
        &mut self,
        scope: &Scope<'_>,
        observed: &Observed,
        _: &mut Report,
    ) -> Next<Published> {
        // Only from a synced cache: an empty one would delete every profile.
        if !observed.lifecycle.synced() {
            return Next::Idle;
        }
        let Some(members) = self.members_now(scope) else {
            return Next::Idle;
        };
        self.resync = scope.ctx.settings.controller_resync;
        let seen = looked_at(scope, Some(&members));
        if self.published == Some(seen) && !scope.requeued() {
            return Next::Idle;
        }
        self.publishing = Some(seen);
        let peers = peers_now(scope, &members);
        let host = scope.ctx.host.clone();
        let namespace = scope.ctx.settings.managed_namespace.clone();
        let instance = scope.name.to_string();
        let timeout = scope.ctx.settings.host_call_timeout;
        Next::Start(Box::pin(async move {
            ControllerError::host_call(
                "publishing the member clusters as ClusterProfiles",
                timeout * 4,
                publish(host, &namespace, &instance, members, peers),
            )
            .await
        }))
    }

    fn record(&mut self, found: Published, report: &mut Report) -> Action {
        // Said only while true: an instance sharing nothing has nothing to say.
        match found.shared.is_empty() {
            true => report.unsay(CONDITION),
            false => {
                let said: Vec<String> = found
                    .shared
                    .iter()
                    // Counted, not named: the condition is read by the instance's viewers,
                    // who may not view the others (status.sharedMembers names them, per
                    // caller, through the API).
                    .map(|(cluster, others)| {
                        let n = others.len();
                        format!(
                            "{cluster} (also in {n} other instance{})",
                            if n == 1 { "" } else { "s" }
                        )
                    })
                    .collect();
                report.say(
                    CONDITION,
                    Some(true),
                    "JoinedToSeveralInstances",
                    format!("members joined to other instances too: {}", said.join("; ")),
                )
            }
        }
        report.shared_members = Some(
            found
                .shared
                .iter()
                .map(|(cluster, others)| crate::crd::SharedMember {
                    cluster: cluster.clone(),
                    instances: others.iter().cloned().collect(),
                })
                .collect(),
        );
        self.published = self.publishing.take();
        Action::requeue(self.resync)
    }

    /// What it would publish (a member joining, leaving, going NotReady), and which other
    /// instances hold its members (another instance joining one of them).
    fn watches(&self, scope: &Scope<'_>, _: &Observed, key: &mut dyn Hasher) {
        key.write_u64(looked_at(scope, self.members_now(scope).as_deref()));
    }
}

/// A digest of what a pass would publish: the members, and the other instances' profiles
/// of them (from the process's watch of the profiles' metadata: no call to the host).
fn looked_at(scope: &Scope<'_>, members: Option<&[Member]>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    members.hash(&mut h);
    for p in peers_now(scope, members.unwrap_or_default()) {
        (p.name, p.instance, p.id).hash(&mut h);
    }
    h.finish()
}

/// Another instance's profile of one of this instance's members (now or until this pass),
/// as the process's watch of the profiles' metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    name: String,
    instance: String,
    id: String,
}

/// The other instances' profiles of the members this instance has, or had a profile of
/// (a lookup per member in the process's index: no call to the host).
fn peers_now(scope: &Scope<'_>, members: &[Member]) -> Vec<Peer> {
    let index = &scope.ctx.cluster_profiles;
    let mut ids: BTreeSet<String> = index.ids_of(scope.name);
    ids.extend(members.iter().filter_map(|m| m.id.clone()));
    let mut out: Vec<Peer> = index
        .holding(&ids)
        .into_iter()
        .flat_map(|(id, held)| {
            held.into_iter()
                .filter(|h| h.instance != scope.name)
                .map(move |h| Peer {
                    name: h.name,
                    instance: h.instance,
                    id: id.clone(),
                })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Applies the profiles of `members` that differ from what the host holds, deletes those
/// of clusters that left, and sets `SharedMember` on the other instances' profiles of the
/// members this instance shares (or stopped sharing). Calls to the host scale with this
/// instance's members and the profiles that changed, not with the fleet.
async fn publish(
    host: kube::Client,
    namespace: &str,
    instance: &str,
    members: Vec<Member>,
    peers: Vec<Peer>,
) -> Result<Published, kube::Error> {
    let api: Api<ClusterProfile> = Api::namespaced(host, namespace);
    let ours = api
        .list(&ListParams::default().labels(&format!("{INSTANCE_LABEL}={instance}")))
        .await?
        .items;
    let now = jiff::Timestamp::now().to_string();
    let params = PatchParams::apply("kairship-cluster-profiles").force();
    let others = |id: &Option<String>| -> BTreeSet<String> {
        peers
            .iter()
            .filter(|p| Some(&p.id) == id.as_ref())
            .map(|p| p.instance.clone())
            .collect()
    };
    let mut flagged = BTreeMap::new();
    for m in &members {
        let want = profile(instance, namespace, m);
        let name = profile_name(instance, &m.cluster);
        let have = ours
            .iter()
            .find(|x| x.metadata.name.as_deref() == Some(&name));
        let labelled = |h: &ClusterProfile| {
            let l = h.metadata.labels.clone().unwrap_or_default();
            want.metadata
                .labels
                .iter()
                .flatten()
                .all(|(k, v)| l.get(k) == Some(v))
                && l.get(MEMBER_LABEL) == m.id.as_ref()
        };
        if !have.is_some_and(|h| h.spec == want.spec && labelled(h)) {
            api.patch(&name, &params, &Patch::Apply(&want)).await?;
        }
        let before = have
            .and_then(|x| x.status.as_ref())
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let others = others(&m.id);
        let st = status(m, &others, &before, &now);
        if have.and_then(|h| h.status.as_ref()) != Some(&st) {
            let body = json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile", "status": st});
            api.patch_status(&name, &params, &Patch::Apply(&body))
                .await?;
        }
        if !others.is_empty() {
            flagged.insert(m.cluster.clone(), others);
        }
    }
    // A cluster that left: its profile goes.
    let kept: BTreeSet<String> = members
        .iter()
        .map(|m| profile_name(instance, &m.cluster))
        .collect();
    for p in &ours {
        let name = p.metadata.name.clone().unwrap_or_default();
        if kept.contains(&name) {
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    // Another instance's profile of a member: its flag as it now stands.
    let our_ids: BTreeSet<&String> = members.iter().filter_map(|m| m.id.as_ref()).collect();
    for peer in &peers {
        let mut with: BTreeSet<String> = peers
            .iter()
            .filter(|q| q.id == peer.id && q.instance != peer.instance)
            .map(|q| q.instance.clone())
            .collect();
        if our_ids.contains(&peer.id) {
            with.insert(instance.to_string());
        }
        let Some(p) = api.get_opt(&peer.name).await? else {
            continue;
        };
        let conditions = p
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let flag = shared(&conditions, &with, &now);
        if conditions
            .iter()
            .any(|c| c.type_ == SHARED && c.status == flag.status && c.message == flag.message)
        {
            continue;
        }
        let mut next: Vec<Condition> = conditions
            .into_iter()
            .filter(|c| c.type_ != SHARED)
            .collect();
        next.push(flag);
        // Merge: the other instance's own fields stay as its controller wrote them.
        let body = json!({"metadata": {"resourceVersion": p.metadata.resource_version}, "status": {"conditions": next}});
        match api
            .patch_status(&peer.name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            // Written meanwhile by its own controller: its next pass decides.
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Published { shared: flagged })
}

/// The process's index of Kairship's profiles by member (their metadata: labels say the
/// rest).
pub fn watch(host: &kube::Client) -> crate::host::member_index::MemberIndex {
    crate::host::member_index::MemberIndex::start(
        host,
        &format!("{MANAGER_LABEL}={MANAGER}"),
        MEMBER_LABEL,
        INSTANCE_LABEL,
    )
}

/// Deletes a deleted instance's profiles (the manager's cleanup). Another instance's
/// profile of a member they shared is unflagged at that instance's next look.
pub async fn remove(ctx: &Context, instance: &str) -> Result<(), HostError> {
    let api: Api<ClusterProfile> =
        Api::namespaced(ctx.host.clone(), &ctx.settings.managed_namespace);
    let timeout = ctx.settings.request_timeout;
    let params = ListParams::default().labels(&format!("{INSTANCE_LABEL}={instance}"));
    let listed = bounded(
        format!("listing the ClusterProfiles of {instance}"),
        timeout,
        api.list(&params),
    )
    .await;
    let profiles = match listed {
        Ok(l) => l.items,
        // No ClusterProfile CRD in the host: nothing was published.
        Err(e) if e.code() == Some(404) => return Ok(()),
        Err(e) => return Err(e),
    };
    for p in profiles {
        let name = p.metadata.name.unwrap_or_default();
        let write = ctx
            .leadership
            .fenced(timeout, api.delete(&name, &DeleteParams::default()))
            .await;
        gone_is_fine(fenced(format!("deleting ClusterProfile {name}"), write).map(drop))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(name: &str, ready: &str, id: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"id": id, "syncMode": "Push", "region": "eu-west-1"},
            "status": {"kubernetesVersion": "v1.35.3",
                "conditions": [{"type": "Ready", "status": ready}],
                "resourceSummary": {"allocatable": {"cpu": "8", "memory": "32Gi"}},
                "nodeSummary": {"totalNum": 3, "readyNum": 3}}})
    }

    #[test]
    fn a_member_as_its_profile_says_it() {
        let m = member("team-a", &cluster("member1", "True", "uid-1"));
        let p = profile("team-a", "kairship-system", &m);
        assert_eq!(p.metadata.name.as_deref(), Some("team-a-member1"));
        let labels = p.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get(MANAGER_LABEL).map(String::as_str),
            Some("kairship")
        );
        assert_eq!(
            labels.get(INSTANCE_LABEL).map(String::as_str),
            Some("team-a")
        );
        assert_eq!(labels.get(MEMBER_LABEL), m.id.as_ref());
        assert_eq!(p.spec.cluster_manager.name, "kairship");
        let s = status(&m, &BTreeSet::new(), &[], "2026-11-29T00:00:00Z");
        assert_eq!(s.version.map(|v| v.kubernetes).as_deref(), Some("v1.35.3"));
        let c = |t: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == t)
                .map(|c| c.status.clone())
        };
        assert_eq!(c("ControlPlaneHealthy").as_deref(), Some("True"));
        assert_eq!(c(SHARED).as_deref(), Some("False"));
        let prop = |n: &str| {
            s.properties
                .iter()
                .find(|p| p.name == n)
                .map(|p| p.value.clone())
        };
        assert_eq!(prop("cpu.allocatable").as_deref(), Some("8"));
        assert_eq!(prop("nodes.ready").as_deref(), Some("3"));
        assert_eq!(prop("kairship.io/instance").as_deref(), Some("team-a"));
    }

    #[test]
    fn not_ready_and_shared_are_said_and_transition_times_kept() {
        let m = member("team-a", &cluster("member1", "False", "uid-1"));
        let before = status(
            &member("team-a", &cluster("member1", "True", "uid-1")),
            &BTreeSet::new(),
            &[],
            "T0",
        )
        .conditions;
        let others = BTreeSet::from(["team-b".to_string()]);
        let s = status(&m, &others, &before, "T1");
        let c = |t: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == t)
                .cloned()
                .expect(t)
        };
        assert_eq!(
            (
                c("ControlPlaneHealthy").status.as_str(),
                c("ControlPlaneHealthy").last_transition_time.as_str()
            ),
            ("False", "T1")
        );
        assert_eq!(
            (
                c("Joined").status.as_str(),
                c("Joined").last_transition_time.as_str()
            ),
            ("True", "T0")
        );
        assert_eq!(c(SHARED).status, "True");
        assert!(c(SHARED).message.contains("team-b"));
        // No id recorded: no identity, never taken for another instance's member.
        assert_eq!(member("team-a", &cluster("m", "True", "")).id, None);
        assert_eq!(
            member("a", &cluster("m", "True", "x")).id,
            member("b", &cluster("n", "True", "x")).id
        );
    }
}
