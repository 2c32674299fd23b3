//! Identities an IdP (or a token file) may not grant: Kairship's own role groups, which
//! were forwarded to instances as `Impersonate-Group`, and Kubernetes' `system:` names.

use k8s_openapi::api::core::v1::Secret;
use kairship::proto::access_service_client::AccessServiceClient;
use kairship::proto::instance_service_client::InstanceServiceClient;
use kairship::proto::{GetCallerRequest, ListInstancesRequest};
use kube::api::{Api, ListParams};
use tonic::Code;

use crate::{with, Demo};

/// Finding: a viewer whose IdP emits `kairship:admin` was cluster-admin on the instance
/// (the group reached it as `Impersonate-Group`), `system:masters` likewise.
pub async fn an_idps_kairship_and_system_groups_are_dropped(demo: &Demo) {
    let vera = demo.token("vera", &["kairship:admin", "system:masters", "auditors"]);
    let me = AccessServiceClient::new(demo.grpc().await)
        .get_caller(with(&vera, GetCallerRequest {}))
        .await
        .expect("whoami")
        .into_inner();
    assert_eq!(me.name, "vera");
    assert!(
        me.groups.contains(&"auditors".to_string())
            && !me.groups.iter().any(|g| g.starts_with("kairship:"))
            && !me.groups.iter().any(|g| g == "system:masters"),
        "{:?}",
        me.groups
    );
    // On the instance she is a viewer: Kubernetes' view, which reads no Secrets. With the
    // forged group she read them all.
    let proxied = demo.proxy("karmada-1", &vera).await;
    let secrets: Api<Secret> = Api::namespaced(proxied, "default");
    let e = secrets
        .list(&ListParams::default())
        .await
        .expect_err("a viewer reads no Secrets");
    match e {
        kube::Error::Api(s) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("{other:?}"),
    }
    println!("attack: an IdP's kairship:admin and system:masters groups -> dropped");
}

/// Finding: usernames such as `system:kube-controller-manager` passed through unfiltered,
/// to be impersonated with that component's rights.
pub async fn system_usernames_are_refused(demo: &Demo) {
    let kcm = demo.token("system:kube-controller-manager", &[]);
    let e = InstanceServiceClient::new(demo.grpc().await)
        .list_instances(with(&kcm, ListInstancesRequest::default()))
        .await
        .expect_err("a system: user");
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let rest = demo.client("", &kcm).await;
    let req = http::Request::get("/apis/kairship.io/v1alpha1/instances")
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = rest.send(req).await.expect("REST answers");
    assert_eq!(resp.status(), 401, "REST refuses");
    let proxied = demo.proxy("karmada-1", &kcm).await;
    let e = Api::<Secret>::namespaced(proxied, "default")
        .list(&ListParams::default())
        .await
        .expect_err("the proxy refuses");
    match e {
        kube::Error::Api(s) => assert_eq!(s.code, 401, "{s:?}"),
        other => panic!("{other:?}"),
    }
    println!("attack: a system: username -> 401 on every surface");
}
