//! Request paths of the Kubernetes API, parsed into what they address.

/// A resource path: `/api/v1/...` or `/apis/{group}/{version}/...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix.
    pub watch_prefix: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Root,
    Version,
    Health,
    OpenApi,
    CoreVersions,
    GroupList,
    Group(String),
    ResourceList {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
    /// `clusters/{cluster}/proxy/{path}` of cluster.karmada.io: a member cluster's API.
    ClusterProxy {
        cluster: String,
        path: String,
    },
    NotFound,
}

pub fn parse(path: &str) -> Route {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        [] => Route::Root,
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["openapi", ..] => Route::OpenApi,
        ["api"] => Route::CoreVersions,
        ["api", v] => Route::ResourceList {
            group: String::new(),
            version: v.to_string(),
        },
        ["api", v, rest @ ..] => resource("", v, rest),
        ["apis"] => Route::GroupList,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::ResourceList {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["apis", "cluster.karmada.io", "v1alpha1", "clusters", cluster, "proxy", rest @ ..] => {
            Route::ClusterProxy {
                cluster: cluster.to_string(),
                path: format!("/{}", rest.join("/")),
            }
        }
        ["apis", g, v, rest @ ..] => resource(g, v, rest),
        _ => Route::NotFound,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let (watch_prefix, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let mk = |ns: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            subresource: sub.map(String::from),
            watch_prefix,
        })
    };
    match rest {
        // `namespaces/{name}/status` addresses the Namespace itself, not a resource in it.
        ["namespaces", name, sub @ ("status" | "finalize")] if group.is_empty() => {
            mk(None, "namespaces", Some(name), Some(sub))
        }
        ["namespaces", ns, plural] => mk(Some(ns), plural, None, None),
        ["namespaces", ns, plural, name] => mk(Some(ns), plural, Some(name), None),
        ["namespaces", ns, plural, name, sub] => mk(Some(ns), plural, Some(name), Some(sub)),
        [plural] => mk(None, plural, None, None),
        [plural, name] => mk(None, plural, Some(name), None),
        [plural, name, sub] => mk(None, plural, Some(name), Some(sub)),
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rp(route: Route) -> ResourcePath {
        match route {
            Route::Resource(r) => r,
            other => panic!("not a resource: {other:?}"),
        }
    }

    #[test]
    fn parses_core_and_group_paths() {
        let r = rp(parse("/api/v1/namespaces/default/configmaps/x"));
        assert_eq!(
            (
                r.group.as_str(),
                r.plural.as_str(),
                r.namespace.as_deref(),
                r.name.as_deref()
            ),
            ("", "configmaps", Some("default"), Some("x"))
        );
        let r = rp(parse("/apis/apps/v1/namespaces/d/deployments/web/status"));
        assert_eq!(
            (r.group.as_str(), r.subresource.as_deref()),
            ("apps", Some("status"))
        );
        let r = rp(parse("/api/v1/namespaces/foo"));
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref(), r.namespace),
            ("namespaces", Some("foo"), None)
        );
        let r = rp(parse("/api/v1/namespaces/foo/status"));
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = rp(parse("/apis/cluster.karmada.io/v1alpha1/clusters"));
        assert_eq!((r.plural.as_str(), r.namespace), ("clusters", None));
        assert_eq!(
            parse("/apis/apps/v1"),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert!(rp(parse("/api/v1/watch/namespaces/d/configmaps")).watch_prefix);
    }
}
