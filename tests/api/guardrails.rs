//! A class's guardrails pushed into its instances: an instance made from the class gets
//! them, Kairship applies them in the instance (a ValidatingAdmissionPolicy then refuses
//! an unpinned image sent by kubectl through Kairship's proxy), deletes the one taken
//! out of the list, puts back one deleted in the instance, and refuses a list that
//! would grant a role in `karmada-cluster` without touching what is applied. A class
//! pushing a Secret makes no instance.

use std::time::Duration;

use kairship::crd::{Instance, InstanceClass, InstanceClassSpec};
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::CreateInstanceRequest;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use crate::common::eventually;

const CONDITION: &str = "GuardrailsApplied";

fn guardrails() -> Vec<Value> {
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "pinned-images"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.template.spec.containers.all(c, !c.image.endsWith(':latest'))",
                "message": "images must be pinned, not :latest"}]
        }}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "pinned-images"},
            "spec": {"policyName": "pinned-images", "validationActions": ["Deny"]}}),
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "spread-by-default", "namespace": "default"},
            "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
                     "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}}),
    ]
}

/// The instance's GuardrailsApplied condition as (status, message), once it has one.
async fn condition(host: &kube::Client, name: &str) -> Option<(String, String)> {
    let api: kube::Api<Instance> = kube::Api::all(host.clone());
    let i = api.get(name).await.ok()?;
    let c = i
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == CONDITION)?;
    Some((c.status, c.message))
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// guarded-1's `spec.guardrails` as the host has it.
async fn guardrails_of(instances: &kube::Api<Instance>) -> Vec<Value> {
    instances
        .get("guarded-1")
        .await
        .expect("instance")
        .spec
        .guardrails
}

/// Sets `name`'s `spec.guardrails` (an InstanceClass's or an Instance's) to `list`.
async fn set_guardrails<K>(api: &kube::Api<K>, name: &str, list: &[Value])
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"spec": {"guardrails": list}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("{name}'s guardrails not set: {e}"));
}

/// Sets the class's guardrails and rolls them out to its one instance: the instance's
/// final step, and the rollout's phase (with its reason when it halted).
async fn roll(
    api: &crate::server::Api,
    classes: &kube::Api<InstanceClass>,
    rollout: &str,
    guardrails: Vec<Value>,
) -> (String, String) {
    use kairship::proto::rollout_service_client::RolloutServiceClient;
    use kairship::proto::{RolloutOptions, RolloutSpec, StartRolloutRequest};
    set_guardrails(classes, "guarded", &guardrails).await;
    let r = RolloutServiceClient::new(api.channel.clone());
    let req = StartRolloutRequest {
        name: rollout.into(),
        spec: Some(RolloutSpec {
            class_name: "guarded".into(),
            ..Default::default()
        }),
        options: Some(RolloutOptions {
            soak_seconds: 2,
            progress_deadline_seconds: 120,
            ..Default::default()
        }),
    };
    // The class change reaches Kairship's watch first.
    kairship_test_support::poll(Duration::from_secs(10), Duration::from_millis(200), || {
        let (mut r, req) = (r.clone(), req.clone());
        async move { r.start_rollout(req).await }
    })
    .await
    .unwrap_or_else(|e| panic!("{rollout} not started: {e:?}"));
    let api: kube::Api<kairship::crd::FleetRollout> = kube::Api::all(api.env.host.clone());
    eventually(
        Duration::from_secs(120),
        &format!("{rollout} finished"),
        || async {
            let s = api.get(rollout).await.ok()?.status?;
            let step = s.instances.get("guarded-1")?.step.clone();
            match s.phase.as_str() {
                "Completed" => Some((step, s.phase)),
                "Halted" if step == "RolledBack" => Some((step, s.reason)),
                _ => None,
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classs_guardrails_are_kept_in_each_instance() {
    let api = crate::server::Api::start(1).await;
    let host = api.env.host.clone();
    let classes: kube::Api<InstanceClass> = kube::Api::all(host.clone());
    for (name, guardrails) in [
        ("guarded", guardrails()),
        (
            "leaky",
            vec![
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys", "namespace": "default"}}),
            ],
        ),
    ] {
        let spec = InstanceClassSpec {
            karmada_version: Some("v1.12.0".into()),
            guardrails,
            ..Default::default()
        };
        crate::server::create_class(&host, name, spec).await;
    }
    let c = InstanceServiceClient::new(api.channel.clone());
    let create = |name: &str, class: &str| {
        let inst = crate::server::managed_instance_of(name, class);
        let mut c = c.clone();
        async move {
            c.create_instance(CreateInstanceRequest {
                instance: Some(inst),
            })
            .await
        }
    };
    // A class that would push a Secret makes no instance, and says which entry.
    let refused = eventually(Duration::from_secs(10), "the leaky class seen", || async {
        match create("leaky-1", "leaky").await {
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Some(s),
            _ => None,
        }
    })
    .await;
    assert!(
        refused.message().contains("guardrails[0]") && refused.message().contains("\"Secret\""),
        "{}",
        refused.message()
    );
    create("guarded-1", "guarded").await.expect("created");
    let instances: kube::Api<Instance> = kube::Api::all(host.clone());
    let made = instances.get("guarded-1").await.expect("instance");
    assert_eq!(
        made.spec.guardrails,
        guardrails(),
        "the class's guardrails are the instance's"
    );

    let (status, message) = eventually(Duration::from_secs(60), "guardrails applied", || async {
        condition(&host, "guarded-1")
            .await
            .filter(|(s, _)| s == "True")
    })
    .await;
    assert_eq!(
        (status.as_str(), message.as_str()),
        ("True", "3 guardrail(s) applied")
    );

    // In force inside the instance: kubectl through Kairship's proxy is refused an
    // unpinned image and allowed a pinned one.
    let kc = api.proxy_kubeconfig("guarded-1");
    let deploy = |image: &str| {
        let args = [
            "create",
            "deployment",
            "web",
            "--namespace=default",
            &format!("--image={image}"),
        ];
        api.kubectl_with(&kc, &args)
    };
    let out = deploy("nginx:latest");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("images must be pinned"),
        "{err}"
    );
    let out = deploy("nginx:1.27.3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Labelled as Kairship's in the instance.
    let member = api.env.sim.client("guarded-1").await;
    let vaps: kube::Api<DynamicObject> = kube::Api::all_with(
        member.clone(),
        &resource(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
        ),
    );
    let vap = vaps
        .get("pinned-images")
        .await
        .expect("the policy is in the instance");
    assert_eq!(
        vap.metadata
            .labels
            .unwrap_or_default()
            .get("kairship.io/guardrail")
            .map(String::as_str),
        Some("true")
    );

    // Taken out of the list: deleted from the instance. Deleted in the instance: back at
    // the next pass (the spec change restarts the actor, which applies again).
    vaps.delete("pinned-images", &DeleteParams::default())
        .await
        .expect("deleted by hand");
    let fewer: Vec<Value> = guardrails().into_iter().take(2).collect();
    set_guardrails(&instances, "guarded-1", &fewer).await;
    let pps: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        member.clone(),
        "default",
        &resource(
            "policy.karmada.io",
            "v1alpha1",
            "PropagationPolicy",
            "propagationpolicies",
        ),
    );
    eventually(
        Duration::from_secs(60),
        "the policy taken out deleted, the VAP back",
        || async {
            let gone = pps.get_opt("spread-by-default").await.ok()?.is_none();
            let back = vaps.get_opt("pinned-images").await.ok()?.is_some();
            (gone && back).then_some(())
        },
    )
    .await;
    let (_, message) = eventually(Duration::from_secs(30), "the pass reported", || async {
        condition(&host, "guarded-1")
            .await
            .filter(|(_, m)| m.contains("deleted"))
    })
    .await;
    assert_eq!(
        message,
        "2 guardrail(s) applied, 1 no longer listed deleted"
    );
    // Its status shows where it now differs from its class.
    let drift = eventually(Duration::from_secs(30), "the drift reported", || async {
        let i = instances.get("guarded-1").await.ok()?;
        i.status?
            .drift
            .into_iter()
            .find(|d| d.field == "guardrails")
    })
    .await;
    assert_eq!(
        drift.instance,
        "[ValidatingAdmissionPolicy pinned-images, ValidatingAdmissionPolicyBinding pinned-images]"
    );
    assert!(
        drift
            .class
            .ends_with("PropagationPolicy default/spread-by-default]"),
        "{drift:?}"
    );

    // A class rollout moves the class's guardrails onto the instance (it has two now).
    let mut more = guardrails();
    more.push(json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "team-pods", "namespace": "default"}, "spec": {"hard": {"pods": "50"}}}));
    let (step, message) = roll(&api, &classes, "guardrails-1", more.clone()).await;
    assert_eq!(step, "Done", "{message}");
    assert_eq!(guardrails_of(&instances).await, more);
    assert_eq!(message, "Completed");
    eventually(Duration::from_secs(30), "four applied", || async {
        condition(&host, "guarded-1")
            .await
            .filter(|(_, m)| m == "4 guardrail(s) applied")
    })
    .await;
    // One the instance refuses (its namespace does not exist) fails the soak: the rollout
    // halts and the instance gets its guardrails from before back.
    let mut refused = more.clone();
    refused.push(json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "nowhere", "namespace": "missing"}, "spec": {"resourceSelectors": []}}));
    let (step, message) = roll(&api, &classes, "guardrails-2", refused).await;
    assert_eq!(step, "RolledBack", "{message}");
    assert!(
        message.contains("PropagationPolicy missing/nowhere"),
        "{message}"
    );
    assert_eq!(guardrails_of(&instances).await, more);
    eventually(Duration::from_secs(30), "four applied again", || async {
        condition(&host, "guarded-1")
            .await
            .filter(|(s, m)| s == "True" && m == "4 guardrail(s) applied")
    })
    .await;

    // A list granting a role where members' credentials live is refused whole; what is
    // applied stays.
    let mut bad = guardrails();
    bad.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-keys", "namespace": "karmada-cluster"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "tenants", "apiGroup": "rbac.authorization.k8s.io"}]}));
    set_guardrails(&instances, "guarded-1", &bad).await;
    let (_, message) = eventually(Duration::from_secs(60), "the bad list refused", || async {
        condition(&host, "guarded-1")
            .await
            .filter(|(s, _)| s == "False")
    })
    .await;
    assert!(
        message.contains("guardrails[3]") && message.contains("karmada-cluster"),
        "{message}"
    );
    assert!(
        vaps.get_opt("pinned-images").await.expect("read").is_some(),
        "what was applied stays"
    );
    let rbs: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        member,
        "karmada-cluster",
        &resource(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
        ),
    );
    assert!(
        rbs.get_opt("read-keys").await.expect("read").is_none(),
        "nothing granted"
    );
    api.stop().await;
}
