//! The confused deputy: Kairship reads Secrets and writes `Karmada` objects on the host with
//! its own broad rights; an instance admin tries to make it do so for them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kairship::crd::Instance;
use kairship::host::karmada::karmada_resource;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::{
    CreateInstanceRequest, DeleteInstanceRequest, Instance as ProtoInstance, InstanceMode,
    InstanceSpec, ObjectMeta, SecretKeyRef,
};
use kairship_test_support::eventually;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use tonic::Code;

use crate::{with, Demo, SECRET_VALUE};

fn external(name: &str, namespace: &str, secret: &str) -> CreateInstanceRequest {
    CreateInstanceRequest {
        instance: Some(ProtoInstance {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(InstanceSpec {
                mode: InstanceMode::External as i32,
                kubeconfig_secret_ref: Some(SecretKeyRef {
                    namespace: namespace.into(),
                    name: secret.into(),
                    key: String::new(),
                }),
                ..Default::default()
            }),
            status: None,
        }),
    }
}

fn managed(name: &str, f: impl FnOnce(&mut InstanceSpec)) -> CreateInstanceRequest {
    let mut spec = InstanceSpec {
        mode: InstanceMode::Managed as i32,
        ..Default::default()
    };
    f(&mut spec);
    CreateInstanceRequest {
        instance: Some(ProtoInstance {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(spec),
            status: None,
        }),
    }
}

/// Finding: an instance admin pointed a new instance at another instance's kubeconfig
/// Secret and became cluster-admin there. Now the host is asked whether she may read it.
pub async fn another_instances_kubeconfig_secret(demo: &Demo) {
    let mallory = demo.token("mallory", &["red-team"]);
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    let e = c
        .create_instance(with(
            &mallory,
            external("stolen", "kairship-system", "karmada-1-kubeconfig"),
        ))
        .await
        .expect_err("another instance's Secret");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message()
            .contains("may not get Secret kairship-system/karmada-1-kubeconfig"),
        "{e:?}"
    );
    let instances: Api<Instance> = Api::all(demo.host.clone());
    assert!(
        instances.get_opt("stolen").await.expect("get").is_none(),
        "no Instance was created"
    );
    // The same Secret's existence is not told apart from a missing one.
    let e2 = c
        .create_instance(with(
            &mallory,
            external("stolen", "kairship-system", "no-such-secret"),
        ))
        .await
        .expect_err("a missing Secret");
    assert_eq!(e2.code(), Code::PermissionDenied, "{e2:?}");
    println!(
        "attack: another instance's kubeconfig Secret -> {:?}",
        e.code()
    );
}

/// Finding: any namespace's Secret could be named (a Secret oracle, and a read with
/// Kairship's ClusterRole). Now only the allowed namespaces, named in the refusal.
pub async fn secrets_outside_the_allowed_namespaces(demo: &Demo) {
    let mallory = demo.token("mallory", &[]);
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    for (ns, secret) in [("kube-system", "bootstrap-token-abcdef"), ("default", "x")] {
        let e = c
            .create_instance(with(&mallory, external("snoop", ns, secret)))
            .await
            .expect_err("a Secret outside Kairship's namespaces");
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(
            e.message()
                .contains("instance.spec.kubeconfig_secret_ref.namespace"),
            "{e:?}"
        );
        assert!(e.message().contains("kairship-system"), "{e:?}");
    }
    // Written straight to the host (as someone with host rights could), the actor still
    // refuses to read it.
    let instances: Api<Instance> = Api::all(demo.host.clone());
    let direct: Instance = serde_json::from_value(json!({
        "apiVersion": "kairship.io/v1alpha1", "kind": "Instance",
        "metadata": {"name": "snoop"},
        "spec": {"mode": "External", "external": {"kubeconfigSecretRef":
            {"namespace": "kube-system", "name": "anything"}}}
    }))
    .expect("instance");
    instances
        .create(&PostParams::default(), &direct)
        .await
        .expect("written to the host");
    let message = eventually(Duration::from_secs(20), "snoop refused", || async {
        let i = instances.get_opt("snoop").await.ok()??;
        let text = serde_json::to_string(&i.status?).ok()?;
        text.contains("reads kubeconfig Secrets only in")
            .then_some(text)
    })
    .await;
    assert!(message.contains("kube-system"), "{message}");
    instances
        .delete("snoop", &Default::default())
        .await
        .expect("delete");
    println!("attack: Secrets outside kairship-system -> refused by the API and the actor");
}

/// Finding: a value that is not a kubeconfig was quoted by the parser into the
/// Instance's status, the actor's last error and the log.
pub async fn secret_contents_are_never_quoted(demo: &Demo) {
    let secrets: Api<Secret> = Api::namespaced(demo.host.clone(), "kairship-system");
    let mut s = Secret::default();
    s.metadata.name = Some("not-a-kubeconfig".into());
    s.data = Some(
        [(
            "kubeconfig".to_string(),
            ByteString(format!("password: {SECRET_VALUE}\n[").into_bytes()),
        )]
        .into(),
    );
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("secret");
    // The platform admin may read it, so Kairship reads it for them.
    let admin = demo.admin_token();
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    c.create_instance(with(
        &admin,
        external("leaky", "kairship-system", "not-a-kubeconfig"),
    ))
    .await
    .expect("the admin may");
    let instances: Api<Instance> = Api::all(demo.host.clone());
    let status = eventually(Duration::from_secs(20), "leaky's failure", || async {
        let i = instances.get_opt("leaky").await.ok()??;
        let text = serde_json::to_string(&i.status?).ok()?;
        text.contains("not-a-kubeconfig").then_some(text)
    })
    .await;
    assert!(!status.contains(SECRET_VALUE), "{status}");
    assert!(
        status.contains("is not a kubeconfig"),
        "the failure says what is wrong: {status}"
    );
    c.delete_instance(with(
        &admin,
        DeleteInstanceRequest {
            name: "leaky".into(),
        },
    ))
    .await
    .expect("delete");
    println!("attack: a Secret's content in the status -> named, never quoted");
}

/// Finding: managed mode adopted, patched and on delete removed any `Karmada` object of
/// the instance's name. Someone else's stays someone else's.
pub async fn someone_elses_karmada_object_is_not_adopted(demo: &Demo) {
    let karmadas: Api<DynamicObject> =
        Api::namespaced_with(demo.host.clone(), "kairship-system", &karmada_resource());
    let theirs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "operator.karmada.io/v1alpha1", "kind": "Karmada",
        "metadata": {"name": "victim", "namespace": "kairship-system"},
        "spec": {"components": {"karmadaScheduler": {"replicas": 3}}}
    }))
    .expect("karmada");
    karmadas
        .create(&PostParams::default(), &theirs)
        .await
        .expect("someone else's control plane");
    let mallory = demo.token("mallory", &[]);
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    c.create_instance(with(
        &mallory,
        managed("victim", |s| s.karmada_version = "v1.13.0".into()),
    ))
    .await
    .expect("the Instance itself may be created");
    let instances: Api<Instance> = Api::all(demo.host.clone());
    let status = eventually(Duration::from_secs(20), "victim refused", || async {
        let i = instances.get_opt("victim").await.ok()??;
        let text = serde_json::to_string(&i.status?).ok()?;
        text.contains("is not Kairship's").then_some(text)
    })
    .await;
    println!("attack: adopting someone else's Karmada object -> {status}");
    crate::karmada::components_of_someone_elses_karmada(demo, "victim").await;
    // Not patched: the version mallory asked for is not in it, nor Kairship's mark.
    let after = karmadas.get("victim").await.expect("still there");
    assert!(
        !after.data["spec"].to_string().contains("v1.13.0"),
        "{}",
        after.data["spec"]
    );
    assert_eq!(
        after.data["spec"]["components"]["karmadaScheduler"]["replicas"],
        3
    );
    assert!(
        !after
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(kairship::actors::instance::connect::SPEC_APPLIED_AT),
        "Kairship never wrote it"
    );
    c.delete_instance(with(
        &mallory,
        DeleteInstanceRequest {
            name: "victim".into(),
        },
    ))
    .await
    .expect("delete");
    eventually(Duration::from_secs(20), "the Instance gone", || async {
        instances
            .get_opt("victim")
            .await
            .ok()
            .filter(Option::is_none)
    })
    .await;
    assert!(
        karmadas.get_opt("victim").await.expect("get").is_some(),
        "deleting the Instance left someone else's Karmada object"
    );
}

/// Finding: the namespace of a managed control plane, its images and its CRD source were
/// the caller's to choose: images then ran in the host, and the operator fetched any URL.
pub async fn managed_specs_stay_in_scope(demo: &Demo) {
    let mallory = demo.token("mallory", &[]);
    let mut c = InstanceServiceClient::new(demo.grpc().await);
    type Change = fn(&mut InstanceSpec);
    let cases: [(&str, Change); 4] = [
        ("instance.spec.managed_namespace", |s| {
            s.managed_namespace = "kube-system".into()
        }),
        ("instance.spec.image_registry", |s| {
            s.image_registry = "evil.example/karmada".into()
        }),
        ("instance.spec.component_images", |s| {
            s.component_images = [(
                "karmadaScheduler".to_string(),
                kairship::proto::ComponentImage {
                    repository: "docker.io/karmadaevil/scheduler".into(),
                    tag: "v1".into(),
                },
            )]
            .into()
        }),
        ("instance.spec.crd_tarball_url", |s| {
            s.crd_tarball_url = "http://169.254.169.254/latest/meta-data/crds.tar.gz".into()
        }),
    ];
    for (field, change) in cases {
        let e = c
            .create_instance(with(&mallory, managed("borrowed", change)))
            .await
            .expect_err(field);
        assert_eq!(e.code(), Code::InvalidArgument, "{field}: {e:?}");
        assert!(e.message().contains(field), "{field}: {e:?}");
    }
    let instances: Api<Instance> = Api::all(demo.host.clone());
    assert!(instances.get_opt("borrowed").await.expect("get").is_none());
    println!("attack: managed namespace, images and CRD URL out of scope -> INVALID_ARGUMENT");
}
