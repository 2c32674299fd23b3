//! A managed instance's Karmada version through the API: set at creation, changed by
//! UpdateInstance (which merges, so the rest of the Karmada spec survives), carried out by
//! the simulated karmada-operator, and reported back as the instance's karmadaVersion.

use std::time::Duration;

use kairship::crd::Phase;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::*;
use kube::api::{Api as KubeApi, DynamicObject, Patch, PatchParams};
use serde_json::json;
use tonic::Code;

use crate::common::eventually;
use crate::harness::NS;
use crate::server::Api;

fn managed(name: &str, version: &str) -> Instance {
    let mut i = crate::server::managed_instance(name);
    if let Some(s) = i.spec.as_mut() {
        s.karmada_version = version.into();
    }
    i
}

/// The release `name` runs, once it is Running.
pub(crate) async fn status_version(
    c: &InstanceServiceClient<tonic::transport::Channel>,
    name: &str,
) -> Option<String> {
    let i = c
        .clone()
        .get_instance(GetInstanceRequest { name: name.into() })
        .await
        .ok()?
        .into_inner();
    let s = i.status?;
    (s.phase == "Running").then_some(s.karmada_version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_instance_upgrade_end_to_end() {
    let api = Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let bad = c
        .clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(managed("team-u", "latest")),
        })
        .await
        .expect_err("a bad version");
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message().contains("karmada_version"),
        "{}",
        bad.message()
    );

    // What an air-gapped cluster needs, each bad value refused naming its field.
    let air_gapped = |f: &dyn Fn(&mut InstanceSpec)| {
        let mut i = managed("team-u", "v1.12.0");
        let spec = i.spec.as_mut().expect("spec");
        spec.image_registry = "registry.example.com/karmada".into();
        spec.component_images = [(
            "etcd".to_string(),
            ComponentImage {
                repository: String::new(),
                tag: "3.6.7".into(),
            },
        )]
        .into();
        spec.crd_tarball_url = "http://crds.example.com/v1.12.0/crds.tar.gz".into();
        f(spec);
        i
    };
    for (field, change) in [
        (
            "instance.spec.image_registry",
            (&|s: &mut InstanceSpec| s.image_registry = "https://registry.example.com".into())
                as &dyn Fn(&mut InstanceSpec),
        ),
        (
            "instance.spec.component_images[\"etcdd\"]",
            &|s: &mut InstanceSpec| {
                s.component_images = [(
                    "etcdd".to_string(),
                    ComponentImage {
                        repository: String::new(),
                        tag: "3.6.7".into(),
                    },
                )]
                .into()
            },
        ),
        ("instance.spec.crd_tarball_url", &|s: &mut InstanceSpec| {
            s.crd_tarball_url = "ftp://crds.example.com/crds.tar.gz".into()
        }),
        // Outside what the operator of Kairship allows: images the host would run, and a
        // URL karmada-operator would fetch from inside the cluster.
        ("instance.spec.image_registry", &|s: &mut InstanceSpec| {
            s.image_registry = "evil.example/karmada".into()
        }),
        (
            "instance.spec.component_images[\"etcd\"]",
            &|s: &mut InstanceSpec| {
                s.component_images = [(
                    "etcd".to_string(),
                    ComponentImage {
                        repository: "registry.example.com.evil.example/etcd".into(),
                        tag: "3.6.7".into(),
                    },
                )]
                .into()
            },
        ),
        ("instance.spec.crd_tarball_url", &|s: &mut InstanceSpec| {
            s.crd_tarball_url = "http://169.254.169.254/latest/meta-data".into()
        }),
    ] {
        let e = c
            .clone()
            .create_instance(CreateInstanceRequest {
                instance: Some(air_gapped(change)),
            })
            .await
            .expect_err(field);
        assert_eq!(e.code(), Code::InvalidArgument, "{field}");
        assert!(e.message().contains(field), "{field}: {}", e.message());
    }
    let created = c
        .clone()
        .create_instance(CreateInstanceRequest {
            instance: Some(air_gapped(&|_| {})),
        })
        .await
        .expect("create")
        .into_inner();
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.karmada_version, "v1.12.0");
    assert_eq!(spec.image_registry, "registry.example.com/karmada");
    assert_eq!(
        spec.crd_tarball_url,
        "http://crds.example.com/v1.12.0/crds.tar.gz"
    );
    assert_eq!(spec.component_images["etcd"].tag, "3.6.7");
    assert_eq!(
        spec.component_images["karmadaScheduler"].repository,
        "registry.example.com/karmada/karmada-scheduler"
    );
    api.env
        .wait_phase("team-u", Phase::Running, Duration::from_secs(30))
        .await;
    let v = eventually(
        Duration::from_secs(30),
        "team-u reports its version",
        || status_version(&c, "team-u"),
    )
    .await;
    assert_eq!(v, "v1.12.0");

    // A field the API does not model, set on the Instance directly.
    let instances = api.env.instances();
    instances
        .patch(
            "team-u",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"managed": {"karmadaSpec": {"featureGates": {"Failover": true}}}}}),
            ),
        )
        .await
        .expect("patch instance");

    // Every status the Instance passes through during the upgrade, from a watch.
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<(String, String)>::new()));
    let recorder = {
        use futures::StreamExt;
        let seen = seen.clone();
        let stream = kube::runtime::watcher(
            instances.clone(),
            kube::runtime::watcher::Config::default().fields("metadata.name=team-u"),
        );
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(stream));
            while let Some(Ok(i)) = stream.next().await {
                if let Some(s) = i.status {
                    let ready = s.conditions.iter().find(|c| c.type_ == "Ready");
                    let msg = ready.map(|c| c.message.clone()).unwrap_or_default();
                    seen.lock().push((format!("{:?}", s.phase), msg));
                }
            }
        })
    };

    let mut upgrade = managed("team-u", "v1.13.0");
    upgrade.spec.as_mut().expect("spec").managed_namespace = String::new();
    let updated = c
        .clone()
        .update_instance(UpdateInstanceRequest {
            instance: Some(upgrade),
        })
        .await
        .expect("update")
        .into_inner();
    assert_eq!(
        updated.spec.as_ref().map(|s| s.karmada_version.as_str()),
        Some("v1.13.0")
    );
    let cr = instances.get("team-u").await.expect("instance");
    let managed_spec = cr.spec.managed.clone().expect("managed");
    assert_eq!(
        managed_spec.namespace.as_deref(),
        Some(NS),
        "namespace kept"
    );
    let ks = managed_spec.karmada_spec.expect("karmada spec");
    assert_eq!(
        ks["featureGates"]["Failover"], true,
        "unknown fields kept: {ks}"
    );

    eventually(
        Duration::from_secs(60),
        "team-u upgraded to v1.13.0",
        || async { (status_version(&c, "team-u").await? == "v1.13.0").then_some(()) },
    )
    .await;
    recorder.abort();
    let seen = seen.lock().clone();
    assert!(
        seen.iter()
            .any(|(p, m)| p == "Upgrading" && m.contains("from v1.12.0 to v1.13.0")),
        "the Instance showed Upgrading with both versions: {seen:?}"
    );
    // The Karmada object the operator acted on carries both.
    let karmadas: KubeApi<DynamicObject> = KubeApi::namespaced_with(
        api.env.host.clone(),
        NS,
        &kairship::host::karmada::karmada_resource(),
    );
    let k = karmadas.get("team-u").await.expect("Karmada object");
    assert_eq!(
        k.data["spec"]["components"]["karmadaScheduler"]["imageTag"],
        "v1.13.0"
    );
    assert_eq!(k.data["spec"]["featureGates"]["Failover"], true);
    // karmada-operator's own fields: every image from the one registry, etcd's under
    // `local`, and the CRD tarball.
    assert_eq!(
        k.data["spec"]["components"]["karmadaAPIServer"]["imageRepository"],
        "registry.example.com/karmada/kube-apiserver"
    );
    assert_eq!(
        k.data["spec"]["components"]["etcd"]["local"],
        json!({"imageRepository": "registry.example.com/karmada/etcd", "imageTag": "3.6.7"})
    );
    assert_eq!(
        k.data["spec"]["crdTarball"],
        json!({"httpSource": {"url": "http://crds.example.com/v1.12.0/crds.tar.gz"}, "crdDownloadPolicy": "IfNotPresent"})
    );
    assert!(
        k.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kairship.io/spec-applied-at")),
        "Kairship marks when it wrote the spec (the operator keeps no observedGeneration)"
    );
    assert!(k.data["status"].get("karmadaVersion").is_none());

    let external = Instance {
        spec: Some(InstanceSpec {
            mode: InstanceMode::External as i32,
            kubeconfig_secret_ref: Some(SecretKeyRef {
                namespace: NS.into(),
                name: "karmada-1-kubeconfig".into(),
                key: String::new(),
            }),
            karmada_version: "v1.13.0".into(),
            ..Default::default()
        }),
        ..managed("karmada-1", "")
    };
    let e = c
        .clone()
        .update_instance(UpdateInstanceRequest {
            instance: Some(external),
        })
        .await
        .expect_err("version on External");
    assert_eq!(e.code(), Code::InvalidArgument);
    api.stop().await;
}

/// An update without a resourceVersion means "the latest": it succeeds while the Instance's
/// status is written underneath it (every few seconds in production, constantly here)
/// instead of failing with a conflict (it did, one update in a cluster-tier run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_without_a_version_outlasts_status_writes() {
    let api = Api::start(1).await;
    let c = InstanceServiceClient::new(api.channel.clone());
    let instances: KubeApi<kairship::crd::Instance> = KubeApi::all(api.env.host.clone());
    // Someone writing the status all the time, as the leader does on every change.
    let writers: Vec<_> = (0..1u64)
        .map(|w| {
            let instances = instances.clone();
            tokio::spawn(async move {
                for n in 0u64.. {
                    let patch = json!({"status": {"observedGeneration": n * 4 + w}});
                    let _ = instances
                        .patch_status("karmada-1", &PatchParams::default(), &Patch::Merge(&patch))
                        .await;
                }
            })
        })
        .collect();
    let mut failed = Vec::new();
    for n in 0..20 {
        let current = c
            .clone()
            .get_instance(GetInstanceRequest {
                name: "karmada-1".into(),
            })
            .await
            .expect("instance")
            .into_inner();
        let mut meta = current.metadata.clone().unwrap_or_default();
        meta.resource_version = String::new();
        meta.labels.insert("round".into(), n.to_string());
        let updated = c
            .clone()
            .update_instance(UpdateInstanceRequest {
                instance: Some(Instance {
                    metadata: Some(meta),
                    spec: current.spec.clone(),
                    status: None,
                }),
            })
            .await;
        if let Err(e) = updated {
            failed.push(format!("round {n}: {e}"));
        }
    }
    for w in writers {
        w.abort();
    }
    assert!(failed.is_empty(), "updates refused: {failed:?}");
    let now = instances.get("karmada-1").await.expect("instance");
    let round = now
        .metadata
        .labels
        .unwrap_or_default()
        .get("round")
        .cloned();
    assert_eq!(
        round.as_deref(),
        Some("19"),
        "the last update is what stands"
    );
    // A version the caller names is a precondition: a stale one is refused, not merged.
    let current = c
        .clone()
        .get_instance(GetInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("instance")
        .into_inner();
    let mut meta = current.metadata.clone().unwrap_or_default();
    meta.resource_version = "1".into();
    let stale = c
        .clone()
        .update_instance(UpdateInstanceRequest {
            instance: Some(Instance {
                metadata: Some(meta),
                spec: current.spec.clone(),
                status: None,
            }),
        })
        .await
        .expect_err("a stale resourceVersion");
    assert_eq!(stale.code(), Code::Aborted, "{stale:?}");
    api.stop().await;
}
