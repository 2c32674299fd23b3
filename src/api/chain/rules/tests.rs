use super::*;

#[test]
fn every_method_of_the_api_has_exactly_one_rule() {
    let pool = prost_reflect::DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET)
        .expect("descriptors");
    let mut seen = 0;
    for service in pool.services() {
        for method in service.methods() {
            let path = format!("/{}/{}", service.full_name(), method.name());
            let rules = GRPC.iter().filter(|(p, _)| *p == path).count();
            assert_eq!(rules, 1, "{path} has {rules} rules");
            seen += 1;
            // The fields a rule names exist in the method's request.
            let rule = grpc(&path).expect("rule");
            let input = method.input();
            let fields = [
                match rule.scope {
                    Scope::Instance(f) => Some(f),
                    _ => None,
                },
                rule.name_field,
                rule.namespace_field,
            ];
            for field in fields.into_iter().flatten() {
                let mut md = input.clone();
                let parts: Vec<&str> = field.split('.').collect();
                for (i, part) in parts.iter().enumerate() {
                    let fd = md
                        .get_field_by_name(part)
                        .unwrap_or_else(|| panic!("{path}: no field {field}"));
                    if i + 1 < parts.len() {
                        let prost_reflect::Kind::Message(inner) = fd.kind() else {
                            panic!("{path}: {part} of {field} is not a message");
                        };
                        md = inner;
                    }
                }
            }
        }
    }
    assert_eq!(
        seen + 2,
        GRPC.len(),
        "rules without a method (besides reflection)"
    );
}

#[test]
fn proxied_roles_follow_the_verb_and_the_scope() {
    let role = |m: Method, p: &str| proxy(&m, p, false).need;
    assert_eq!(role(Method::GET, "/apis/apps/v1/deployments"), Role::View);
    // The roles table: Secrets are edit's in workload namespaces, admin's elsewhere;
    // Works admin's; writes in system namespaces admin's.
    assert_eq!(
        role(Method::GET, "/api/v1/namespaces/x/secrets/s"),
        Role::Edit
    );
    assert_eq!(
        role(Method::GET, "/api/v1/namespaces/karmada-cluster/secrets/m1"),
        Role::Admin
    );
    assert_eq!(role(Method::GET, "/api/v1/secrets"), Role::Admin);
    assert_eq!(
        role(
            Method::GET,
            "/apis/work.karmada.io/v1alpha1/namespaces/karmada-es-m1/works"
        ),
        Role::Admin
    );
    assert_eq!(
        role(Method::POST, "/api/v1/namespaces/karmada-system/configmaps"),
        Role::Admin
    );
    assert_eq!(
        role(
            Method::GET,
            "/api/v1/namespaces/karmada-system/configmaps/c"
        ),
        Role::View
    );
    // An unnamed kind: reads view's, writes in workload namespaces edit's.
    assert_eq!(
        role(Method::POST, "/apis/example.com/v1/namespaces/x/widgets"),
        Role::Edit
    );
    assert_eq!(
        role(
            Method::POST,
            "/apis/example.com/v1/namespaces/kube-system/widgets"
        ),
        Role::Admin
    );
    assert_eq!(
        role(Method::POST, "/apis/apps/v1/namespaces/x/deployments"),
        Role::Edit
    );
    assert_eq!(
        role(Method::DELETE, "/api/v1/namespaces/x/configmaps/c"),
        Role::Edit
    );
    assert_eq!(
        role(
            Method::PATCH,
            "/apis/policy.karmada.io/v1alpha1/clusterpropagationpolicies/p"
        ),
        Role::Admin
    );
    assert_eq!(role(Method::POST, "/api/v1/namespaces"), Role::Admin);
    assert_eq!(
        role(
            Method::DELETE,
            "/apis/cluster.karmada.io/v1alpha1/clusters/m1"
        ),
        Role::Admin
    );
    let r = proxy(
        &Method::PUT,
        "/apis/apps/v1/namespaces/x/deployments/d",
        false,
    );
    assert_eq!(r.action(), "update deployments");
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref()),
        (Some("x"), Some("d"))
    );
    assert_eq!(
        proxy(&Method::GET, "/apis/apps/v1/deployments", true).verb,
        "watch"
    );
    // Through the cluster proxy, the path on the member decides.
    let member = "/apis/cluster.karmada.io/v1alpha1/clusters/member1/proxy";
    assert_eq!(
        role(Method::GET, &format!("{member}/api/v1/nodes")),
        Role::View
    );
    assert_eq!(
        role(
            Method::POST,
            &format!("{member}/api/v1/namespaces/default/configmaps")
        ),
        Role::Edit
    );
    assert_eq!(
        role(Method::DELETE, &format!("{member}/api/v1/nodes/n1")),
        Role::Admin
    );
    // exec by WebSocket is a GET, and still `create` on pods/exec; logs are a read.
    let exec = proxy(
        &Method::GET,
        &format!("{member}/api/v1/namespaces/x/pods/p/exec"),
        false,
    );
    assert_eq!((exec.verb, exec.need), ("create", Role::Edit));
    assert_eq!(exec.subresource.as_deref(), Some("exec"));
    assert_eq!(
        role(
            Method::POST,
            &format!("{member}/api/v1/namespaces/x/pods/p/portforward")
        ),
        Role::Edit
    );
    assert_eq!(
        role(
            Method::GET,
            &format!("{member}/api/v1/namespaces/x/pods/p/log")
        ),
        Role::View
    );
    assert!(
        proxy(&Method::DELETE, &format!("{member}/api/v1/nodes/n1"), false)
            .action()
            .ends_with("on a member cluster")
    );
    assert_eq!(
        role(
            Method::PATCH,
            "/apis/cluster.karmada.io/v1alpha1/clusters/member1"
        ),
        Role::Admin
    );
}
