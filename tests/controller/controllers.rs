//! The per-instance controllers as one table: any of them switched off by `--controllers`
//! does nothing while the others run, each shows in its actor's view, and they are
//! level-triggered: what one keeps in place and someone deletes or changes by hand is put
//! back within `--controller-resync-secs`.

use std::time::Duration;

use kairship::actors::instance::InstanceMsg;
use kairship::actors::tree::Tree;
use kairship::context::events;
use kairship::controllers::member_access;
use kairship::controllers::Selection;
use kairship::crd::{InstanceRegistration, Phase};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::common::eventually;
use crate::harness::{fast_settings, Env};

fn policies(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "policy.karmada.io".into(),
        version: "v1alpha1".into(),
        api_version: "policy.karmada.io/v1alpha1".into(),
        kind: "ClusterPropagationPolicy".into(),
        plural: "clusterpropagationpolicies".into(),
    };
    Api::all_with(client, &ar)
}

async fn policy_there(on_instance: &Api<DynamicObject>, what: &str) -> DynamicObject {
    eventually(Duration::from_secs(10), what, || async {
        on_instance
            .get_opt(member_access::POLICY)
            .await
            .ok()
            .flatten()
    })
    .await
}

async fn view(tree: &Tree, name: &str) -> Option<kairship::actors::instance::InstanceView> {
    let actor = tree.instance(name).await.ok()??;
    ractor::call_t!(actor, InstanceMsg::View, 2000).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_switched_off_does_nothing_while_the_others_run() {
    let env = Env::start(1).await;
    let settings = kairship::context::Settings {
        controllers_off: Selection::parse(&["*,-registration"])
            .expect("selection")
            .off(),
        ..fast_settings()
    };
    let tree = Tree::start(env.host.clone(), None, "solo", settings)
        .await
        .expect("tree starts");
    env.create_external("karmada-1").await;
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    // Another controller ran: its policy is on the instance, and the view says so.
    let on_instance = policies(env.sim.client("karmada-1").await);
    policy_there(&on_instance, "the member-access policy").await;
    let v = eventually(
        Duration::from_secs(10),
        "member-access succeeded in the view",
        || async {
            view(&tree, "karmada-1").await.filter(|v| {
                v.controllers
                    .iter()
                    .any(|c| c.name == "member-access" && c.succeeded_ago.is_some())
            })
        },
    )
    .await;
    let names: Vec<_> = v.controllers.iter().map(|c| c.name).collect();
    assert!(!names.contains(&"registration"), "{names:?}");
    assert!(
        names.contains(&"components") && names.contains(&"scheduled-backups"),
        "{names:?}"
    );
    // Still none once member access has resynced (1 s apart in these settings), by when
    // registration would have run several times.
    let first = v
        .controllers
        .iter()
        .find(|c| c.name == "member-access")
        .and_then(|c| c.succeeded_ago)
        .expect("member access succeeded");
    let since = std::time::Instant::now() - first;
    eventually(
        Duration::from_secs(10),
        "member access resynced twice",
        || async {
            let again = view(&tree, "karmada-1").await?;
            let ago = again
                .controllers
                .iter()
                .find(|c| c.name == "member-access")
                .and_then(|c| c.succeeded_ago)?;
            (std::time::Instant::now() - ago > since + Duration::from_secs(2)).then_some(())
        },
    )
    .await;
    let reg = Api::<InstanceRegistration>::all(env.host.clone());
    assert!(
        reg.get_opt("karmada-1").await.expect("read").is_none(),
        "registration is switched off"
    );
    tree.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_controller_keeps_in_place_comes_back_after_a_hand_deletes_or_changes_it() {
    let env = Env::start(1).await;
    let tree = env.start_tree(None, "solo").await;
    env.create_external("karmada-1").await;
    env.wait_phase("karmada-1", Phase::Running, Duration::from_secs(20))
        .await;
    let reg = Api::<InstanceRegistration>::all(env.host.clone());
    let first = eventually(Duration::from_secs(10), "registration", || async {
        reg.get_opt("karmada-1").await.ok().flatten()
    })
    .await;

    reg.delete("karmada-1", &DeleteParams::default())
        .await
        .expect("delete registration");
    let again = eventually(Duration::from_secs(10), "registration back", || async {
        reg.get_opt("karmada-1")
            .await
            .ok()
            .flatten()
            .filter(|r| r.metadata.uid != first.metadata.uid)
    })
    .await;
    assert_eq!(again.spec, first.spec);

    let hand = json!({"spec": {"apiEndpoint": "https://elsewhere.example.com"}});
    reg.patch("karmada-1", &PatchParams::default(), &Patch::Merge(&hand))
        .await
        .expect("change registration");
    eventually(Duration::from_secs(10), "registration repaired", || async {
        reg.get_opt("karmada-1")
            .await
            .ok()
            .flatten()
            .filter(|r| r.spec == first.spec)
    })
    .await;

    let on_instance = policies(env.sim.client("karmada-1").await);
    policy_there(&on_instance, "the member-access policy").await;
    on_instance
        .delete(member_access::POLICY, &DeleteParams::default())
        .await
        .expect("delete policy");
    policy_there(&on_instance, "the policy back").await;
    tree.shutdown().await;
}

/// The phase events the host holds for `instance`, oldest first: (type, reason, message).
async fn phase_events(host: &kube::Client, instance: &str) -> Vec<(String, String, String)> {
    let api: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(host.clone(), events::NAMESPACE);
    let mut found: Vec<_> = api
        .list(&kube::api::ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("Instance")
                && e.involved_object.name.as_deref() == Some(instance)
                && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(events::COMPONENT)
        })
        .collect();
    found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    found
        .into_iter()
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_change_is_an_event_on_the_instance() {
    let (env, tree) = Env::running(2).await;
    // Reaching Running at start is the baseline, not news.
    assert!(phase_events(&env.host, "karmada-1").await.is_empty());
    env.take_down("karmada-1").await;
    let down = eventually(Duration::from_secs(10), "the Unreachable event", || async {
        let e = phase_events(&env.host, "karmada-1").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    let (type_, reason, message) = &down[0];
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("Warning", "Unreachable")
    );
    assert!(message.starts_with("Running to Unreachable: "), "{message}");
    env.sim.clear_fault("karmada-1").await;
    let back = eventually(Duration::from_secs(20), "the Running event", || async {
        let e = phase_events(&env.host, "karmada-1").await;
        e.last().filter(|l| l.1 == "Running").cloned()
    })
    .await;
    assert_eq!(back.0, "Normal");
    assert!(
        phase_events(&env.host, "karmada-2").await.is_empty(),
        "karmada-2 did not change"
    );
    tree.shutdown().await;
}
