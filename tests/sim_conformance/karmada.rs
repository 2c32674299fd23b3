//! The simulated Karmada control plane seen through real clients: the nginx sample from
//! shared/karmada/samples ends as real Karmada leaves it, scaling re-divides, and a
//! cluster leaving the placement loses its Work and member object.

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::common::{eventually, shared_karmada, Sim};

const WAIT: Duration = Duration::from_secs(30);

async fn start(clusters: usize) -> Sim {
    Sim::start_with(1, clusters).await
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn bindings(client: kube::Client) -> Api<DynamicObject> {
    let r = resource(
        "work.karmada.io",
        "v1alpha2",
        "ResourceBinding",
        "resourcebindings",
    );
    Api::namespaced_with(client, "default", &r)
}

fn works(client: kube::Client, cluster: &str) -> Api<DynamicObject> {
    let r = resource("work.karmada.io", "v1alpha1", "Work", "works");
    Api::namespaced_with(client, &format!("karmada-es-{cluster}"), &r)
}

/// `spec.clusters` of a binding as (name, replicas).
fn placement(b: &DynamicObject) -> Vec<(String, i64)> {
    b.data["spec"]["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_string(),
                t["replicas"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

async fn wait_placement(api: &Api<DynamicObject>, want: &[(&str, i64)]) -> DynamicObject {
    let want: Vec<(String, i64)> = want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    eventually(WAIT, &format!("binding placed as {want:?}"), || async {
        let b = api.get_opt("nginx-deployment").await.ok().flatten()?;
        (placement(&b) == want).then_some(b)
    })
    .await
}

fn manifest(work: &DynamicObject) -> Value {
    work.data["spec"]["workload"]["manifests"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_sample_ends_as_karmada_leaves_it() {
    let sim = start(3).await;
    let inst = sim.fleet.instance("karmada-1").expect("instance");
    for f in [
        "nginx-deployment.yaml",
        "nginx-propagationpolicy.yaml",
        "nginx-overridepolicy.yaml",
    ] {
        let path = shared_karmada(&format!("samples/{f}"));
        sim.kubectl(
            "karmada-1",
            &["apply", "-n", "default", "-f", &path.display().to_string()],
        );
    }
    let client = sim.client("karmada-1").await;
    let rbs = bindings(client.clone());
    let b = wait_placement(&rbs, &[("member1", 1), ("member2", 1)]).await;
    // Named and labelled as Karmada's detector does.
    let ann = &b.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get("propagationpolicy.karmada.io/name")
            .map(String::as_str),
        Some("nginx-propagation")
    );
    assert_eq!(
        ann.get("propagationpolicy.karmada.io/namespace")
            .map(String::as_str),
        Some("default")
    );
    let labels = b.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("propagationpolicy.karmada.io/permanent-id"),
        "{labels:?}"
    );
    assert!(
        labels.contains_key("resourcebinding.karmada.io/permanent-id"),
        "{labels:?}"
    );
    assert_eq!(b.data["spec"]["resource"]["kind"], "Deployment");
    assert_eq!(b.data["spec"]["resource"]["name"], "nginx");
    assert_eq!(b.data["spec"]["replicas"], 2);
    let scheduled = b.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled").cloned())
        .expect("a Scheduled condition");
    assert_eq!(scheduled["status"], "True");

    // Works in the execution namespaces carry the OverridePolicy's changes.
    // The OverridePolicy came last: the Works follow it once the override manager sees it.
    let w2 = eventually(WAIT, "overridden work on member2", || async {
        works(client.clone(), "member2")
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|w| manifest(w)["metadata"]["labels"]["env"] == "skoala-dev")
    })
    .await;
    let m2 = manifest(&w2);
    assert_eq!(m2["spec"]["replicas"], 1);
    assert_eq!(m2["metadata"]["labels"]["env"], "skoala-dev");
    assert_eq!(m2["metadata"]["labels"]["env-stat"], "skoala-stage");
    assert!(m2["metadata"]["labels"].get("bar").is_none());
    assert!(m2["metadata"]["annotations"].get("env").is_none());
    let w1 = eventually(WAIT, "overridden work on member1", || async {
        works(client.clone(), "member1")
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|w| manifest(w)["metadata"]["annotations"]["env"] == "skoala-stage")
    })
    .await;
    let m1 = manifest(&w1);
    assert_eq!(m1["metadata"]["annotations"]["env"], "skoala-stage");
    assert!(m1["metadata"]["labels"].get("env").is_none());
    assert_eq!(
        w1.metadata.name, w2.metadata.name,
        "one Work name per template"
    );
    assert!(w1
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with("nginx-")));
    let on3 = works(client.clone(), "member3")
        .list(&Default::default())
        .await
        .expect("list");
    assert!(on3.items.is_empty(), "nothing on member3");

    // Members hold the objects; the template's status is aggregated from them.
    let deploys = resource("apps", "v1", "Deployment", "deployments");
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &deploys);
    eventually(WAIT, "template readyReplicas 2", || async {
        let t = templates.get("nginx").await.ok()?;
        (t.data["status"]["readyReplicas"] == 2).then_some(())
    })
    .await;
    let member_deploy = |cluster: &str| {
        let store = inst.members.store(cluster).expect("member store");
        let def = store
            .lookup("apps", "v1", "deployments")
            .expect("deployments served");
        store
            .get(&def, Some("default"), "nginx")
            .ok()
            .map(|o| o.value.clone())
    };
    assert_eq!(
        member_deploy("member2").expect("on member2")["metadata"]["labels"]["env"],
        "skoala-dev"
    );
    assert!(member_deploy("member3").is_none());
    let b = rbs.get("nginx-deployment").await.expect("binding");
    let agg = b.data["status"]["aggregatedStatus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(agg.len(), 2, "{agg:?}");
    assert!(agg.iter().all(|a| a["applied"] == true));

    // The member's own API through the Cluster proxy subresource, as karmadactl reads it.
    let proxy = "/apis/cluster.karmada.io/v1alpha1/clusters/member2/proxy";
    let deploys: Value = serde_json::from_str(&sim.kubectl(
        "karmada-1",
        &[
            "get",
            "--raw",
            &format!("{proxy}/apis/apps/v1/namespaces/default/deployments"),
        ],
    ))
    .expect("deployment list");
    assert_eq!(
        deploys["items"][0]["metadata"]["labels"]["env"],
        "skoala-dev"
    );
    assert_eq!(deploys["items"][0]["spec"]["replicas"], 1);
    let nodes: Value = serde_json::from_str(&sim.kubectl(
        "karmada-1",
        &["get", "--raw", &format!("{proxy}/api/v1/nodes")],
    ))
    .expect("node list");
    let cluster = sim.kubectl("karmada-1", &["get", "clusters", "member2", "-o", "json"]);
    let cluster: Value = serde_json::from_str(&cluster).expect("cluster json");
    assert_eq!(
        nodes["items"].as_array().map(|a| a.len() as u64),
        cluster["status"]["nodeSummary"]["totalNum"].as_u64()
    );
    // The member runs the Deployment's Pod (through a ReplicaSet), Running once ready, on
    // one of its Nodes; kubectl prints it with kube-apiserver's Pod columns.
    let pods_path = format!("{proxy}/api/v1/namespaces/default/pods?labelSelector=app%3Dnginx");
    let pod = eventually(WAIT, "nginx's pod Running on member2", || async {
        let pods: Value =
            serde_json::from_str(&sim.kubectl("karmada-1", &["get", "--raw", &pods_path])).ok()?;
        let items = pods["items"].as_array()?.clone();
        (items.len() == 1 && items[0]["status"]["phase"] == "Running").then(|| items[0].clone())
    })
    .await;
    let name = pod["metadata"]["name"].as_str().expect("pod name");
    let hash = pod["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .expect("pod-template-hash");
    assert!(name.starts_with(&format!("nginx-{hash}-")), "{name}");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    assert!(nodes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|n| n["metadata"]["name"] == pod["spec"]["nodeName"]));
    assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
    let rs: Value = serde_json::from_str(&sim.kubectl(
        "karmada-1",
        &[
            "get",
            "--raw",
            &format!("{proxy}/apis/apps/v1/namespaces/default/replicasets/nginx-{hash}"),
        ],
    ))
    .expect("replicaset");
    assert_eq!(rs["status"]["readyReplicas"], 1);
    // karmada-apiserver serves Pods too (no kubelet runs them there): nothing, not a 404.
    let none_here = sim.kubectl("karmada-1", &["get", "pods", "-A", "-o", "name"]);
    assert!(none_here.trim().is_empty(), "{none_here}");
    // The cluster proxy acts as the caller on the member: a user the instance lets use the
    // proxy, but whom the member does not know, is refused by the member.
    // (Created as users do, with kubectl's typed subcommands: protobuf bodies.)
    sim.kubectl(
        "karmada-1",
        &[
            "create",
            "clusterrole",
            "proxy-only",
            "--verb=get",
            "--resource=clusters.cluster.karmada.io/proxy",
        ],
    );
    sim.kubectl(
        "karmada-1",
        &[
            "create",
            "clusterrolebinding",
            "proxy-only",
            "--clusterrole=proxy-only",
            "--user=carol",
        ],
    );
    let refused = sim.kubectl_raw(
        "karmada-1",
        &[
            "get",
            "--raw",
            &format!("{proxy}/api/v1/namespaces/default/pods"),
            "--as=carol",
        ],
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(err.contains("forbidden") && err.contains("carol"), "{err}");
    let none: Value = serde_json::from_str(&sim.kubectl(
        "karmada-1",
        &[
            "get",
            "--raw",
            "/apis/cluster.karmada.io/v1alpha1/clusters/member3/proxy/apis/apps/v1/deployments",
        ],
    ))
    .expect("member3 list");
    assert_eq!(none["items"].as_array().map(Vec::len), Some(0));
    let missing = sim.kubectl_raw(
        "karmada-1",
        &[
            "get",
            "--raw",
            "/apis/cluster.karmada.io/v1alpha1/clusters/member9/proxy/api/v1/nodes",
        ],
    );
    assert!(!missing.status.success());

    // Scaling re-divides 2/2.
    sim.kubectl(
        "karmada-1",
        &[
            "scale",
            "deployment",
            "nginx",
            "-n",
            "default",
            "--replicas=4",
        ],
    );
    wait_placement(&rbs, &[("member1", 2), ("member2", 2)]).await;
    eventually(WAIT, "template readyReplicas 4", || async {
        let t = templates.get("nginx").await.ok()?;
        (t.data["status"]["readyReplicas"] == 4).then_some(())
    })
    .await;

    // Taking member2 out of the placement deletes its Work and its member object.
    sim.kubectl(
        "karmada-1",
        &[
            "patch",
            "propagationpolicy",
            "nginx-propagation",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"spec":{"placement":{"clusterAffinity":{"clusterNames":["member1"]}}}}"#,
        ],
    );
    wait_placement(&rbs, &[("member1", 4)]).await;
    eventually(WAIT, "member2's work deleted", || async {
        let l = works(client.clone(), "member2")
            .list(&Default::default())
            .await
            .ok()?;
        l.items.is_empty().then_some(())
    })
    .await;
    eventually(WAIT, "member2's deployment deleted", || async {
        member_deploy("member2").is_none().then_some(())
    })
    .await;
    sim.fleet.shutdown();
}

use kairship_test_support::scenarios::{cluster_scoped, nginx};

/// The scenario the real tier runs against real Karmada (tests/real), run here against
/// the simulated one, so both must agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_nginx_scenario() {
    let sim = crate::common::Sim::start_with(1, 3).await;
    let kubectl = |args: &[&str]| sim.kubectl_raw("karmada-1", args);
    let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/karmada/samples");
    tokio::task::block_in_place(|| {
        nginx::nginx_sample(&kubectl, Some(samples), Duration::from_secs(30))
    });
}

/// A ClusterPropagationPolicy claims a cluster-scoped template (a Namespace): a
/// ClusterResourceBinding `<name>-namespace`, Works that name it, the Namespace on the
/// chosen members; deleting the Namespace takes them all away again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scoped_templates_get_cluster_resource_bindings() {
    let sim = start(3).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("team-a.yaml");
    std::fs::write(
        &path,
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: team-namespaces
spec:
  resourceSelectors:
    - apiVersion: v1
      kind: Namespace
      name: team-a
  placement:
    clusterAffinity:
      clusterNames: [member1, member3]
"#,
    )
    .expect("write manifest");
    sim.kubectl("karmada-1", &["apply", "-f", &path.display().to_string()]);
    let client = sim.client("karmada-1").await;
    let crbs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "work.karmada.io",
            "v1alpha2",
            "ClusterResourceBinding",
            "clusterresourcebindings",
        ),
    );
    let crb = eventually(WAIT, "team-a's ClusterResourceBinding placed", || async {
        let b = crbs.get_opt("team-a-namespace").await.ok().flatten()?;
        let names: Vec<String> = placement(&b).into_iter().map(|(n, _)| n).collect();
        (names == ["member1", "member3"]).then_some(b)
    })
    .await;
    assert_eq!(crb.metadata.namespace, None, "cluster-scoped");
    assert_eq!(crb.data["spec"]["resource"]["kind"], "Namespace");
    let labels = crb.metadata.labels.clone().unwrap_or_default();
    assert!(
        labels.contains_key("clusterresourcebinding.karmada.io/permanent-id")
            && labels.contains_key("clusterpropagationpolicy.karmada.io/permanent-id"),
        "{labels:?}"
    );
    let work = eventually(WAIT, "team-a's work on member3", || async {
        works(client.clone(), "member3")
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|w| manifest(w)["metadata"]["name"] == "team-a")
    })
    .await;
    let annotations = work.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("clusterresourcebinding.karmada.io/name")
            .map(String::as_str),
        Some("team-a-namespace")
    );
    let on = |cluster: &'static str| {
        let raw =
            format!("/apis/cluster.karmada.io/v1alpha1/clusters/{cluster}/proxy/api/v1/namespaces");
        let client = client.clone();
        async move {
            let list: Value = client
                .request(http::Request::get(raw).body(Vec::new()).expect("request"))
                .await
                .ok()?;
            Some(
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|n| n["metadata"]["name"] == "team-a"),
            )
        }
    };
    eventually(WAIT, "team-a on member1 and member3", || async {
        (on("member1").await? && on("member3").await?).then_some(())
    })
    .await;
    assert_eq!(on("member2").await, Some(false), "nothing on member2");

    // The template goes: its binding and what it put on the members go with it (real
    // Karmada's binding is owned by the template; deleting only the policy keeps both).
    sim.kubectl("karmada-1", &["delete", "namespace", "team-a"]);
    eventually(WAIT, "binding and member namespaces gone", || async {
        let gone = crbs.get_opt("team-a-namespace").await.ok()?.is_none();
        (gone && !on("member1").await? && !on("member3").await?).then_some(())
    })
    .await;
}

/// The cluster-scoped scenario the real tier also runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_cluster_scoped_scenario() {
    let sim = crate::common::Sim::start_with(1, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubectl = |args: &[&str]| sim.kubectl_raw("karmada-1", args);
    tokio::task::block_in_place(|| {
        cluster_scoped::cluster_role(&kubectl, dir.path(), Duration::from_secs(30))
    });
}
