//! How writes land in the store: delete preconditions, kind and namespace checks, the
//! commit of a new version (resourceVersion, event, history), replace and patch, deletion
//! with finalizers and graceful namespace and CRD teardown.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::meta::{self, finalizers, meta_mut, meta_str};
use super::{
    Collection, Event, EventType, Inner, Obj, Store, StoredObject, CRD_KEY, NAMESPACE_KEY,
};
use crate::patch::PatchKind;
use crate::resources::{self, ResourceDef};
use kairship_wire::status::{ApiError, ApiResult};

/// `DeleteOptions.preconditions`.
#[derive(Debug, Default, Clone)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Preconditions {
    pub(super) fn check(&self, def: &ResourceDef, obj: &StoredObject) -> ApiResult<()> {
        let uid_ok = self
            .uid
            .as_deref()
            .is_none_or(|u| meta_str(&obj.value, "uid") == Some(u));
        let rv_ok = self
            .resource_version
            .as_deref()
            .is_none_or(|r| r == obj.rv.to_string());
        if uid_ok && rv_ok {
            Ok(())
        } else {
            Err(ApiError::conflict(def.target(obj.name())))
        }
    }
}

pub(super) fn check_kind(def: &ResourceDef, obj: &Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        if !def.versions.iter().any(|v| def.api_version(v) == av) {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                def.api_version(&def.versions[0])
            )));
        }
    }
    if let Some(kind) = obj.get("kind").and_then(Value::as_str) {
        if kind != def.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                def.kind
            )));
        }
    }
    Ok(())
}

/// The namespace an object lives in, reconciling the request path with the body.
/// Refuses a patch type the kind does not take, before the object is looked up (as
/// kube-apiserver's handler does): strategic merge patch is for built-in kinds only.
pub(super) fn check_patch_type(def: &ResourceDef, kind: PatchKind) -> ApiResult<()> {
    if kind == PatchKind::Strategic && !def.builtin {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json is not supported for custom resources",
        ));
    }
    Ok(())
}

/// `current` with a (non-apply) patch applied, still of the kind it was.
pub(super) fn patched(
    def: &ResourceDef,
    current: &Value,
    kind: PatchKind,
    body: &[u8],
) -> ApiResult<Value> {
    let mut next = current.clone();
    crate::patch::apply(kind, &mut next, body)?;
    check_kind(def, &next)?;
    Ok(next)
}

pub(super) fn scope_namespace(
    def: &ResourceDef,
    path_ns: Option<&str>,
    body_ns: Option<&str>,
) -> ApiResult<Option<String>> {
    if !def.namespaced {
        return Ok(None);
    }
    let Some(ns) = path_ns else {
        return Err(ApiError::bad_request(format!(
            "{} is namespaced: a namespace is required in the request path",
            def.plural
        )));
    };
    match body_ns {
        Some(b) if !b.is_empty() && b != ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(Some(ns.to_string())),
    }
}

pub(super) fn crd_status(crd: &Value) -> Value {
    let now = meta::now_rfc3339();
    let cond = |t: &str, reason: &str| json!({"type": t, "status": "True", "reason": reason, "message": "", "lastTransitionTime": now});
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter(|v| v["storage"].as_bool() == Some(true))
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "conditions": [cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")],
        "acceptedNames": crd["spec"]["names"],
        "storedVersions": stored,
    })
}

impl Inner {
    /// A copy of the state for a dry run to change and drop.
    pub(super) fn scratch(&self) -> Inner {
        Inner {
            rv: self.rv,
            registry: self.registry.clone(),
            collections: self.collections.clone(),
            history: VecDeque::new(),
            compacted_rv: self.compacted_rv,
            dry: true,
        }
    }

    pub(super) fn get(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Obj> {
        self.collections
            .get(&def.key())
            .and_then(|c| c.get(&(ns.unwrap_or("").to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def.target(name)))
    }

    pub(super) fn check_namespace_open(&self, ns: &str) -> ApiResult<()> {
        let Some(n) = self
            .collections
            .get(NAMESPACE_KEY)
            .and_then(|c| c.get(&(String::new(), ns.to_string())))
        else {
            let t = kairship_wire::status::Target {
                group: "",
                kind: "Namespace",
                plural: "namespaces",
                name: ns,
            };
            return Err(ApiError::not_found(t));
        };
        if meta_str(&n.value, "deletionTimestamp").is_some() {
            return Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            )));
        }
        Ok(())
    }

    pub(super) fn check_crd_names(&self, def: &ResourceDef, crd_name: &str) -> ApiResult<()> {
        match self
            .registry
            .all()
            .find(|d| d.group == def.group && d.plural == def.plural)
        {
            Some(existing) if existing.crd.as_deref() != Some(crd_name) => {
                Err(ApiError::already_exists(kairship_wire::status::Target {
                    group: "apiextensions.k8s.io",
                    kind: "CustomResourceDefinition",
                    plural: "customresourcedefinitions",
                    name: crd_name,
                }))
            }
            _ => Ok(()),
        }
    }

    /// Records a change: bumps the sequence, updates the collection, history and watchers.
    pub(super) fn commit(
        &mut self,
        store: &Store,
        resource: &str,
        kind: EventType,
        key: (String, String),
        obj: Option<Obj>,
        prev: Option<Obj>,
    ) {
        let coll = self.collections.entry(resource.to_string()).or_default();
        let object = match (kind, obj) {
            (EventType::Deleted, Some(o)) => {
                coll.remove(&key);
                o
            }
            (_, Some(o)) => {
                coll.insert(key, o.clone());
                o
            }
            (_, None) => return,
        };
        self.rv = object.rv;
        if self.dry {
            return;
        }
        let ev = Arc::new(Event {
            rv: object.rv,
            resource: Arc::from(resource),
            kind,
            object,
            prev,
        });
        let now = Instant::now();
        self.history.push_back(super::history::Past::of(now, &ev));
        let window = store.config.history_window;
        while self.history.len() > store.config.history_limit
            || self
                .history
                .front()
                .is_some_and(|e| now.duration_since(e.at) > window)
        {
            if let Some(old) = self.history.pop_front() {
                self.compacted_rv = old.rv;
            }
        }
        store.live.send(&ev);
    }

    pub(super) fn replace(
        &mut self,
        store: &Store,
        def: &ResourceDef,
        current: &Obj,
        mut obj: Value,
        status_only: bool,
        managed: Option<Value>,
    ) -> ApiResult<Obj> {
        let name = current.name().to_string();
        let old = &current.value;
        if let Some(n) = meta_str(&obj, "name") {
            if n != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
        if let Some(rv) = meta_str(&obj, "resourceVersion").filter(|r| !r.is_empty()) {
            if rv != current.rv.to_string() {
                return Err(ApiError::conflict(def.target(&name)));
            }
        }
        if def.namespaced {
            if let Some(ns) = meta_str(&obj, "namespace").filter(|n| !n.is_empty()) {
                if ns != current.namespace() {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"));
                }
            }
        }
        if status_only {
            let status = obj.get("status").cloned();
            obj = old.clone();
            match status {
                Some(s) => obj["status"] = s,
                None => {
                    if let Some(o) = obj.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        } else if def.status_subresource {
            match old.get("status") {
                Some(s) => obj["status"] = s.clone(),
                None => {
                    if let Some(o) = obj.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        if !status_only {
            super::decode_defaults::fill(def, &mut obj);
        }
        if def.key() == super::defaults::SERVICES && !status_only {
            super::defaults::service_on_update(old, &mut obj);
        }
        if def.key() == super::defaults::DAEMONSETS && !status_only {
            super::defaults::daemonset_on_update(old, &mut obj);
        }
        let rv = self.rv + 1;
        let old_meta = old.get("metadata").cloned().unwrap_or_default();
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let bump = meta::spec_changed(old, &obj);
        let m = meta_mut(&mut obj);
        for k in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old_meta.get(k) {
                Some(v) => m.insert(k.into(), v.clone()),
                None => m.remove(k),
            };
        }
        m.insert("resourceVersion".into(), rv.to_string().into());
        if meta::tracks_generation(def) {
            m.insert(
                "generation".into(),
                (if bump { generation + 1 } else { generation }).into(),
            );
        } else {
            m.remove("generation");
        }
        // Internal writes leave ownership as it was; clients' writes bring the new one.
        match managed.or_else(|| old_meta.get("managedFields").cloned()) {
            Some(v) if v.as_array().is_some_and(|a| !a.is_empty()) => {
                m.insert("managedFields".into(), v);
            }
            _ => {
                m.remove("managedFields");
            }
        }
        obj["apiVersion"] = def.api_version(&def.versions[0]).into();
        obj["kind"] = def.kind.clone().into();
        if def.key() == CRD_KEY && !status_only {
            let new_def = resources::def_from_crd(&obj)?;
            self.registry.insert(new_def);
            obj["status"] = crd_status(&obj);
        }
        let key = (current.namespace().to_string(), name);
        let terminating = meta_str(&obj, "deletionTimestamp").is_some() && finalizers(&obj) == 0;
        let stored = StoredObject::new(obj, rv)?;
        if terminating {
            return self.remove(store, def, key, stored, Some(current.clone()));
        }
        self.commit(
            store,
            &def.key(),
            EventType::Modified,
            key,
            Some(stored.clone()),
            Some(current.clone()),
        );
        Ok(stored)
    }

    pub(super) fn delete_obj(
        &mut self,
        store: &Store,
        def: &ResourceDef,
        current: &Obj,
    ) -> ApiResult<Obj> {
        let key = (current.namespace().to_string(), current.name().to_string());
        if def.plural == "namespaces" && def.group.is_empty() {
            self.empty_namespace(store, current.name())?;
        }
        if finalizers(&current.value) > 0 {
            if meta_str(&current.value, "deletionTimestamp").is_some() {
                return Ok(current.clone());
            }
            let mut v = current.value.clone();
            let rv = self.rv + 1;
            let m = meta_mut(&mut v);
            m.insert("deletionTimestamp".into(), meta::now_rfc3339().into());
            m.insert("deletionGracePeriodSeconds".into(), 0.into());
            m.insert("resourceVersion".into(), rv.to_string().into());
            if def.plural == "namespaces" {
                v["status"] = json!({"phase": "Terminating"});
            }
            let stored = StoredObject::new(v, rv)?;
            self.commit(
                store,
                &def.key(),
                EventType::Modified,
                key,
                Some(stored.clone()),
                Some(current.clone()),
            );
            return Ok(stored);
        }
        let mut v = current.value.clone();
        let rv = self.rv + 1;
        meta_mut(&mut v).insert("resourceVersion".into(), rv.to_string().into());
        let stored = StoredObject::new(v, rv)?;
        self.remove(store, def, key, stored, Some(current.clone()))
    }

    pub(super) fn remove(
        &mut self,
        store: &Store,
        def: &ResourceDef,
        key: (String, String),
        gone: Obj,
        prev: Option<Obj>,
    ) -> ApiResult<Obj> {
        if def.key() == CRD_KEY {
            if let Some(removed) = self.registry.remove_crd(&key.1) {
                self.drop_collection(store, &removed.key());
            }
        }
        self.commit(
            store,
            &def.key(),
            EventType::Deleted,
            key,
            Some(gone.clone()),
            prev,
        );
        Ok(gone)
    }

    /// Deletes every object of a resource (its CRD went away).
    pub(super) fn drop_collection(&mut self, store: &Store, resource: &str) {
        let objs: Vec<Obj> = self
            .collections
            .remove(resource)
            .map(|c| c.into_values().collect())
            .unwrap_or_default();
        self.collections
            .insert(resource.to_string(), Collection::new());
        for o in objs {
            let key = (o.namespace().to_string(), o.name().to_string());
            let rv = self.rv + 1;
            let mut v = o.value.clone();
            meta_mut(&mut v).insert("resourceVersion".into(), rv.to_string().into());
            if let Ok(gone) = StoredObject::new(v, rv) {
                self.commit(
                    store,
                    resource,
                    EventType::Deleted,
                    key,
                    Some(gone),
                    Some(o),
                );
            }
        }
    }

    /// The namespace lifecycle controller's job, done inline: delete what the namespace holds.
    pub(super) fn empty_namespace(&mut self, store: &Store, ns: &str) -> ApiResult<()> {
        let namespaced: Vec<Arc<ResourceDef>> = self
            .registry
            .all()
            .filter(|d| d.namespaced)
            .cloned()
            .collect();
        for def in namespaced {
            let victims: Vec<Obj> = self
                .collections
                .get(&def.key())
                .map(|c| {
                    c.range((ns.to_string(), String::new())..)
                        .take_while(|((n, _), _)| n == ns)
                        .map(|(_, o)| o.clone())
                        .collect()
                })
                .unwrap_or_default();
            for v in victims {
                self.delete_obj(store, &def, &v)?;
            }
        }
        Ok(())
    }
}
