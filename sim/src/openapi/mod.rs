//! The OpenAPI documents kube-apiserver serves (`/openapi/v2`, `/openapi/v3` and one v3
//! document per group-version), for the built-in kinds and every CRD's schema, and the
//! schema of a kind for the checks a write goes through (field validation, ownership).
//!
//! Clients depend on them: `kubectl explain` reads them, and `kubectl create`/`apply`
//! look for the `fieldValidation` parameter before asking the server to validate.

mod builtin;
mod crd;
mod document;
pub mod karmada;
mod paths;
pub mod walk;

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::resources::{Registry, ResourceDef};
use crate::store::Store;

pub use document::{v2, v3_group_version, v3_root};

/// A kind as OpenAPI's `x-kubernetes-group-version-kind` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// One served resource at one version, with the definition describing its objects.
struct Published {
    def: Arc<ResourceDef>,
    version: String,
    gvk: Gvk,
    definition: String,
}

/// Everything a server publishes at one moment: definitions and served resources.
pub struct Catalog {
    definitions: Map<String, Value>,
    resources: Vec<Published>,
    /// Definitions from CRDs' schemas (Swagger 2.0 publishes them simplified).
    custom: std::collections::BTreeSet<String>,
}

impl Catalog {
    /// What `store` serves now: built-in kinds from their generated schemas, custom kinds
    /// from their CRDs' schemas, aggregated kinds (no schema here) as open objects.
    pub fn of(store: &Store) -> Self {
        let registry = store.registry();
        let crds: Vec<Value> = store.crds().iter().map(|o| o.value.clone()).collect();
        Self::new(&registry, &crds)
    }

    fn new(registry: &Registry, crds: &[Value]) -> Self {
        let b = builtin::builtins();
        let mut definitions = b.definitions.clone();
        let mut resources = Vec::new();
        let mut custom = std::collections::BTreeSet::new();
        let crd_versions: Vec<_> = crds.iter().flat_map(crd::versions).collect();
        for def in registry.all() {
            for version in &def.versions {
                let gvk = Gvk {
                    group: def.group.clone(),
                    version: version.clone(),
                    kind: def.kind.clone(),
                };
                let definition = if let Some((_, name)) = b.kinds.iter().find(|(k, _)| *k == gvk) {
                    name.clone()
                } else if let Some(v) = crd_versions.iter().find(|v| v.gvk == gvk) {
                    definitions.insert(v.name.clone(), (*v.schema).clone());
                    custom.insert(v.name.clone());
                    v.name.clone()
                } else {
                    let v = crd::open(&gvk);
                    definitions.insert(v.name.clone(), (*v.schema).clone());
                    v.name
                };
                resources.push(Published {
                    def: def.clone(),
                    version: version.clone(),
                    gvk,
                    definition,
                });
            }
        }
        Self {
            definitions,
            resources,
            custom,
        }
    }
}

/// The schema objects of `def` at `version` are checked against: built-in kinds' from
/// their generated definitions, custom kinds' from their CRD (`None`: no schema, as for
/// aggregated kinds, so anything is kept).
pub fn schema_of(store: &Store, def: &ResourceDef, version: &str) -> Option<Schema> {
    let gvk = Gvk {
        group: def.group.clone(),
        version: version.to_string(),
        kind: def.kind.clone(),
    };
    let b = builtin::builtins();
    if let Some((_, name)) = b.kinds.iter().find(|(k, _)| *k == gvk) {
        return b
            .definitions
            .get(name)
            .cloned()
            .map(|s| Schema(Arc::new(s)));
    }
    let crd_name = def.crd.as_deref()?;
    let crd = store.crds().into_iter().find(|o| o.name() == crd_name)?;
    crd::versions(&crd.value)
        .into_iter()
        .find(|v| v.gvk == gvk)
        .map(|v| Schema(v.schema))
}

/// A kind's top-level schema; its references resolve among the built-in definitions.
pub struct Schema(Arc<Value>);

impl Schema {
    pub fn root(&self) -> walk::Node<'_> {
        walk::Node::new(&self.0, &builtin::builtins().definitions)
    }
}
