//! The operations kube-apiserver publishes for each served resource: list, create and
//! delete-collection on the collection, get, replace, patch and delete on an object, and
//! the `status` and `scale` subresources, named as kube-apiserver names them.

use serde_json::{json, Value};

use super::{Catalog, Published};

/// What one operation does, as `x-kubernetes-action` names it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    List,
    Post,
    DeleteCollection,
    Get,
    Put,
    Patch,
    Delete,
}

/// One operation, before it is written in either OpenAPI version.
pub(super) struct Operation {
    pub(super) method: &'static str,
    pub(super) action: Action,
    pub(super) id: String,
    pub(super) description: String,
    pub(super) query: &'static [&'static str],
    pub(super) body: Option<String>,
    pub(super) response: String,
    pub(super) gvk: Value,
    pub(super) tag: String,
    /// Strategic merge patch is accepted (built-in kinds; never custom resources).
    pub(super) strategic: bool,
}

/// The paths of one group-version (all of them for `None`), with their operations.
pub(super) fn operations(catalog: &Catalog, gv: Option<&str>) -> Vec<(String, Vec<Operation>)> {
    let mut paths = Vec::new();
    for p in catalog
        .resources
        .iter()
        .filter(|p| gv.is_none_or(|gv| gv == group_version_path(p)))
    {
        paths.extend(resource_paths(p));
    }
    paths
}

/// `api/v1` or `apis/{group}/{version}`: where a group-version's paths live.
pub(super) fn group_version_path(p: &Published) -> String {
    match p.def.group.as_str() {
        "" => format!("api/{}", p.version),
        g => format!("apis/{g}/{}", p.version),
    }
}

const LIST_QUERY: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_QUERY: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_QUERY: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "orphanDependents",
    "propagationPolicy",
];

fn resource_paths(p: &Published) -> Vec<(String, Vec<Operation>)> {
    let def = &p.def;
    let base = format!("/{}", group_version_path(p));
    let ns = if def.namespaced { "Namespaced" } else { "" };
    let gv = camel_group_version(&def.group, &p.version);
    let kind = &def.kind;
    let tag = tag(&def.group, &p.version);
    let object = p.definition.clone();
    let list = format!("{object}List");
    let gvk = json!({"group": p.gvk.group, "kind": p.gvk.kind, "version": p.gvk.version});
    let op = |method,
              action,
              id: String,
              description: String,
              query,
              body: Option<&str>,
              response: &str| Operation {
        method,
        action,
        id,
        description,
        query,
        body: body.map(String::from),
        response: response.to_string(),
        gvk: gvk.clone(),
        tag: tag.clone(),
        strategic: def.builtin,
    };
    let collection = match def.namespaced {
        true => format!("{base}/namespaces/{{namespace}}/{}", def.plural),
        false => format!("{base}/{}", def.plural),
    };
    let item = format!("{collection}/{{name}}");
    if crate::resources::is_review(def) {
        return vec![(
            collection,
            vec![op(
                "post",
                Action::Post,
                format!("create{gv}{ns}{kind}"),
                format!("create a {kind}"),
                WRITE_QUERY,
                Some(&object),
                &object,
            )],
        )];
    }
    let mut out = vec![
        (
            collection.clone(),
            vec![
                op(
                    "get",
                    Action::List,
                    format!("list{gv}{ns}{kind}"),
                    format!("list or watch objects of kind {kind}"),
                    LIST_QUERY,
                    None,
                    &list,
                ),
                op(
                    "post",
                    Action::Post,
                    format!("create{gv}{ns}{kind}"),
                    format!("create a {kind}"),
                    WRITE_QUERY,
                    Some(&object),
                    &object,
                ),
                op(
                    "delete",
                    Action::DeleteCollection,
                    format!("delete{gv}Collection{ns}{kind}"),
                    format!("delete collection of {kind}"),
                    DELETE_QUERY,
                    Some(DELETE_OPTIONS),
                    STATUS,
                ),
            ],
        ),
        (
            item.clone(),
            vec![
                op(
                    "get",
                    Action::Get,
                    format!("read{gv}{ns}{kind}"),
                    format!("read the specified {kind}"),
                    &[],
                    None,
                    &object,
                ),
                op(
                    "put",
                    Action::Put,
                    format!("replace{gv}{ns}{kind}"),
                    format!("replace the specified {kind}"),
                    WRITE_QUERY,
                    Some(&object),
                    &object,
                ),
                op(
                    "patch",
                    Action::Patch,
                    format!("patch{gv}{ns}{kind}"),
                    format!("partially update the specified {kind}"),
                    PATCH_QUERY,
                    Some(PATCH),
                    &object,
                ),
                op(
                    "delete",
                    Action::Delete,
                    format!("delete{gv}{ns}{kind}"),
                    format!("delete a {kind}"),
                    DELETE_QUERY,
                    Some(DELETE_OPTIONS),
                    STATUS,
                ),
            ],
        ),
    ];
    if def.namespaced {
        out.push((
            format!("{base}/{}", def.plural),
            vec![op(
                "get",
                Action::List,
                format!("list{gv}{kind}ForAllNamespaces"),
                format!("list or watch objects of kind {kind}"),
                LIST_QUERY,
                None,
                &list,
            )],
        ));
    }
    if def.status_subresource {
        out.push((
            format!("{item}/status"),
            vec![
                op(
                    "get",
                    Action::Get,
                    format!("read{gv}{ns}{kind}Status"),
                    format!("read status of the specified {kind}"),
                    &[],
                    None,
                    &object,
                ),
                op(
                    "put",
                    Action::Put,
                    format!("replace{gv}{ns}{kind}Status"),
                    format!("replace status of the specified {kind}"),
                    WRITE_QUERY,
                    Some(&object),
                    &object,
                ),
                op(
                    "patch",
                    Action::Patch,
                    format!("patch{gv}{ns}{kind}Status"),
                    format!("partially update status of the specified {kind}"),
                    PATCH_QUERY,
                    Some(PATCH),
                    &object,
                ),
            ],
        ));
    }
    if crate::server::scale::served(def) {
        let scale = "io.k8s.api.autoscaling.v1.Scale";
        let scale_gvk = json!({"group": "autoscaling", "kind": "Scale", "version": "v1"});
        let mut ops = vec![
            op(
                "get",
                Action::Get,
                format!("read{gv}{ns}{kind}Scale"),
                format!("read scale of the specified {kind}"),
                &[],
                None,
                scale,
            ),
            op(
                "put",
                Action::Put,
                format!("replace{gv}{ns}{kind}Scale"),
                format!("replace scale of the specified {kind}"),
                WRITE_QUERY,
                Some(scale),
                scale,
            ),
            op(
                "patch",
                Action::Patch,
                format!("patch{gv}{ns}{kind}Scale"),
                format!("partially update scale of the specified {kind}"),
                PATCH_QUERY,
                Some(PATCH),
                scale,
            ),
        ];
        for o in &mut ops {
            o.gvk = scale_gvk.clone();
        }
        out.push((format!("{item}/scale"), ops));
    }
    out
}

const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// `AppsV1`, `CoreV1`, `RbacAuthorizationV1`, `PolicyKarmadaIoV1alpha1`: operation ids'
/// group-version part (`.k8s.io` dropped, as kube-apiserver does).
fn camel_group_version(group: &str, version: &str) -> String {
    let group = match group {
        "" => "core",
        g => g.strip_suffix(".k8s.io").unwrap_or(g),
    };
    let mut out = String::new();
    for part in group.split(['.', '-']) {
        let mut c = part.chars();
        if let Some(first) = c.next() {
            out.extend(first.to_uppercase());
            out.push_str(c.as_str());
        }
    }
    let mut v = version.chars();
    if let Some(first) = v.next() {
        out.extend(first.to_uppercase());
        out.push_str(v.as_str());
    }
    out
}

/// `apps_v1`, `rbacAuthorization_v1`: the tag grouping a group-version's operations.
fn tag(group: &str, version: &str) -> String {
    let camel = camel_group_version(group, version);
    let group_part = &camel[..camel.len() - version.len()];
    let mut c = group_part.chars();
    let lower: String = c
        .next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default();
    format!("{lower}_{version}")
}

impl Action {
    /// As `x-kubernetes-action` names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Action::List => "list",
            Action::Post => "post",
            Action::DeleteCollection => "deletecollection",
            Action::Get => "get",
            Action::Put => "put",
            Action::Patch => "patch",
            Action::Delete => "delete",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kube_apiserver() {
        assert_eq!(camel_group_version("", "v1"), "CoreV1");
        assert_eq!(
            camel_group_version("rbac.authorization.k8s.io", "v1"),
            "RbacAuthorizationV1"
        );
        assert_eq!(
            camel_group_version("policy.karmada.io", "v1alpha1"),
            "PolicyKarmadaIoV1alpha1"
        );
        assert_eq!(tag("apps", "v1"), "apps_v1");
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
    }
}
