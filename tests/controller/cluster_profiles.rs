//! The cluster inventory on the simulated fleet: each instance's members published as
//! ClusterProfiles in the host, with their health, version and capacity; a member going
//! NotReady shows there; one that leaves has its profile deleted; a member joined to two
//! instances (one Karmada cluster ID in both) is flagged on both profiles and in both
//! Instances' MembersShared condition, and unflagged when it leaves one; a deleted
//! instance's profiles go with it.

use std::time::Duration;

use kairship::controllers::cluster_profiles::{CONDITION, INSTANCE_LABEL, SHARED};
use kairship::crd::cluster_profile::ClusterProfile;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::common::eventually;
use crate::harness::{Env, NS};

fn clusters(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "cluster.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "cluster.karmada.io/v1alpha1".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    };
    Api::all_with(client, &ar)
}

fn condition(p: &ClusterProfile, type_: &str) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.message.clone()))
}

fn property(p: &ClusterProfile, name: &str) -> Option<String> {
    p.status
        .as_ref()?
        .properties
        .iter()
        .find(|x| x.name == name)
        .map(|x| x.value.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_published_updated_flagged_when_shared_and_deleted_when_gone() {
    // No resync within the test: what one instance's controller learns of another's
    // members comes from the process's watch of the profiles.
    let env = Env::start(2).await;
    let settings = kairship::context::Settings {
        controller_resync: Duration::from_secs(600),
        ..crate::harness::fast_settings()
    };
    let tree = env.start_tree_with(settings, None, "solo").await;
    env.attach_all(2).await;
    let profiles: Api<ClusterProfile> = Api::namespaced(env.host.clone(), NS);
    let of = |instance: &'static str| {
        let profiles = profiles.clone();
        async move {
            profiles
                .list(&ListParams::default().labels(&format!("{INSTANCE_LABEL}={instance}")))
                .await
                .map(|l| l.items)
                .unwrap_or_default()
        }
    };
    let get = |name: &'static str| {
        let profiles = profiles.clone();
        async move { profiles.get_opt(name).await.ok().flatten() }
    };
    // Published, with what an inventory reader needs.
    let listed = eventually(
        Duration::from_secs(20),
        "both members of karmada-1 published",
        || async {
            let l = of("karmada-1").await;
            (l.len() == 2 && l.iter().all(|p| p.status.is_some())).then_some(l)
        },
    )
    .await;
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["karmada-1-member1", "karmada-1-member2"]);
    let m1 = get("karmada-1-member1").await.expect("profile");
    assert_eq!(m1.spec.cluster_manager.name, "kairship");
    assert_eq!(m1.spec.display_name, "member1");
    assert_eq!(
        condition(&m1, "ControlPlaneHealthy")
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
    assert_eq!(
        condition(&m1, SHARED).map(|c| c.0).as_deref(),
        Some("False")
    );
    assert!(property(&m1, "cpu.allocatable").is_some(), "{m1:?}");
    assert_eq!(
        property(&m1, "kairship.io/instance").as_deref(),
        Some("karmada-1")
    );
    assert_eq!(of("karmada-2").await.len(), 2, "karmada-2's own, apart");

    // NotReady on the member: the profile says so.
    let sim1 = env.sim.fleet.instance("karmada-1").expect("karmada-1");
    sim1.clusters.control(
        "member1",
        kairship_sim::clusters::ClusterControl {
            ready: Some(false),
            flapping: false,
        },
    );
    eventually(
        Duration::from_secs(20),
        "member1 unhealthy in its profile",
        || async {
            let p = get("karmada-1-member1").await?;
            (condition(&p, "ControlPlaneHealthy")?.0 == "False").then_some(())
        },
    )
    .await;

    // The same member joined to karmada-2 too (Karmada's cluster ID is the member's
    // kube-system uid): flagged on both profiles and both instances.
    let on1 = clusters(env.sim.client("karmada-1").await);
    let on2 = clusters(env.sim.client("karmada-2").await);
    let id = on1.get("member1").await.expect("member1").data["spec"]["id"].clone();
    assert!(
        id.as_str().is_some_and(|i| !i.is_empty()),
        "the simulator records an ID"
    );
    on2.patch(
        "member1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"id": id}})),
    )
    .await
    .expect("member1 of karmada-2 is the same member");
    for (name, other) in [
        ("karmada-1-member1", "karmada-2"),
        ("karmada-2-member1", "karmada-1"),
    ] {
        eventually(
            Duration::from_secs(20),
            &format!("{name} flagged shared"),
            || async {
                let p = get(name).await?;
                let (status, message) = condition(&p, SHARED)?;
                (status == "True" && message.contains(other)).then_some(())
            },
        )
        .await;
    }
    for instance in ["karmada-1", "karmada-2"] {
        eventually(
            Duration::from_secs(20),
            &format!("{instance} says MembersShared"),
            || async {
                let s = env.status(instance).await?;
                let said = s.conditions.iter().any(|c| {
                    c.type_ == CONDITION && c.status == "True" && c.message.contains("member1")
                });
                let listed = s.shared_members.iter().any(|m| {
                    m.cluster == "member1" && m.instances.len() == 1 && m.instances[0] != instance
                });
                (said && listed).then_some(())
            },
        )
        .await;
    }
    assert_eq!(
        get("karmada-1-member2")
            .await
            .and_then(|p| condition(&p, SHARED))
            .map(|c| c.0)
            .as_deref(),
        Some("False"),
        "member2 is karmada-1's alone"
    );

    // The member leaves karmada-2: its profile goes, and karmada-1's is no longer shared.
    on2.delete("member1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(
        Duration::from_secs(20),
        "karmada-2-member1 deleted",
        || async { get("karmada-2-member1").await.is_none().then_some(()) },
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "karmada-1-member1 no longer shared",
        || async {
            let p = get("karmada-1-member1").await?;
            (condition(&p, SHARED)?.0 == "False").then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "karmada-1 no longer says MembersShared",
        || async {
            let s = env.status("karmada-1").await?;
            (s.shared_members.is_empty() && !s.conditions.iter().any(|c| c.type_ == CONDITION))
                .then_some(())
        },
    )
    .await;

    // The instance deleted: its profiles go with it.
    env.instances()
        .delete("karmada-1", &DeleteParams::default())
        .await
        .expect("delete the instance");
    eventually(
        Duration::from_secs(30),
        "karmada-1's profiles deleted",
        || async { of("karmada-1").await.is_empty().then_some(()) },
    )
    .await;
    assert_eq!(
        of("karmada-2").await.len(),
        1,
        "karmada-2's left member stays"
    );
    tree.shutdown().await;
}
