//! Authorization as a kube-apiserver with `--authorization-mode=RBAC` does it:
//! impersonation (`Impersonate-User`/`-Group`/`-Uid`, itself authorized by the
//! `impersonate` verb), request attributes from the HTTP request, RBAC decisions over the
//! server's own Roles and bindings, and SubjectAccessReviews.

pub mod defaults;
pub mod rules;

use http::{HeaderMap, Method};
use serde_json::{json, Value};

use crate::store::{Filter, Store};
use kairship_wire::routes::{ResourcePath, Route};
use kairship_wire::status::{ApiError, ApiResult};
use rules::Snapshot;

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
}

impl Identity {
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// What a request does, as RBAC rules name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Set for paths that are not resources (`/version`, discovery).
    pub non_resource_path: Option<String>,
}

/// The attributes of a request (`watch` says whether its query asks for a watch).
pub fn attributes(method: &Method, path: &str, route: &Route, watch: bool) -> Attributes {
    // Karmada's cluster proxy is the Cluster's `proxy` subresource, whatever the path
    // under it, with the verb of the method (as kube-apiserver reads any subresource).
    if let Route::ClusterProxy { cluster, .. } = route {
        let verb = match *method {
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "unknown",
        };
        return Attributes {
            verb: verb.into(),
            group: "cluster.karmada.io".into(),
            resource: "clusters".into(),
            subresource: Some("proxy".into()),
            namespace: None,
            name: Some(cluster.to_string()),
            non_resource_path: None,
        };
    }
    let Route::Resource(rp) = route else {
        return Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            group: String::new(),
            resource: String::new(),
            subresource: None,
            namespace: None,
            name: None,
            non_resource_path: Some(path.to_string()),
        };
    };
    let verb = match (method, rp.name.is_some()) {
        (&Method::GET | &Method::HEAD, _) if watch || rp.watch_prefix => "watch",
        (&Method::GET | &Method::HEAD, true) => "get",
        (&Method::GET | &Method::HEAD, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    };
    resource_attributes(verb, rp)
}

fn resource_attributes(verb: &str, rp: &ResourcePath) -> Attributes {
    Attributes {
        verb: verb.into(),
        group: rp.group.clone(),
        resource: rp.plural.clone(),
        subresource: rp.subresource.clone(),
        namespace: rp.namespace.clone(),
        name: rp.name.clone(),
        non_resource_path: None,
    }
}

/// The message kube-apiserver's RBAC authorizer gives a denied request.
pub fn forbidden(who: &Identity, a: &Attributes) -> ApiError {
    let Some(path) = &a.non_resource_path else {
        let mut e = ApiError::forbidden(kairship_wire::status::forbidden_message(
            kairship_wire::status::Refused {
                user: &who.user,
                verb: &a.verb,
                group: &a.group,
                resource: &a.resource,
                subresource: a.subresource.as_deref(),
                name: a.name.as_deref(),
                namespace: a.namespace.as_deref(),
            },
        ));
        e.details = Some(
            json!({"name": a.name.clone().unwrap_or_default(), "group": a.group, "kind": a.resource}),
        );
        return e;
    };
    ApiError::forbidden(format!(
        "forbidden: User {:?} cannot {} path {path:?}",
        who.user, a.verb
    ))
}

/// Reads the RBAC objects of a store.
pub fn snapshot(store: &Store) -> Snapshot {
    let all = |plural: &str| -> Vec<Value> {
        store
            .lookup("rbac.authorization.k8s.io", "v1", plural)
            .and_then(|def| store.list(&def, &Filter::default(), None, None).ok())
            .map(|page| page.items.iter().map(|o| o.value.clone()).collect())
            .unwrap_or_default()
    };
    Snapshot {
        cluster_roles: all("clusterroles"),
        cluster_role_bindings: all("clusterrolebindings"),
        roles: all("roles"),
        role_bindings: all("rolebindings"),
    }
}

/// Allowed (with the reason) or not.
pub fn authorize(store: &Store, who: &Identity, a: &Attributes) -> Option<String> {
    // cluster-admin's binding makes this true through RBAC too; answering first keeps the
    // common case (the simulator's own admin token) free of a scan.
    if who.is_master() {
        return Some("allowed: member of system:masters".into());
    }
    rules::decide(&snapshot(store), who, a)
}

fn impersonation(verb_target: (&str, &str), name: &str) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        group: verb_target.0.into(),
        resource: verb_target.1.into(),
        subresource: None,
        namespace: None,
        name: Some(name.to_string()),
        non_resource_path: None,
    }
}

/// The identity a request acts as: the caller's own, or the one it impersonates when the
/// caller may (the `impersonate` verb on users, groups and uids).
pub fn effective(store: &Store, real: Identity, headers: &HeaderMap) -> ApiResult<Identity> {
    let values = |name: &str| -> ApiResult<Vec<String>> {
        headers
            .get_all(name)
            .iter()
            .map(|v| {
                v.to_str()
                    .map(String::from)
                    .map_err(|_| ApiError::bad_request(format!("header {name} is not valid text")))
            })
            .collect()
    };
    let users = values("impersonate-user")?;
    let groups = values("impersonate-group")?;
    let uids = values("impersonate-uid")?;
    let Some(user) = users.first().cloned() else {
        if !groups.is_empty() || !uids.is_empty() {
            return Err(ApiError::internal(
                "requested [] without impersonating a user".to_string(),
            ));
        }
        return Ok(real);
    };
    if users.len() > 1 || uids.len() > 1 {
        return Err(ApiError::bad_request(
            "only one Impersonate-User and one Impersonate-Uid may be given",
        ));
    }
    let mut checks = vec![impersonation(("", "users"), &user)];
    checks.extend(groups.iter().map(|g| impersonation(("", "groups"), g)));
    checks.extend(
        uids.iter()
            .map(|u| impersonation(("authentication.k8s.io", "uids"), u)),
    );
    for a in &checks {
        if authorize(store, &real, a).is_none() {
            let mut e = forbidden(&real, a);
            e.message = format!(
                "{} {:?} is forbidden: User {:?} cannot impersonate resource {:?} in API group {:?} at the cluster scope",
                a.resource.trim_end_matches('s'),
                a.name.clone().unwrap_or_default(),
                real.user,
                a.resource,
                a.group
            );
            return Err(e);
        }
    }
    let mut groups = groups;
    // As kube-apiserver: an impersonated (non-anonymous) user is authenticated.
    if user != "system:anonymous" && !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Ok(Identity {
        user,
        uid: uids.into_iter().next().unwrap_or_default(),
        groups,
    })
}

/// Answers a `SubjectAccessReview` (or, with `self_review`, a `SelfSubjectAccessReview`
/// about `caller`): the object posted, with `status` filled.
pub fn review(
    store: &Store,
    caller: &Identity,
    mut body: Value,
    self_review: bool,
) -> ApiResult<Value> {
    let spec = &body["spec"];
    let who = if self_review {
        caller.clone()
    } else {
        let user = spec["user"].as_str().unwrap_or_default().to_string();
        let groups: Vec<String> = spec["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .collect();
        if user.is_empty() && groups.is_empty() {
            return Err(ApiError::invalid(
                kairship_wire::status::Target {
                    group: "authorization.k8s.io",
                    kind: "SubjectAccessReview",
                    plural: "subjectaccessreviews",
                    name: "",
                },
                "spec.user",
                "at least one of user or group must be specified",
            ));
        }
        Identity {
            user,
            uid: spec["uid"].as_str().unwrap_or_default().into(),
            groups,
        }
    };
    let a = if let Some(ra) = spec["resourceAttributes"].as_object() {
        let s = |k: &str| {
            ra.get(k)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(String::from)
        };
        Attributes {
            verb: s("verb").unwrap_or_default(),
            group: s("group").unwrap_or_default(),
            resource: s("resource").unwrap_or_default(),
            subresource: s("subresource"),
            namespace: s("namespace"),
            name: s("name"),
            non_resource_path: None,
        }
    } else if let Some(nr) = spec["nonResourceAttributes"].as_object() {
        Attributes {
            verb: nr
                .get("verb")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into(),
            group: String::new(),
            resource: String::new(),
            subresource: None,
            namespace: None,
            name: None,
            non_resource_path: Some(
                nr.get("path")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
            ),
        }
    } else {
        return Err(ApiError::bad_request(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    body["status"] = match authorize(store, &who, &a) {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    };
    Ok(body)
}
