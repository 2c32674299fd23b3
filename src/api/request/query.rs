//! What a Kubernetes-style read asks for, parsed in one place for the proxy's cache paths:
//! boolean parameters, the selection (namespace, label and field selectors) and the cached
//! kind a path names.

use std::collections::HashMap;

use kairship_wire::routes::{self, ResourcePath, Route};
use kairship_wire::selectors::{FieldSelector, LabelSelector};

use crate::api::paging;
use crate::cache::caches::Kind;
use crate::cache::object::CachedObject;
use crate::error::ApiError;

/// A boolean query parameter as kube-apiserver converts it: `0` or `false` in any case is
/// false, anything else (`True`, `TRUE`, `1`, `t`, even empty) true.
pub use crate::api::request_info::parse_bool;

/// The cached kind a resource path names, with the path parsed.
pub fn cached_kind(path: &str) -> Option<(Kind, ResourcePath)> {
    let Route::Resource(rp) = routes::parse(path) else {
        return None;
    };
    let kind = Kind::ALL.into_iter().find(|k| {
        let r = k.resource();
        r.group == rp.group && r.version == rp.version && r.plural == rp.plural
    })?;
    Some((kind, rp))
}

/// What a list or watch selects: namespace, label selector, field selector.
pub struct Selection {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selection {
    /// From a request's `labelSelector` and `fieldSelector`; errors name the parameter.
    pub fn parse(namespace: Option<String>, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let param = |name: &str| q.get(name).map(String::as_str).unwrap_or("");
        let labels = LabelSelector::parse(param("labelSelector"))
            .map_err(|e| ApiError::invalid("labelSelector", e.message))?;
        let fields = FieldSelector::parse(param("fieldSelector"))
            .map_err(|e| ApiError::invalid("fieldSelector", e.message))?;
        Ok(Self {
            namespace,
            labels,
            fields,
        })
    }

    pub fn matches(&self, o: &CachedObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| o.namespace() == Some(ns))
            && paging::cached_labels_match(&self.labels, o)
            && self.fields.matches_metadata(|field| match field {
                "name" => Some(o.name()),
                "namespace" => o.namespace(),
                _ => None,
            })
    }

    /// A label every selected object has (for the store's label index).
    pub fn required_label(&self) -> Option<(&str, &str)> {
        self.labels.required_label()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_refused_naming_the_parameter() {
        let q = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        let err = Selection::parse(None, &q("labelSelector", "a in b"))
            .err()
            .expect("refused");
        assert!(err.to_string().starts_with("labelSelector: "), "{err}");
        let err = Selection::parse(None, &q("fieldSelector", "spec.x=1"))
            .err()
            .expect("refused");
        assert!(err.to_string().starts_with("fieldSelector: "), "{err}");
        assert_eq!(parse_bool("False"), Some(false));
        assert_eq!(parse_bool(""), Some(true));
    }

    #[test]
    fn paths_name_cached_kinds() {
        let (kind, rp) =
            cached_kind("/apis/apps/v1/namespaces/default/deployments/web").expect("cached");
        assert_eq!(kind, Kind::Deployment);
        assert_eq!(rp.name.as_deref(), Some("web"));
        assert!(cached_kind("/api/v1/namespaces/default/configmaps").is_none());
    }
}
