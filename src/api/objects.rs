//! Kubernetes objects submitted through the API: parsed and checked against the kinds a
//! service accepts, then written to the instance's karmada-apiserver with a timeout.

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};

use super::router::Routed;
use crate::actors::instance::caches::Kind;
use crate::error::{check_name, ApiError};

pub fn kind(field: &str, name: &str, among: &[Kind]) -> Result<Kind, ApiError> {
    Kind::from_name(name, among).ok_or_else(|| {
        let names: Vec<String> = among.iter().map(|k| k.resource().kind).collect();
        ApiError::invalid(
            field,
            format!("{name:?} is not one of {}", names.join(", ")),
        )
    })
}

/// Parses `object_json`, checking apiVersion, kind, name and (for namespaced kinds) namespace.
pub fn parse(object_json: &str, among: &[Kind]) -> Result<(Kind, DynamicObject), ApiError> {
    let obj: DynamicObject = serde_json::from_str(object_json)
        .map_err(|e| ApiError::invalid("object_json", format!("not a Kubernetes object: {e}")))?;
    let types = obj
        .types
        .as_ref()
        .ok_or_else(|| ApiError::invalid("object_json", "apiVersion and kind are required"))?;
    let kind = kind("object_json.kind", &types.kind, among)?;
    if types.api_version != kind.resource().api_version {
        return Err(ApiError::invalid(
            "object_json.apiVersion",
            format!(
                "{} is served as {}, not {}",
                types.kind,
                kind.resource().api_version,
                types.api_version
            ),
        ));
    }
    check_name(
        "object_json.metadata.name",
        obj.metadata.name.as_deref().unwrap_or(""),
    )?;
    if kind.namespaced() {
        check_name(
            "object_json.metadata.namespace",
            obj.metadata.namespace.as_deref().unwrap_or(""),
        )?;
    }
    Ok((kind, obj))
}

fn api(
    routed: &Routed,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Api<DynamicObject>, ApiError> {
    let client = routed.client.clone().ok_or_else(|| {
        ApiError::Unavailable(format!("instance {:?} is not connected", routed.name))
    })?;
    Ok(match (kind.namespaced(), namespace) {
        (true, Some(ns)) => Api::namespaced_with(client, ns, &kind.resource()),
        _ => Api::all_with(client, &kind.resource()),
    })
}

fn describe(kind: Kind, obj: &DynamicObject) -> String {
    format!(
        "{} {:?}",
        kind.resource().kind,
        obj.metadata.name.as_deref().unwrap_or("")
    )
}

/// Acknowledged only once the instance accepted it.
pub async fn create(
    routed: &Routed,
    kind: Kind,
    obj: &DynamicObject,
) -> Result<DynamicObject, ApiError> {
    routed
        .call(
            &describe(kind, obj),
            api(routed, kind, obj.metadata.namespace.as_deref())?
                .create(&PostParams::default(), obj),
        )
        .await
}

pub async fn replace(
    routed: &Routed,
    kind: Kind,
    obj: &DynamicObject,
) -> Result<DynamicObject, ApiError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    routed
        .call(
            &describe(kind, obj),
            api(routed, kind, obj.metadata.namespace.as_deref())?.replace(
                &name,
                &PostParams::default(),
                obj,
            ),
        )
        .await
}

/// A JSON merge patch (carry `metadata.resourceVersion` in it to guard against races).
pub async fn merge_patch(
    routed: &Routed,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<DynamicObject, ApiError> {
    let what = format!("{} {name:?}", kind.resource().kind);
    routed
        .call(
            &what,
            api(routed, kind, namespace)?.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            ),
        )
        .await
}

/// A live read (not the cache), for read-modify-write.
pub async fn get_live(
    routed: &Routed,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, ApiError> {
    let what = format!("{} {name:?}", kind.resource().kind);
    routed
        .call(&what, api(routed, kind, namespace)?.get(name))
        .await
}

pub async fn delete(
    routed: &Routed,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    let what = format!("{} {name:?}", kind.resource().kind);
    routed
        .call(
            &what,
            api(routed, kind, namespace)?.delete(name, &DeleteParams::default()),
        )
        .await
        .map(|_| ())
}

/// A cached object with its kind.
pub type Cached = (Kind, std::sync::Arc<DynamicObject>);

/// Cached objects of one kind (`kind`) or of all `among` (empty `kind`), filtered by
/// namespace (namespaced kinds only) and label selector, keyed `namespace/Kind/name`
/// for paging.
pub fn cached(
    routed: &Routed,
    kind: &str,
    among: &[Kind],
    namespace: &str,
    opts: Option<&crate::proto::ListOptions>,
) -> Result<Vec<(String, Cached)>, ApiError> {
    let kinds: Vec<Kind> = match kind {
        "" => among.to_vec(),
        k => vec![self::kind("kind", k, among)?],
    };
    let sel = super::paging::selector(opts)?;
    let mut items = Vec::new();
    for kind in kinds {
        let Some(store) = routed.stores.get(&kind) else {
            continue;
        };
        for o in store.state() {
            let ns = o.metadata.namespace.clone().unwrap_or_default();
            if (!namespace.is_empty() && kind.namespaced() && ns != namespace)
                || !super::paging::labels_match(&sel, o.metadata.labels.as_ref())
            {
                continue;
            }
            let key = format!(
                "{ns}/{}/{}",
                kind.resource().kind,
                o.metadata.name.as_deref().unwrap_or_default()
            );
            items.push((key, (kind, o)));
        }
    }
    Ok(items)
}
