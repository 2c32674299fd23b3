//! How a store starts: every store of a flavor from one process-wide copy of that flavor's
//! initial objects (CRDs, the bootstrap RBAC, namespaces), built once through the write
//! path and shared until written.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::json;

use super::meta::{self, meta_mut};
use super::{Inner, Store, StoreConfig, StoredObject, NAMESPACE_KEY};
use crate::resources::{self, Flavor, Registry};
use kairship_wire::status::ApiResult;

/// Each flavor's store of initial objects, which new stores start from.
type Seeds = Mutex<Vec<(Flavor, Arc<Store>)>>;

impl Store {
    /// A store serving the built-in kinds of `flavor`, its CRDs and standard namespaces.
    /// Every store of a flavor starts from one process-wide copy of those objects, shared
    /// until a write replaces one: each simulated instance and member cluster building
    /// its own was about half of an idle instance's memory. They share uids and
    /// timestamps, but for the namespaces': kube-system's uid is a cluster's identity
    /// (Karmada's cluster ID, which karmadactl and Kairship's join read).
    pub fn new(flavor: Flavor, config: StoreConfig) -> ApiResult<Self> {
        static SEEDS: OnceLock<Seeds> = OnceLock::new();
        let seed = {
            let mut seeds = SEEDS.get_or_init(Default::default).lock();
            match seeds.iter().find(|(f, _)| *f == flavor) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = Arc::new(Self::seeded(flavor, StoreConfig::default())?);
                    seeds.push((flavor, s.clone()));
                    s
                }
            }
        };
        let from = seed.inner.lock();
        let mut collections = from.collections.clone();
        for o in collections
            .get_mut(NAMESPACE_KEY)
            .into_iter()
            .flat_map(|c| c.values_mut())
        {
            let mut v = o.value.clone();
            meta_mut(&mut v).insert("uid".into(), meta::new_uid().into());
            *o = StoredObject::new(v, o.rv)?;
        }
        let live = super::fanout::Fanout::new(config.watch_buffer);
        Ok(Self {
            inner: Mutex::new(Inner {
                rv: from.rv,
                registry: from.registry.clone(),
                collections,
                history: VecDeque::new(),
                // Their creation is history no watch can resume from, as after etcd
                // compacts.
                compacted_rv: from.rv,
                dry: false,
            }),
            live,
            config,
        })
    }

    /// A store of `flavor` with its initial objects, built through the write path.
    fn seeded(flavor: Flavor, config: StoreConfig) -> ApiResult<Self> {
        let (defs, crds) = resources::initial(flavor);
        let live = super::fanout::Fanout::new(config.watch_buffer);
        let store = Self {
            inner: Mutex::new(Inner {
                rv: 0,
                registry: Registry::new(defs),
                collections: HashMap::new(),
                history: VecDeque::new(),
                compacted_rv: 0,
                dry: false,
            }),
            live,
            config,
        };
        let crd_def = store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
        for crd in crds {
            store.create(&crd_def, None, crd)?;
        }
        // The bootstrap RBAC policy every kube-apiserver creates at start.
        let roles = store.resource("rbac.authorization.k8s.io", "v1", "clusterroles")?;
        for role in crate::rbac::defaults::cluster_roles() {
            store.create(&roles, None, role)?;
        }
        let bindings = store.resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings")?;
        for binding in crate::rbac::defaults::cluster_role_bindings() {
            store.create(&bindings, None, binding)?;
        }
        let ns_def = store.resource("", "v1", "namespaces")?;
        let mut namespaces = vec!["default", "kube-system", "kube-public"];
        if flavor == Flavor::Karmada {
            namespaces.push("karmada-system");
        }
        for ns in namespaces {
            store.create(
                &ns_def,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Store, StoreConfig};
    use crate::resources::Flavor;

    #[test]
    fn stores_share_initial_objects_but_not_their_cluster_identity() {
        let (a, b) = (
            Store::new(Flavor::Member, StoreConfig::default()).expect("a"),
            Store::new(Flavor::Member, StoreConfig::default()).expect("b"),
        );
        let get = |s: &Store, plural: &str, group: &str, name: &str| {
            let def = s.resource(group, "v1", plural).expect("served");
            s.get(&def, None, name).expect("initial object")
        };
        let (ka, kb) = (
            get(&a, "namespaces", "", "kube-system"),
            get(&b, "namespaces", "", "kube-system"),
        );
        assert_ne!(ka["metadata"]["uid"], kb["metadata"]["uid"]);
        let role = |s: &Store| get(s, "clusterroles", "rbac.authorization.k8s.io", "admin");
        assert!(std::sync::Arc::ptr_eq(&role(&a), &role(&b)));
        assert_eq!(a.current_rv(), b.current_rv());
    }
}
