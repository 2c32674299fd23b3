//! Kubernetes objects submitted through the API: parsed and checked against the kinds a
//! service accepts, then written to the instance's karmada-apiserver as the caller
//! (`request::OnInstance::write`: bounded, audited, marked for read-your-writes).

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};

use super::request::{OnInstance, Reads};
use crate::cache::caches::Kind;
use crate::cache::object::CachedObject;
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

fn describe(kind: Kind, obj: &DynamicObject) -> String {
    format!(
        "{} {:?}",
        kind.resource().kind,
        obj.metadata.name.as_deref().unwrap_or("")
    )
}

/// Acknowledged only once the instance accepted it (as the caller).
pub async fn create(
    on: &OnInstance,
    kind: Kind,
    obj: &DynamicObject,
) -> Result<DynamicObject, ApiError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let ns = obj.metadata.namespace.as_deref();
    on.write(kind, ns, &name, |api| async move {
        api.create(&PostParams::default(), obj).await.map(Some)
    })
    .await?
    .ok_or_else(|| ApiError::Internal(format!("creating {}: no object", describe(kind, obj))))
}

pub async fn replace(
    on: &OnInstance,
    kind: Kind,
    obj: &DynamicObject,
) -> Result<DynamicObject, ApiError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let ns = obj.metadata.namespace.as_deref();
    let target = name.clone();
    on.write(kind, ns, &name, |api| async move {
        api.replace(&target, &PostParams::default(), obj)
            .await
            .map(Some)
    })
    .await?
    .ok_or_else(|| ApiError::Internal(format!("updating {}: no object", describe(kind, obj))))
}

/// A JSON merge patch (carry `metadata.resourceVersion` in it to guard against races).
pub async fn merge_patch(
    on: &OnInstance,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<DynamicObject, ApiError> {
    on.write(kind, namespace, name, |api| async move {
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .map(Some)
    })
    .await?
    .ok_or_else(|| ApiError::Internal(format!("patching {name}: no object")))
}

/// A live read (not the cache), as the caller, for read-modify-write.
pub async fn get_live(
    on: &OnInstance,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, ApiError> {
    let what = format!("{} {name:?}", kind.resource().kind);
    let ar = kind.resource();
    on.live(&what, |client| async move {
        let api: Api<DynamicObject> = match (kind.namespaced(), namespace) {
            (true, Some(ns)) => Api::namespaced_with(client, ns, &ar),
            _ => Api::all_with(client, &ar),
        };
        api.get(name).await
    })
    .await
}

pub async fn delete(
    on: &OnInstance,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    on.write(kind, namespace, name, |api| async move {
        api.delete(name, &DeleteParams::default())
            .await
            .map(|either| either.left())
    })
    .await
    .map(|_| ())
}

/// A cached object with its kind.
pub type Cached = (Kind, std::sync::Arc<CachedObject>);

/// The whole of a cached object, for a path that reads its spec or status.
pub fn decoded(o: &CachedObject) -> Result<DynamicObject, ApiError> {
    o.decode().map_err(|e| ApiError::Internal(e.to_string()))
}

/// Cached objects of one kind (`kind`) or of all `among` (empty `kind`), filtered by
/// namespace (namespaced kinds only), label selector and what the caller may see, keyed
/// `namespace/Kind/name` for paging; with whether anything was left out for the caller,
/// and the caches (each kind is reviewed with the instance first: `OnInstance::list`).
pub async fn cached<'a>(
    on: &'a OnInstance,
    kind: &str,
    among: &[Kind],
    namespace: &str,
    opts: Option<&crate::proto::ListOptions>,
) -> Result<(Vec<(String, Cached)>, bool, Reads<'a>), ApiError> {
    let kinds: Vec<Kind> = match kind {
        "" => among.to_vec(),
        k => vec![self::kind("kind", k, among)?],
    };
    let sel = super::paging::selector(opts)?;
    let mut items = Vec::new();
    let mut filtered = false;
    let mut last = None;
    for kind in kinds {
        let (reads, visible) = on.list(kind, namespace).await?;
        filtered |= visible.filtered();
        let store = reads.store(kind)?;
        for o in store.state() {
            let ns = o.namespace().unwrap_or_default();
            if (!namespace.is_empty() && kind.namespaced() && ns != namespace)
                || (kind.namespaced() && !visible.allows(ns))
                || !super::paging::cached_labels_match(&sel, &o)
            {
                continue;
            }
            let key = format!("{ns}/{}/{}", kind.resource().kind, o.name());
            items.push((key, (kind, o)));
        }
        last = Some(reads);
    }
    let reads = last.ok_or_else(|| ApiError::invalid("kind", "no kind to list"))?;
    Ok((items, filtered, reads))
}
