//! What changes in Karmada's CRDs between two releases, read from the CRD tarballs
//! karmada-operator installs (`crds/**/*.yaml` in `crds.tar.gz`): CRDs removed, versions
//! no longer served, fields dropped, defaults changed. A served version or a CRD that
//! goes away breaks every client and object still using it, so the plan blocks on it; a
//! dropped field or a changed default is shown for the platform team to weigh.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use serde_json::Value;

/// One CRD as a release defines it: the versions it serves, and for each every field
/// path of its schema (`spec.placement.clusterAffinity`, `[]` for list items, `*` for map
/// values) with its default, if it has one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Crd {
    pub served: BTreeSet<String>,
    pub fields: BTreeMap<String, BTreeMap<String, Option<Value>>>,
}

/// A release's CRDs by name (`propagationpolicies.policy.karmada.io`).
pub type Schemas = BTreeMap<String, Crd>;

/// One difference, from the older release to the newer.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    CrdRemoved {
        crd: String,
    },
    NotServed {
        crd: String,
        version: String,
    },
    FieldDropped {
        crd: String,
        version: String,
        field: String,
    },
    DefaultChanged {
        crd: String,
        version: String,
        field: String,
        from: Option<Value>,
        to: Option<Value>,
    },
}

impl Change {
    /// Whether it breaks what uses it: a removed CRD, a version no longer served.
    pub fn blocking(&self) -> bool {
        matches!(self, Change::CrdRemoved { .. } | Change::NotServed { .. })
    }
}

fn shown(v: &Option<Value>) -> String {
    v.as_ref()
        .map_or_else(|| "none".to_string(), Value::to_string)
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::CrdRemoved { crd } => write!(f, "CRD {crd} is removed"),
            Change::NotServed { crd, version } => {
                write!(f, "{crd} is no longer served at {version}")
            }
            Change::FieldDropped {
                crd,
                version,
                field,
            } => write!(f, "{crd} {version} drops the field {field}"),
            Change::DefaultChanged {
                crd,
                version,
                field,
                from,
                to,
            } => write!(
                f,
                "{crd} {version} changes the default of {field} from {} to {}",
                shown(from),
                shown(to)
            ),
        }
    }
}

/// Deeper than any Karmada schema: a guard against a hostile tarball.
const MAX_DEPTH: usize = 48;
/// A release's tarball holds about 85 KB compressed and 2 MB of YAML.
const MAX_UNPACKED: u64 = 64 << 20;

/// The CRDs in a release's `crds.tar.gz`.
pub fn from_tarball(gz: &[u8]) -> Result<Schemas, String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(gz).take(MAX_UNPACKED));
    let mut out = Schemas::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("reading the tarball: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("reading the tarball: {e}"))?;
        let path = entry
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !(path.ends_with(".yaml") || path.ends_with(".yml")) {
            continue;
        }
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .map_err(|e| format!("reading {path}: {e}"))?;
        // Budgeted against alias bombs by serde-saphyr's defaults.
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| format!("{path} is not YAML: {e}"))?;
        for v in docs {
            if v["kind"] == "CustomResourceDefinition" {
                if let Some((name, crd)) = crd_of(&v) {
                    out.insert(name, crd);
                }
            }
        }
    }
    if out.is_empty() {
        return Err("the tarball holds no CustomResourceDefinition".into());
    }
    Ok(out)
}

/// A CRD document's name, served versions and fields.
pub fn crd_of(doc: &Value) -> Option<(String, Crd)> {
    let name = doc.pointer("/metadata/name")?.as_str()?.to_string();
    let mut crd = Crd::default();
    for v in doc.pointer("/spec/versions")?.as_array()? {
        let Some(version) = v["name"].as_str() else {
            continue;
        };
        if v["served"] != true {
            continue;
        }
        crd.served.insert(version.to_string());
        let mut fields = BTreeMap::new();
        if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
            walk(schema, "", &mut fields, 0);
        }
        crd.fields.insert(version.to_string(), fields);
    }
    Some((name, crd))
}

fn walk(schema: &Value, at: &str, out: &mut BTreeMap<String, Option<Value>>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut child = |key: &str, s: &Value| {
        let path = match at.is_empty() {
            true => key.to_string(),
            false => format!("{at}.{key}"),
        };
        out.insert(path.clone(), s.get("default").cloned());
        walk(s, &path, out, depth + 1);
    };
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            child(k, s);
        }
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        child("[]", items);
    }
    if let Some(values) = schema.get("additionalProperties").filter(|i| i.is_object()) {
        child("*", values);
    }
}

/// What changes from release `from` to release `to`, removals first.
pub fn diff(from: &Schemas, to: &Schemas) -> Vec<Change> {
    let mut out = Vec::new();
    for (name, old) in from {
        let Some(new) = to.get(name) else {
            out.push(Change::CrdRemoved { crd: name.clone() });
            continue;
        };
        for version in &old.served {
            let (Some(before), Some(after)) = (old.fields.get(version), new.fields.get(version))
            else {
                out.push(Change::NotServed {
                    crd: name.clone(),
                    version: version.clone(),
                });
                continue;
            };
            let mut dropped: Vec<&str> = Vec::new();
            for (field, default) in before {
                // Under a field already reported as dropped: said once, at the top.
                if dropped
                    .iter()
                    .any(|d| field.strip_prefix(d).is_some_and(|r| r.starts_with('.')))
                {
                    continue;
                }
                match after.get(field) {
                    None => {
                        dropped.push(field);
                        out.push(Change::FieldDropped {
                            crd: name.clone(),
                            version: version.clone(),
                            field: field.clone(),
                        });
                    }
                    Some(d) if d != default => out.push(Change::DefaultChanged {
                        crd: name.clone(),
                        version: version.clone(),
                        field: field.clone(),
                        from: default.clone(),
                        to: d.clone(),
                    }),
                    Some(_) => {}
                }
            }
        }
    }
    out.sort_by_key(|c| !c.blocking());
    out
}

/// Parsed tarballs kept, by their ConfigMap's uid and resourceVersion (so another host,
/// or a fixed ConfigMap, is never answered from an old parse).
const RELEASES: usize = 16;

type Kept = std::collections::HashMap<String, (std::time::Instant, std::sync::Arc<Schemas>)>;

fn kept() -> &'static parking_lot::Mutex<Kept> {
    static KEPT_RELEASES: std::sync::OnceLock<parking_lot::Mutex<Kept>> =
        std::sync::OnceLock::new();
    KEPT_RELEASES.get_or_init(Default::default)
}

/// Release `version`'s CRDs, from its tarball on the host (`crd::karmada_crds`).
async fn schemas(
    host: &kube::Client,
    ns: &str,
    version: &str,
    timeout: std::time::Duration,
) -> Result<std::sync::Arc<Schemas>, String> {
    let label = crate::crd::karmada_crds::LABEL;
    let found = tokio::time::timeout(timeout, crate::crd::karmada_crds::find(host, ns, version))
        .await
        .map_err(|_| format!("the host did not answer within {timeout:?}"))?
        .map_err(|e| format!("listing the CRD tarballs in {ns}: {e}"))?
        .ok_or_else(|| {
            format!("no CRD tarball of {version} on the host (a ConfigMap in {ns} labelled {label}={version})")
        })?;
    if let Some((_, s)) = kept().lock().get(&found.key) {
        return Ok(s.clone());
    }
    let tarball = found.tarball;
    let parsed = tokio::task::spawn_blocking(move || from_tarball(&tarball))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("the CRD tarball of {version}: {e}"))?;
    let parsed = std::sync::Arc::new(parsed);
    let mut k = kept().lock();
    if k.len() >= RELEASES {
        let oldest = k
            .iter()
            .min_by_key(|(_, (at, _))| *at)
            .map(|(v, _)| v.clone());
        if let Some(v) = oldest {
            k.remove(&v);
        }
    }
    k.insert(found.key, (std::time::Instant::now(), parsed.clone()));
    Ok(parsed)
}

/// The CRD changes of each pair of releases (from, to), read from the host.
pub async fn between(
    host: &kube::Client,
    ns: &str,
    pairs: std::collections::BTreeSet<(String, String)>,
    timeout: std::time::Duration,
) -> BTreeMap<(String, String), Result<Vec<Change>, String>> {
    let mut out = BTreeMap::new();
    for (from, to) in pairs {
        let found = match (
            schemas(host, ns, &from, timeout).await,
            schemas(host, ns, &to, timeout).await,
        ) {
            (Ok(f), Ok(t)) => Ok(diff(&f, &t)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        out.insert((from, to), found);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(name: &str, versions: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": name}, "spec": {"versions": versions}})
    }

    fn schema(props: Value) -> Value {
        json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}})
    }

    fn schemas(docs: &[Value]) -> Schemas {
        docs.iter().filter_map(crd_of).collect()
    }

    #[test]
    fn removals_drops_and_new_defaults_are_found_and_additions_are_not() {
        let old = schemas(&[
            crd(
                "propagationpolicies.policy.karmada.io",
                json!([{"name": "v1alpha1", "served": true, "schema": schema(json!({
                "placement": {"type": "object", "properties": {
                    "spreadConstraints": {"type": "array", "items": {"type": "object", "properties": {
                        "maxGroups": {"type": "integer", "default": 1}}}},
                    "legacy": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "priority": {"type": "integer", "default": 0}}))}]),
            ),
            crd(
                "works.work.karmada.io",
                json!([{"name": "v1alpha1", "served": true, "schema": schema(json!({}))},
                   {"name": "v1alpha2", "served": true, "schema": schema(json!({}))}]),
            ),
            crd("gone.karmada.io", json!([{"name": "v1", "served": true}])),
        ]);
        let new = schemas(&[
            crd(
                "propagationpolicies.policy.karmada.io",
                json!([{"name": "v1alpha1", "served": true, "schema": schema(json!({
                "placement": {"type": "object", "properties": {
                    "spreadConstraints": {"type": "array", "items": {"type": "object", "properties": {
                        "maxGroups": {"type": "integer", "default": 2}}}},
                    "added": {"type": "string"}}},
                "priority": {"type": "integer", "default": 0}}))}]),
            ),
            crd(
                "works.work.karmada.io",
                json!([{"name": "v1alpha1", "served": false},
                   {"name": "v1alpha2", "served": true, "schema": schema(json!({}))}]),
            ),
        ]);
        let changes: Vec<String> = diff(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            changes,
            [
                "CRD gone.karmada.io is removed",
                "works.work.karmada.io is no longer served at v1alpha1",
                "propagationpolicies.policy.karmada.io v1alpha1 drops the field spec.placement.legacy",
                "propagationpolicies.policy.karmada.io v1alpha1 changes the default of spec.placement.spreadConstraints.[].maxGroups from 1 to 2",
            ]
        );
        assert!(diff(&new, &new).is_empty());
    }

    #[test]
    fn a_tarball_is_read_and_a_hostile_one_refused() {
        let yaml = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: works.work.karmada.io\nspec:\n  versions:\n  - name: v1alpha1\n    served: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              suspend:\n                type: boolean\n                default: false\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-crd\n";
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(yaml.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "crds/bases/work.yaml", yaml.as_bytes())
            .expect("append");
        let raw = tar.into_inner().expect("tar");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &raw).expect("gzip");
        let gz = gz.finish().expect("gzip");
        let s = from_tarball(&gz).expect("read");
        assert_eq!(s.len(), 1);
        let work = &s["works.work.karmada.io"];
        assert_eq!(
            work.fields["v1alpha1"].get("spec.suspend"),
            Some(&Some(json!(false)))
        );
        assert!(from_tarball(b"not gzip").is_err());
    }
}
