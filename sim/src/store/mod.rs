//! The object store of one simulated API server: its own resourceVersion sequence,
//! objects, event history and watch fan-out. Nothing here is shared between servers.
//!
//! Every object is serialized once when written, so LIST and watch only copy bytes.

pub mod admission;
mod client;
mod decode_defaults;
mod defaults;
mod fanout;
pub use fanout::{Live, LiveError};
pub mod fields;
mod history;
pub mod meta;
mod seed;
mod writes;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::patch::PatchKind;
use crate::resources::{self, Registry, ResourceDef};
use kairship_wire::selectors::{FieldSelector, LabelSelector};
use kairship_wire::status::{ApiError, ApiResult};
use meta::{meta_mut, meta_str};

/// An object as stored: the value and its JSON bytes.
#[derive(Debug)]
pub struct StoredObject {
    pub value: Value,
    pub json: Bytes,
    pub rv: u64,
}

pub type Obj = Arc<StoredObject>;

/// A value or a stored object, for functions that read either.
pub trait AsValue {
    fn as_value(&self) -> &Value;
}

impl AsValue for Value {
    fn as_value(&self) -> &Value {
        self
    }
}

impl AsValue for Obj {
    fn as_value(&self) -> &Value {
        &self.value
    }
}

/// Read a stored object as its value: the simulated controllers read shared objects in
/// place instead of deep-copying every one on every pass.
impl std::ops::Deref for StoredObject {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.value
    }
}

impl StoredObject {
    fn new(value: Value, rv: u64) -> ApiResult<Obj> {
        let json = serde_json::to_vec(&value)
            .map_err(|e| ApiError::internal(format!("encoding object: {e}")))?;
        Ok(Arc::new(Self {
            value,
            json: Bytes::from(json),
            rv,
        }))
    }

    pub fn namespace(&self) -> &str {
        meta_str(&self.value, "namespace").unwrap_or("")
    }

    pub fn name(&self) -> &str {
        meta_str(&self.value, "name").unwrap_or("")
    }

    /// The object as seen at `api_version` (served versions share one stored object).
    pub fn render(&self, api_version: &str) -> Bytes {
        if self.value.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
            return self.json.clone();
        }
        let mut v = self.value.clone();
        v["apiVersion"] = Value::String(api_version.to_string());
        Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
    }
}

pub use kairship_wire::watch::EventType;

/// One change, in resourceVersion order.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub resource: Arc<str>,
    pub kind: EventType,
    pub object: Obj,
    pub prev: Option<Obj>,
}

/// What a list returns: items plus the list's metadata.
#[derive(Debug)]
pub struct ListPage {
    pub items: Vec<Obj>,
    pub rv: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

/// Filters shared by list, watch and delete-collection.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn matches(&self, obj: &StoredObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace() == ns)
            && self.labels.matches(&obj.value)
            && self.fields.matches(&obj.value)
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchFrom {
    /// Synthetic ADDED events for every current object, then changes.
    Current,
    /// Changes after this resourceVersion, from the retained history.
    Version(u64),
}

/// A watch's starting point: events to replay, then the live channel.
pub struct WatchStart {
    pub initial: Vec<Arc<Event>>,
    pub start_rv: u64,
    pub live: Live,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How many events are kept for watches resuming from a resourceVersion.
    pub history_limit: usize,
    /// How long an event is kept for them. kube-apiserver's watch cache keeps at least 75 s
    /// (and etcd compacts every 5 minutes); a simulated member's status drifting every few
    /// seconds made a count-only bound hundreds of megabytes across a large fleet.
    pub history_window: Duration,
    /// Capacity of the live fan-out; a watcher that falls further behind is cut.
    pub watch_buffer: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            history_limit: 20_000,
            history_window: Duration::from_secs(150),
            watch_buffer: 4096,
        }
    }
}

type Collection = BTreeMap<(String, String), Obj>;

struct Inner {
    rv: u64,
    registry: Registry,
    collections: HashMap<String, Collection>,
    /// Past events, oldest first.
    history: VecDeque<history::Past>,
    /// Watches must start at or after this version; older ones get 410 Gone.
    compacted_rv: u64,
    /// A dry run's copy: changes stay in it, with no history and nobody told.
    dry: bool,
}

/// How a client's delete is done: its preconditions, and whether it is a dry run.
#[derive(Debug, Default)]
pub struct DeleteWith {
    pub preconditions: Preconditions,
    pub dry_run: bool,
}

pub struct Store {
    inner: Mutex<Inner>,
    live: fanout::Fanout,
    config: StoreConfig,
}

pub(crate) const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
const NAMESPACE_KEY: &str = "/namespaces";

/// What a dry run answers: the object as the write left it, at the version it has now
/// (kube-apiserver stores nothing, so no new resourceVersion is handed out).
pub(crate) fn dry_answer(dry_run: bool, current: &Obj, written: Obj) -> Obj {
    if !dry_run {
        return written;
    }
    let mut v = written.value.clone();
    meta_mut(&mut v).insert("resourceVersion".into(), current.rv.to_string().into());
    StoredObject::new(v, current.rv).unwrap_or(written)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

impl Store {
    pub fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    pub fn registry(&self) -> Registry {
        self.inner.lock().registry.clone()
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.inner.lock().registry.lookup(group, version, plural)
    }

    fn resource(&self, group: &str, version: &str, plural: &str) -> ApiResult<Arc<ResourceDef>> {
        self.lookup(group, version, plural).ok_or_else(|| {
            ApiError::internal(format!(
                "built-in resource {group}/{version}/{plural} missing"
            ))
        })
    }

    /// The CustomResourceDefinition objects, for the schemas they publish.
    pub fn crds(&self) -> Vec<Obj> {
        let inner = self.inner.lock();
        inner
            .collections
            .get(CRD_KEY)
            .map(|c| c.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn subscribe(&self) -> Live {
        self.live.subscribe()
    }

    pub fn get(&self, def: &ResourceDef, ns: Option<&str>, name: &str) -> ApiResult<Obj> {
        let inner = self.inner.lock();
        inner
            .collections
            .get(&def.key())
            .and_then(|c| c.get(&(ns.unwrap_or("").to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def.target(name)))
    }

    pub fn list(
        &self,
        def: &ResourceDef,
        filter: &Filter,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> ApiResult<ListPage> {
        let token = cont
            .filter(|c| !c.is_empty())
            .map(|c| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(c)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<ContinueToken>(&b).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request("continue key is not valid: malformed token")
                    })
            })
            .transpose()?;
        let inner = self.inner.lock();
        if let Some(t) = &token {
            if t.rv < inner.compacted_rv {
                return Err(ApiError::gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."));
            }
        }
        let rv = token.as_ref().map_or(inner.rv, |t| t.rv);
        let empty = Collection::new();
        let coll = inner.collections.get(&def.key()).unwrap_or(&empty);
        let start = token.map(|t| (t.ns, t.name));
        let ns_prefix = filter.namespace.clone();
        let iter: Box<dyn Iterator<Item = (&(String, String), &Obj)>> = match (&start, &ns_prefix) {
            (Some(s), _) => Box::new(coll.range(s.clone()..)),
            (None, Some(ns)) => Box::new(coll.range((ns.clone(), String::new())..)),
            (None, None) => Box::new(coll.iter()),
        };
        let iter = iter.take_while(|((ns, _), _)| ns_prefix.as_ref().is_none_or(|p| p == ns));
        let limit = limit.filter(|l| *l > 0);
        let mut items = Vec::new();
        let mut next = None;
        let mut remaining = 0u64;
        for (key, obj) in iter {
            if !filter.matches(obj) {
                continue;
            }
            if let Some(l) = limit {
                if items.len() == l {
                    if next.is_none() {
                        next = Some(key.clone());
                    }
                    remaining += 1;
                    continue;
                }
            }
            items.push(obj.clone());
        }
        let continue_token = next.map(|(ns, name)| {
            let t = ContinueToken { rv, ns, name };
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(serde_json::to_vec(&t).unwrap_or_default())
        });
        Ok(ListPage {
            items,
            rv,
            remaining: continue_token.as_ref().map(|_| remaining),
            continue_token,
        })
    }

    pub fn create(&self, def: &ResourceDef, ns: Option<&str>, obj: Value) -> ApiResult<Obj> {
        self.create_managed(def, ns, obj, None)
    }

    /// Creates an object with these `managedFields` (`None`: none).
    fn create_managed(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        obj: Value,
        managed: Option<Value>,
    ) -> ApiResult<Obj> {
        let mut inner = self.inner.lock();
        self.create_in(&mut inner, def, ns, obj, managed)
    }

    /// Runs `write` on the state, or for a dry run on a copy of it that is then dropped.
    fn writing<T>(
        &self,
        dry_run: bool,
        write: impl FnOnce(&mut Inner) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let mut inner = self.inner.lock();
        match dry_run {
            true => write(&mut inner.scratch()),
            false => write(&mut inner),
        }
    }

    fn create_in(
        &self,
        inner: &mut Inner,
        def: &ResourceDef,
        ns: Option<&str>,
        mut obj: Value,
        managed: Option<Value>,
    ) -> ApiResult<Obj> {
        check_kind(def, &obj)?;
        let m = meta_mut(&mut obj);
        let name = match m
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            Some(n) => n.to_string(),
            None => match m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                Some(prefix) => format!("{prefix}{}", meta::name_suffix()),
                None => {
                    return Err(ApiError::invalid(
                        def.target(""),
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ))
                }
            },
        };
        // RBAC objects are named as path segments (`system:discovery`), not as DNS names.
        if def.group == "rbac.authorization.k8s.io" {
            meta::validate_path_segment(def.target(&name), &name)?;
        } else {
            meta::validate_name(def.target(&name), &name, def.plural == "namespaces")?;
        }
        let ns = scope_namespace(def, ns, m.get("namespace").and_then(Value::as_str))?;
        if let Some(ns) = &ns {
            inner.check_namespace_open(ns)?;
        }
        let key = (ns.clone().unwrap_or_default(), name.clone());
        if inner
            .collections
            .get(&def.key())
            .is_some_and(|c| c.contains_key(&key))
        {
            return Err(ApiError::already_exists(def.target(&name)));
        }
        let rv = inner.rv + 1;
        m.insert("name".into(), name.clone().into());
        match &ns {
            Some(ns) => m.insert("namespace".into(), ns.clone().into()),
            None => m.remove("namespace"),
        };
        m.insert("uid".into(), meta::new_uid().into());
        m.insert("creationTimestamp".into(), meta::now_rfc3339().into());
        m.insert("resourceVersion".into(), rv.to_string().into());
        if meta::tracks_generation(def) {
            m.insert("generation".into(), 1.into());
        } else {
            m.remove("generation");
        }
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        match managed {
            Some(v) if v.as_array().is_some_and(|a| !a.is_empty()) => {
                m.insert("managedFields".into(), v);
            }
            _ => {
                m.remove("managedFields");
            }
        }
        obj["apiVersion"] = def.api_version(&def.versions[0]).into();
        obj["kind"] = def.kind.clone().into();
        if def.status_subresource {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
            // A built-in kind's status is a Go value: an empty one reads back as `{}`,
            // with the counters Go writes even at zero.
            if def.builtin {
                obj["status"] = decode_defaults::zero_status(def);
            }
        }
        if def.plural == "namespaces" {
            obj["status"] = json!({"phase": "Active"});
        }
        decode_defaults::fill(def, &mut obj);
        defaults::daemonset_on_create(def, &mut obj);
        if def.key() == defaults::SERVICES {
            defaults::service_on_create(&mut obj, inner.collections.get(&def.key()));
        }
        if def.key() == defaults::JOBS {
            defaults::job_on_create(&mut obj);
        }
        if def.key() == CRD_KEY {
            let new_def = resources::def_from_crd(&obj)?;
            inner.check_crd_names(&new_def, &name)?;
            obj["status"] = crd_status(&obj);
            inner.registry.insert(new_def);
        }
        let stored = StoredObject::new(obj, rv)?;
        inner.commit(
            self,
            &def.key(),
            EventType::Added,
            key,
            Some(stored.clone()),
            None,
        );
        Ok(stored)
    }

    /// Replaces an object (`status == true`: only its status, the `/status` subresource).
    pub fn update(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        status: bool,
    ) -> ApiResult<Obj> {
        check_kind(def, &obj)?;
        let mut inner = self.inner.lock();
        let current = inner.get(def, ns, name)?;
        inner.replace(self, def, &current, obj, status, None)
    }

    /// Patches an object atomically (the simulator's own writes: never an apply, which
    /// only clients send, through [`Store::patch_by`]).
    pub fn patch(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        status: bool,
    ) -> ApiResult<Obj> {
        check_patch_type(def, kind)?;
        let mut inner = self.inner.lock();
        let current = inner.get(def, ns, name)?;
        let next = patched(def, &current.value, kind, body)?;
        inner.replace(self, def, &current, next, status, None)
    }

    /// Deletes an object, or marks it for deletion while finalizers remain.
    pub fn delete(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
        with: DeleteWith,
    ) -> ApiResult<Obj> {
        self.writing(with.dry_run, |inner| {
            let current = inner.get(def, ns, name)?;
            with.preconditions.check(def, &current)?;
            let gone = inner.delete_obj(self, def, &current)?;
            Ok(dry_answer(with.dry_run, &current, gone))
        })
    }

    pub fn delete_collection(
        &self,
        def: &ResourceDef,
        filter: &Filter,
        dry_run: bool,
    ) -> ApiResult<Vec<Obj>> {
        self.writing(dry_run, |inner| {
            let victims: Vec<Obj> = inner
                .collections
                .get(&def.key())
                .map(|c| c.values().filter(|o| filter.matches(o)).cloned().collect())
                .unwrap_or_default();
            victims
                .iter()
                .map(|o| {
                    let gone = inner.delete_obj(self, def, o)?;
                    Ok(dry_answer(dry_run, o, gone))
                })
                .collect()
        })
    }

    /// Opens a watch atomically: what to replay and the live channel from that point.
    pub fn watch(
        &self,
        def: &ResourceDef,
        filter: &Filter,
        from: WatchFrom,
    ) -> ApiResult<WatchStart> {
        let inner = self.inner.lock();
        let key: Arc<str> = Arc::from(def.key());
        let initial = match from {
            WatchFrom::Current => inner
                .collections
                .get(&*key)
                .map(|c| {
                    c.values()
                        .filter(|o| filter.matches(o))
                        .map(|o| {
                            Arc::new(Event {
                                rv: o.rv,
                                resource: key.clone(),
                                kind: EventType::Added,
                                object: o.clone(),
                                prev: None,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
            WatchFrom::Version(v) => {
                if v < inner.compacted_rv {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {v} ({})",
                        inner.compacted_rv
                    )));
                }
                if v > inner.rv {
                    return Err(ApiError::timeout(format!(
                        "Too large resource version: {v}, current: {}",
                        inner.rv
                    )));
                }
                let from = inner.history.partition_point(|e| e.rv <= v);
                inner
                    .history
                    .iter()
                    .skip(from)
                    .filter(|e| e.resource == key)
                    .filter_map(history::Past::revive)
                    .collect()
            }
        };
        Ok(WatchStart {
            initial,
            start_rv: inner.rv,
            live: self.live.subscribe(),
        })
    }

    /// Drops the event history: watches resuming from before now get 410 Gone.
    pub fn compact(&self) -> u64 {
        let mut inner = self.inner.lock();
        inner.history.clear();
        inner.compacted_rv = inner.rv;
        inner.rv
    }

    /// Counts of objects per resource key (for the admin API and benchmarks).
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let inner = self.inner.lock();
        inner
            .collections
            .iter()
            .map(|(k, c)| (k.clone(), c.len()))
            .collect()
    }
}

pub use writes::Preconditions;
use writes::{check_kind, check_patch_type, crd_status, patched, scope_namespace};
