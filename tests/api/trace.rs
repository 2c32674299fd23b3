//! A resource template's propagation trace on Karmada's nginx sample: the
//! PropagationPolicy that claimed it, the ones that did not with why, its binding, the
//! Work and state on each member, the events; over gRPC, REST and `kairship ctl trace`,
//! as the caller (a viewer sees no Works); and a Secret's value in no answer.

use std::time::Duration;

use kairship::proto::workload_service_client::WorkloadServiceClient;
use kairship::proto::{Trace, TraceResourceRequest};

use crate::auth::{ADMIN, VIEWER};
use crate::common::{eventually, shared_karmada};

const SECRET_VALUE: &str = "hunter2-never-shown";

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    r
}

fn request(kind: &str, name: &str) -> TraceResourceRequest {
    TraceResourceRequest {
        instance: "karmada-1".into(),
        kind: kind.into(),
        namespace: "default".into(),
        name: name.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nginx_sample_traced_from_policy_to_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = crate::auth::signer("k1");
    let api = crate::auth::start(dir.path(), &serde_json::json!({"keys": [key.jwk]})).await;
    let admin = api.proxy_kubeconfig_as("karmada-1", ADMIN);
    let kubectl = |args: &[&str]| {
        let out = api.kubectl_with(&admin, args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let samples = shared_karmada("samples");
    kubectl(&[
        "apply",
        "-n",
        "default",
        "-f",
        samples.to_str().expect("path"),
    ]);
    // A policy for Services only, one for another name, and a cluster-wide one that a
    // namespace's policy comes before.
    let extra = dir.path().join("policies.yaml");
    std::fs::write(
        &extra,
        format!(
            "apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: services-only, namespace: default}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Service}}]
  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: web-only, namespace: default}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, name: web}}]
  placement: {{clusterAffinity: {{clusterNames: [member1]}}}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {{name: every-deployment}}
spec:
  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}]
  placement: {{clusterAffinity: {{clusterNames: [member2]}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: db, namespace: default}}
stringData: {{password: {SECRET_VALUE}}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {{name: db-secret, namespace: default}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Secret, name: db}}]
  placement: {{clusterAffinity: {{clusterNames: [member1, member2]}}}}
"
        ),
    )
    .expect("write");
    kubectl(&["apply", "-f", extra.to_str().expect("path")]);

    let grpc = WorkloadServiceClient::new(api.channel.clone());
    let traced = |token: &'static str, kind: &'static str, name: &'static str| {
        let mut c = grpc.clone();
        async move {
            c.trace_resource(with(token, request(kind, name)))
                .await
                .map(|r| r.into_inner())
        }
    };
    // Placed on both members, each Work applied: the trace has every step.
    let t: Trace = eventually(
        Duration::from_secs(30),
        "nginx traced to both members",
        || async {
            let t = traced(ADMIN, "deploy", "nginx").await.ok()?;
            let applied = t.works.iter().filter(|w| !w.status_json.is_empty()).count();
            (t.works.len() == 2 && applied == 2 && !t.events.is_empty()).then_some(t)
        },
    )
    .await;
    assert_eq!(
        (t.kind.as_str(), t.api_version.as_str()),
        ("Deployment", "apps/v1")
    );
    let claimer = t.policies[0].policy.clone().expect("the claimer");
    assert_eq!(
        (claimer.kind.as_str(), claimer.name.as_str()),
        ("PropagationPolicy", "nginx-propagation")
    );
    assert!(claimer.claimed && t.policies[0].reason.is_empty());
    let why = |name: &str| {
        t.policies
            .iter()
            .find(|p| p.policy.as_ref().is_some_and(|r| r.name == name))
            .map(|p| p.reason.clone())
            .unwrap_or_else(|| panic!("{name} is in the trace: {t:?}"))
    };
    assert!(
        why("services-only").contains("selects Service (v1)"),
        "{}",
        why("services-only")
    );
    assert!(
        why("web-only").contains("selects the name web"),
        "{}",
        why("web-only")
    );
    assert!(why("every-deployment").contains("comes before any ClusterPropagationPolicy"));
    assert!(
        t.overrides.iter().any(|o| o.name == "nginx-op"),
        "{:?}",
        t.overrides
    );
    let binding = t.binding.clone().expect("the binding");
    assert_eq!(binding.binding_name, "nginx-deployment");
    let mut clusters: Vec<&str> = binding.clusters.iter().map(|c| c.name.as_str()).collect();
    clusters.sort();
    assert_eq!(clusters, ["member1", "member2"]);
    assert!(binding
        .conditions
        .iter()
        .any(|c| c.r#type == "Scheduled" && c.status == "True"));
    for w in &t.works {
        assert_eq!(w.namespace, format!("karmada-es-{}", w.cluster));
        assert!(
            w.conditions
                .iter()
                .any(|c| c.r#type == "Applied" && c.status == "True"),
            "{w:?}"
        );
    }
    assert!(
        t.events.iter().any(|e| e.reason == "ApplyPolicySucceed"),
        "{:?}",
        t.events
    );
    assert!(t.unavailable.is_empty(), "{:?}", t.unavailable);

    // REST: the same trace at the path DESIGN.md gives.
    let c = api.https_client(ADMIN).await;
    let (code, rest) = crate::rest::call(
        &c,
        "GET",
        "/apis/kairship.io/v1alpha1/instances/karmada-1/trace?group=apps&version=v1&kind=Deployment&namespace=default&name=nginx",
        None,
    )
    .await;
    assert_eq!(code, 200, "{rest}");
    assert_eq!(rest["binding"]["bindingName"], "nginx-deployment");
    assert_eq!(rest["policies"][0]["policy"]["name"], "nginx-propagation");

    // kairship ctl trace: the same steps as a table.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kairship"))
        .args([
            "ctl",
            "--grpc",
            &api.grpc_addr.to_string(),
            "--token",
            ADMIN,
        ])
        .args(["trace", "karmada-1", "deploy/nginx", "-n", "default"])
        .output()
        .expect("ctl runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "nginx-propagation",
        "claimed",
        "services-only",
        "binding nginx-deployment",
        "member1",
        "member2",
        "karmada-es-member1/",
    ] {
        assert!(table.contains(want), "{want} in:\n{table}");
    }

    // A viewer sees the policies and the binding, not the Works (they carry manifests).
    let v = traced(VIEWER, "Deployment", "nginx")
        .await
        .expect("a viewer traces");
    assert!(v.works.is_empty() && v.binding.is_some());
    assert!(
        v.unavailable.iter().any(|u| u.contains("Works")),
        "{:?}",
        v.unavailable
    );

    // A Secret: its keys, never its value, in any answer.
    let s = eventually(
        Duration::from_secs(30),
        "the Secret on both members",
        || async {
            let s = traced(ADMIN, "secret", "db").await.ok()?;
            (s.works.len() == 2).then_some(s)
        },
    )
    .await;
    assert_eq!(s.keys, ["password"]);
    assert_eq!(
        s.policies[0].policy.as_ref().map(|p| p.name.as_str()),
        Some("db-secret")
    );
    let (code, rest) = crate::rest::call(
        &c,
        "GET",
        "/apis/kairship.io/v1alpha1/instances/karmada-1/trace?kind=Secret&namespace=default&name=db",
        None,
    )
    .await;
    assert_eq!(code, 200, "{rest}");
    for answer in [format!("{s:?}"), rest.to_string()] {
        assert!(
            !answer.contains(SECRET_VALUE),
            "a Secret's value in an answer: {answer}"
        );
        assert!(
            !answer.contains("aHVudGVyMi1uZXZlci1zaG93bg"),
            "its base64 either: {answer}"
        );
    }

    // Bad input is named.
    let e = traced(ADMIN, "widgets", "x")
        .await
        .expect_err("no such kind");
    assert!(e.message().contains("widgets"), "{e:?}");
    let mut no_ns = request("Deployment", "nginx");
    no_ns.namespace.clear();
    let e = grpc
        .clone()
        .trace_resource(with(ADMIN, no_ns))
        .await
        .expect_err("namespaced");
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let e = traced(ADMIN, "Deployment", "absent")
        .await
        .expect_err("absent");
    assert_eq!(e.code(), tonic::Code::NotFound);
    api.stop().await;
}
