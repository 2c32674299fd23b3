//! A managed instance's high-availability settings through the API: replicas per
//! component set at creation and changed by UpdateInstance (the others kept), written into
//! the Karmada object in karmada-operator's terms, carried out by the simulated operator
//! (the component lists that many pods), echoed back; bad counts refused naming the field.

use std::time::Duration;

use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use kube::api::{Api as KubeApi, DynamicObject};
use tonic::Code;

use crate::common::eventually;
use crate::harness::NS;
use crate::server::Api;

fn managed(name: &str, replicas: &[(&str, i32)]) -> Instance {
    let mut i = crate::server::managed_instance(name);
    if let Some(s) = i.spec.as_mut() {
        s.component_replicas = replicas.iter().map(|(c, n)| (c.to_string(), *n)).collect();
    }
    i
}

/// Each component's (replicas, ready replicas, pods) as ListComponents reports them.
async fn listed(
    c: &InstanceServiceClient<tonic::transport::Channel>,
    name: &str,
) -> Option<Vec<(String, i32, i32, usize)>> {
    let list = c
        .clone()
        .list_components(ListComponentsRequest { name: name.into() })
        .await
        .ok()?
        .into_inner();
    Some(
        list.components
            .into_iter()
            .map(|x| (x.name, x.replicas, x.ready_replicas, x.pods.len()))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_replicas_are_set_changed_and_refused_by_name() {
    let api = Api::start(0).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    for (bad, why) in [
        (("etcd", 2), "odd count"),
        (("karmadaScheduler", 0), "from 1 to 10"),
        (("karmadaScheduler", 11), "from 1 to 10"),
        (("scheduler", 2), "not a karmada-operator component"),
    ] {
        let refused = c
            .clone()
            .create_instance(CreateInstanceRequest {
                instance: Some(managed("team-ha", &[bad])),
            })
            .await
            .expect_err("a bad replica count");
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}");
        let field = format!("instance.spec.component_replicas[{:?}]", bad.0);
        assert!(
            refused.message().contains(&field) && refused.message().contains(why),
            "{bad:?}: {}",
            refused.message()
        );
    }

    c.clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(managed("team-ha", &[("karmadaScheduler", 2), ("etcd", 3)])),
        })
        .await
        .expect("created with replicas");
    let want = |scheduler: i32, etcd: i32| {
        move |l: &Vec<(String, i32, i32, usize)>| {
            let of = |n: &str| l.iter().find(|x| x.0 == n).map(|x| (x.1, x.2, x.3));
            of("karmada-scheduler") == Some((scheduler, scheduler, scheduler as usize))
                && of("etcd") == Some((etcd, etcd, etcd as usize))
                && of("karmada-apiserver") == Some((1, 1, 1))
        }
    };
    eventually(
        Duration::from_secs(30),
        "2 schedulers and 3 etcd members",
        || async { listed(&c, "team-ha").await.filter(want(2, 3)) },
    )
    .await;

    // An update names one component; the other keeps its replicas.
    c.clone()
        .update_instance(UpdateInstanceRequest {
            instance: Some(managed("team-ha", &[("karmadaScheduler", 3)])),
        })
        .await
        .expect("scaled");
    eventually(
        Duration::from_secs(30),
        "3 schedulers, etcd kept",
        || async { listed(&c, "team-ha").await.filter(want(3, 3)) },
    )
    .await;
    let got = c
        .clone()
        .get_instance(GetInstanceRequest {
            name: "team-ha".into(),
        })
        .await
        .expect("instance")
        .into_inner();
    let spec = got.spec.expect("spec");
    assert_eq!(
        spec.component_replicas,
        [("etcd".to_string(), 3), ("karmadaScheduler".to_string(), 3)].into()
    );
    // Each listed component names its setting, for the console's Scale.
    let components = c
        .clone()
        .list_components(ListComponentsRequest {
            name: "team-ha".into(),
        })
        .await
        .expect("components")
        .into_inner()
        .components;
    let settings: Vec<(&str, &str)> = components
        .iter()
        .map(|x| (x.name.as_str(), x.setting.as_str()))
        .collect();
    assert!(
        settings.contains(&("karmada-scheduler", "karmadaScheduler")),
        "{settings:?}"
    );
    assert!(settings.contains(&("etcd", "etcd")), "{settings:?}");
    // In karmada-operator's terms: etcd's under `local`.
    let karmadas: KubeApi<DynamicObject> = KubeApi::namespaced_with(
        api.env.host.clone(),
        NS,
        &kairship::host::karmada::karmada_resource(),
    );
    let k = karmadas.get("team-ha").await.expect("Karmada object");
    assert_eq!(k.data["spec"]["components"]["etcd"]["local"]["replicas"], 3);
    assert_eq!(
        k.data["spec"]["components"]["karmadaScheduler"]["replicas"],
        3
    );
}
