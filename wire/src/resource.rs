//! What an API server serves, as a CRD describes it: a resource's group, versions, kind,
//! plural, scope, subresources and printer columns, derived from a
//! `CustomResourceDefinition` object with kube-apiserver's validation.

use serde_json::Value;

use crate::status::{ApiError, ApiResult, Target};

/// A column of `kubectl get` output, evaluated server-side into a `meta/v1 Table`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub kind: String,
    pub json_path: String,
    pub priority: i64,
}

#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: String,
    /// Served versions; the first is the preferred (storage) version.
    pub versions: Vec<String>,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    pub printer_columns: Vec<PrinterColumn>,
    /// Built-in kinds accept strategic merge patch; custom resources do not.
    pub builtin: bool,
    /// Name of the CRD that defines this resource, if any.
    pub crd: Option<String>,
}

impl ResourceDef {
    /// Store key, independent of version: objects are shared across served versions.
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    pub fn target<'a>(&'a self, name: &'a str) -> Target<'a> {
        Target {
            group: &self.group,
            kind: &self.kind,
            plural: &self.plural,
            name,
        }
    }
}

impl PrinterColumn {
    pub fn new(name: &str, kind: &str, path: &str, priority: i64) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            json_path: path.into(),
            priority,
        }
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
}

/// Validates a CRD object and derives the resource it defines.
pub fn def_from_crd(crd: &Value) -> ApiResult<ResourceDef> {
    let name = str_at(crd, &["metadata", "name"]).unwrap_or("");
    let target = Target {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        name,
    };
    let invalid = |field: &str, msg: &str| ApiError::invalid(target, field, msg.to_string());
    let group = str_at(crd, &["spec", "group"])
        .filter(|g| !g.is_empty())
        .ok_or_else(|| invalid("spec.group", "Required value"))?;
    let plural = str_at(crd, &["spec", "names", "plural"])
        .filter(|g| !g.is_empty())
        .ok_or_else(|| invalid("spec.names.plural", "Required value"))?;
    let kind = str_at(crd, &["spec", "names", "kind"])
        .filter(|g| !g.is_empty())
        .ok_or_else(|| invalid("spec.names.kind", "Required value"))?;
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            "metadata.name",
            &format!("must be spec.names.plural+\".\"+spec.group ({plural}.{group})"),
        ));
    }
    let namespaced = match str_at(crd, &["spec", "scope"]) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(invalid(
                "spec.scope",
                "Unsupported value: supported values: \"Cluster\", \"Namespaced\"",
            ))
        }
    };
    let vers = crd["spec"]["versions"]
        .as_array()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            invalid(
                "spec.versions",
                "Required value: must have exactly one version marked as storage version",
            )
        })?;
    let mut served: Vec<(bool, &Value)> = vers
        .iter()
        .filter(|v| v["served"].as_bool().unwrap_or(false))
        .map(|v| (v["storage"].as_bool().unwrap_or(false), v))
        .collect();
    if vers
        .iter()
        .filter(|v| v["storage"].as_bool().unwrap_or(false))
        .count()
        != 1
    {
        return Err(invalid(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    // Storage version first, so it is the preferred one.
    served.sort_by_key(|(storage, _)| !*storage);
    let first = served
        .first()
        .map(|(_, v)| *v)
        .ok_or_else(|| invalid("spec.versions", "must have at least one served version"))?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let printer_columns = first["additionalPrinterColumns"]
        .as_array()
        .map(|cols| {
            cols.iter()
                .filter_map(|c| {
                    Some(PrinterColumn::new(
                        c["name"].as_str()?,
                        c["type"].as_str().unwrap_or("string"),
                        c["jsonPath"].as_str()?,
                        c["priority"].as_i64().unwrap_or(0),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ResourceDef {
        group: group.to_string(),
        versions: served
            .iter()
            .filter_map(|(_, v)| v["name"].as_str().map(String::from))
            .collect(),
        kind: kind.to_string(),
        plural: plural.to_string(),
        singular: str_at(crd, &["spec", "names", "singular"])
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        short_names: strings(&crd["spec"]["names"]["shortNames"]),
        categories: strings(&crd["spec"]["names"]["categories"]),
        namespaced,
        status_subresource: first
            .get("subresources")
            .and_then(|s| s.get("status"))
            .is_some(),
        printer_columns,
        builtin: false,
        crd: Some(name.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_without_storage_version_is_invalid() {
        let crd = json!({"metadata": {"name": "foos.x.io"}, "spec": {"group": "x.io", "scope": "Cluster",
            "names": {"plural": "foos", "kind": "Foo"}, "versions": [{"name": "v1", "served": true, "storage": false}]}});
        let err = def_from_crd(&crd).expect_err("must be invalid");
        assert_eq!(err.code, 422);
        assert!(err.message.contains("storage version"), "{}", err.message);
    }
}
