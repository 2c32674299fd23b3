//! Every service over gRPC: instances, clusters, workloads with policies, policies,
//! supervisor; health and reflection; the error codes users see.

use std::time::Duration;

use kairship::crd::Phase;
use kairship::proto::cluster_service_client::ClusterServiceClient;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::policy_service_client::PolicyServiceClient;
use kairship::proto::supervisor_service_client::SupervisorServiceClient;
use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::*;
use serde_json::json;
use tonic::Code;

use crate::common::eventually;
use crate::harness::NS;
use crate::server::Api;

mod supervisor;

fn assert_code<T: std::fmt::Debug>(r: Result<T, tonic::Status>, code: Code, mentions: &str) {
    match r {
        Err(s) => {
            assert_eq!(s.code(), code, "{s:?}");
            assert!(
                s.message().contains(mentions),
                "message {:?} should mention {mentions:?}",
                s.message()
            );
        }
        Ok(v) => panic!("expected {code:?}, got {v:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_service_crud_stats_and_errors() {
    let api = Api::start(2).await;
    let mut c = InstanceServiceClient::new(api.channel.clone());
    let list = c
        .list_instances(ListInstancesRequest::default())
        .await
        .expect("list")
        .into_inner();
    let names: Vec<String> = list
        .instances
        .iter()
        .filter_map(|i| i.metadata.as_ref().map(|m| m.name.clone()))
        .collect();
    assert_eq!(names, vec!["karmada-1", "karmada-2"]);
    let page = c
        .list_instances(ListInstancesRequest {
            options: Some(ListOptions {
                page_size: 1,
                ..Default::default()
            }),
        })
        .await
        .expect("page")
        .into_inner();
    assert_eq!(page.instances.len(), 1);
    assert!(!page.next_page_token.is_empty());

    let got = c
        .get_instance(GetInstanceRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(
        got.status.as_ref().map(|s| s.phase.as_str()),
        Some("Running")
    );
    let stats = c
        .get_instance_stats(GetInstanceStatsRequest {
            name: "karmada-1".into(),
        })
        .await
        .expect("stats")
        .into_inner();
    assert_eq!((stats.clusters_total, stats.clusters_ready), (2, 2));
    assert!(!stats.cpu_allocatable.is_empty());

    assert_code(
        c.get_instance(GetInstanceRequest {
            name: "nope".into(),
        })
        .await,
        Code::NotFound,
        "nope",
    );
    assert_code(
        c.get_instance(GetInstanceRequest {
            name: "Bad_Name".into(),
        })
        .await,
        Code::InvalidArgument,
        "name",
    );
    let bad_mode = Instance {
        metadata: Some(ObjectMeta {
            name: "x".into(),
            ..Default::default()
        }),
        spec: Some(InstanceSpec::default()),
        status: None,
    };
    assert_code(
        c.create_instance(CreateInstanceRequest {
            instance: Some(bad_mode),
        })
        .await,
        Code::InvalidArgument,
        "instance.spec.mode",
    );
    let no_ref = Instance {
        metadata: Some(ObjectMeta {
            name: "x".into(),
            ..Default::default()
        }),
        spec: Some(InstanceSpec {
            mode: InstanceMode::External as i32,
            ..Default::default()
        }),
        status: None,
    };
    assert_code(
        c.create_instance(CreateInstanceRequest {
            instance: Some(no_ref),
        })
        .await,
        Code::InvalidArgument,
        "kubeconfig_secret_ref",
    );
    let dup = Instance {
        metadata: Some(ObjectMeta {
            name: "karmada-1".into(),
            ..Default::default()
        }),
        spec: Some(InstanceSpec {
            mode: InstanceMode::Managed as i32,
            ..Default::default()
        }),
        status: None,
    };
    assert_code(
        c.create_instance(CreateInstanceRequest {
            instance: Some(dup),
        })
        .await,
        Code::AlreadyExists,
        "karmada-1",
    );

    // Create, pause through update, delete.
    let spec = InstanceSpec {
        mode: InstanceMode::External as i32,
        kubeconfig_secret_ref: Some(SecretKeyRef {
            namespace: NS.into(),
            name: "karmada-1-kubeconfig".into(),
            key: String::new(),
        }),
        ..Default::default()
    };
    let new = Instance {
        metadata: Some(ObjectMeta {
            name: "again".into(),
            ..Default::default()
        }),
        spec: Some(spec.clone()),
        status: None,
    };
    let created = c
        .create_instance(CreateInstanceRequest {
            instance: Some(new),
        })
        .await
        .expect("create")
        .into_inner();
    let rv = created
        .metadata
        .as_ref()
        .expect("meta")
        .resource_version
        .clone();
    api.env
        .wait_phase("again", Phase::Running, Duration::from_secs(20))
        .await;
    let stale = Instance {
        metadata: Some(ObjectMeta {
            name: "again".into(),
            resource_version: "1".into(),
            ..Default::default()
        }),
        spec: Some(spec.clone()),
        status: None,
    };
    assert_code(
        c.update_instance(UpdateInstanceRequest {
            instance: Some(stale),
        })
        .await,
        Code::Aborted,
        "again",
    );
    let paused = Instance {
        metadata: Some(ObjectMeta {
            name: "again".into(),
            ..Default::default()
        }),
        spec: Some(InstanceSpec {
            paused: true,
            ..spec
        }),
        status: None,
    };
    let updated = c
        .update_instance(UpdateInstanceRequest {
            instance: Some(paused),
        })
        .await
        .expect("update")
        .into_inner();
    assert!(updated.spec.expect("spec").paused);
    assert_ne!(updated.metadata.expect("meta").resource_version, rv);
    c.delete_instance(DeleteInstanceRequest {
        name: "again".into(),
    })
    .await
    .expect("delete");
    eventually(
        Duration::from_secs(15),
        "the deleted instance to be gone",
        || {
            let mut c = c.clone();
            async move {
                (c.get_instance(GetInstanceRequest {
                    name: "again".into(),
                })
                .await
                .err()?
                .code()
                    == Code::NotFound)
                    .then_some(())
            }
        },
    )
    .await;
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_from_cache_and_unavailable_instances_fail_fast() {
    let api = Api::start(2).await;
    let mut c = ClusterServiceClient::new(api.channel.clone());
    let list = c
        .list_clusters(ListClustersRequest {
            instance: "karmada-1".into(),
            options: None,
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.clusters.len(), 2);
    assert!(list
        .clusters
        .iter()
        .all(|cl| cl.ready && cl.nodes_total > 0));
    let one = c
        .get_cluster(GetClusterRequest {
            instance: "karmada-1".into(),
            name: "member1".into(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(one.metadata.expect("meta").name, "member1");
    assert!(one.object_json.contains("resourceSummary"));
    let selected = c
        .list_clusters(ListClustersRequest {
            instance: "karmada-1".into(),
            options: Some(ListOptions {
                label_selector: "region=eu-west-1".into(),
                ..Default::default()
            }),
        })
        .await
        .expect("selector")
        .into_inner();
    assert_eq!(selected.clusters.len(), 1);
    assert_code(
        c.get_cluster(GetClusterRequest {
            instance: "karmada-1".into(),
            name: "member9".into(),
        })
        .await,
        Code::NotFound,
        "member9",
    );
    assert_code(
        c.list_clusters(ListClustersRequest {
            instance: "nope".into(),
            options: None,
        })
        .await,
        Code::NotFound,
        "nope",
    );
    assert_code(
        c.list_clusters(ListClustersRequest {
            instance: "karmada-1".into(),
            options: Some(ListOptions {
                label_selector: "a in b".into(),
                ..Default::default()
            }),
        })
        .await,
        Code::InvalidArgument,
        "label_selector",
    );

    api.env.take_down("karmada-1").await;
    let t = std::time::Instant::now();
    assert_code(
        c.list_clusters(ListClustersRequest {
            instance: "karmada-1".into(),
            options: None,
        })
        .await,
        Code::Unavailable,
        "unreachable",
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "fails fast, took {:?}",
        t.elapsed()
    );
    let other = c
        .list_clusters(ListClustersRequest {
            instance: "karmada-2".into(),
            options: None,
        })
        .await
        .expect("the other instance serves");
    assert_eq!(other.into_inner().clusters.len(), 2);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_with_their_policies_and_policy_crud() {
    let api = Api::start(1).await;
    let mut w = WorkloadServiceClient::new(api.channel.clone());
    let mut p = PolicyServiceClient::new(api.channel.clone());
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let created = w
        .create_workload(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: deploy.to_string(),
        })
        .await
        .expect("create")
        .into_inner();
    assert_eq!((created.kind.as_str(), created.replicas), ("Deployment", 3));
    let pp = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"name": "web-pp", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}], "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}});
    let policy = p
        .create_policy(CreatePolicyRequest {
            instance: "karmada-1".into(),
            object_json: pp.to_string(),
        })
        .await
        .expect("create pp")
        .into_inner();
    assert_eq!(policy.cluster_names, vec!["member1", "member2"]);

    // Reads come from the cache, which follows the writes.
    let listed = eventually(
        Duration::from_secs(10),
        "the workload with its policy in the cache",
        || {
            let mut w = w.clone();
            async move {
                let l = w
                    .list_workloads(ListWorkloadsRequest {
                        instance: "karmada-1".into(),
                        ..Default::default()
                    })
                    .await
                    .ok()?
                    .into_inner();
                l.workloads
                    .into_iter()
                    .find(|x| x.policies.iter().any(|p| p.name == "web-pp"))
            }
        },
    )
    .await;
    assert_eq!(listed.policies[0].kind, "PropagationPolicy");
    let pols = p
        .list_policies(ListPoliciesRequest {
            instance: "karmada-1".into(),
            kind: "PropagationPolicy".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(pols.policies.len(), 1);

    let stale = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default", "resourceVersion": "1"}, "spec": deploy["spec"]});
    assert_code(
        w.update_workload(UpdateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: stale.to_string(),
        })
        .await,
        Code::Aborted,
        "Deployment",
    );
    assert_code(
        w.create_workload(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: "{nope".into(),
        })
        .await,
        Code::InvalidArgument,
        "object_json",
    );
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}});
    assert_code(
        w.create_workload(CreateWorkloadRequest {
            instance: "karmada-1".into(),
            object_json: service.to_string(),
        })
        .await,
        Code::InvalidArgument,
        "object_json.kind",
    );
    assert_code(
        w.get_workload(GetWorkloadRequest {
            instance: "karmada-1".into(),
            namespace: "default".into(),
            kind: "Pod".into(),
            name: "x".into(),
        })
        .await,
        Code::InvalidArgument,
        "kind",
    );

    w.delete_workload(DeleteWorkloadRequest {
        instance: "karmada-1".into(),
        namespace: "default".into(),
        kind: "Deployment".into(),
        name: "web".into(),
    })
    .await
    .expect("delete");
    p.delete_policy(DeletePolicyRequest {
        instance: "karmada-1".into(),
        kind: "PropagationPolicy".into(),
        namespace: "default".into(),
        name: "web-pp".into(),
    })
    .await
    .expect("delete pp");
    eventually(
        Duration::from_secs(10),
        "the deleted workload to leave the cache",
        || {
            let mut w = w.clone();
            async move {
                let r = w
                    .get_workload(GetWorkloadRequest {
                        instance: "karmada-1".into(),
                        namespace: "default".into(),
                        kind: "Deployment".into(),
                        name: "web".into(),
                    })
                    .await;
                (r.err()?.code() == Code::NotFound).then_some(())
            }
        },
    )
    .await;
    api.stop().await;
}
