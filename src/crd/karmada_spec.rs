//! The `Karmada` object's spec of a managed instance, in karmada-operator's own terms: the
//! Karmada version (each component's `imageTag`), where images come from (each component's
//! `imageRepository`), where the CRD tarball comes from (`crdTarball`), and merging spec
//! updates so fields the API does not model survive an UpdateInstance.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::error::ApiError;

/// Components whose image tag carries the Karmada version. Not karmadaAPIServer: its
/// image is kube-apiserver, tagged with a Kubernetes version.
pub const COMPONENTS: &[&str] = &[
    "karmadaAggregatedAPIServer",
    "karmadaControllerManager",
    "karmadaScheduler",
    "karmadaWebhook",
    "karmadaMetricsAdapter",
];

/// Every component karmada-operator installs by default: its name in the spec, where its
/// image fields sit, and its image's name in a registry (the operator's defaults).
pub const IMAGES: &[(&str, &str, &str)] = &[
    ("etcd", "/components/etcd/local", "etcd"),
    (
        "karmadaAPIServer",
        "/components/karmadaAPIServer",
        "kube-apiserver",
    ),
    (
        "kubeControllerManager",
        "/components/kubeControllerManager",
        "kube-controller-manager",
    ),
    (
        "karmadaAggregatedAPIServer",
        "/components/karmadaAggregatedAPIServer",
        "karmada-aggregated-apiserver",
    ),
    (
        "karmadaControllerManager",
        "/components/karmadaControllerManager",
        "karmada-controller-manager",
    ),
    (
        "karmadaScheduler",
        "/components/karmadaScheduler",
        "karmada-scheduler",
    ),
    (
        "karmadaWebhook",
        "/components/karmadaWebhook",
        "karmada-webhook",
    ),
    (
        "karmadaMetricsAdapter",
        "/components/karmadaMetricsAdapter",
        "karmada-metrics-adapter",
    ),
];

/// The spec name (as in [`IMAGES`]) of the component whose pods karmada-operator labels
/// `app.kubernetes.io/name=<app>`.
pub fn setting_of(app: &str) -> Option<&'static str> {
    const APPS: &[(&str, &str)] = &[
        ("etcd", "etcd"),
        ("karmada-apiserver", "karmadaAPIServer"),
        ("kube-controller-manager", "kubeControllerManager"),
        ("karmada-aggregated-apiserver", "karmadaAggregatedAPIServer"),
        ("karmada-controller-manager", "karmadaControllerManager"),
        ("karmada-scheduler", "karmadaScheduler"),
        ("karmada-webhook", "karmadaWebhook"),
        ("karmada-metrics-adapter", "karmadaMetricsAdapter"),
    ];
    APPS.iter().find(|(a, _)| *a == app).map(|(_, s)| *s)
}

/// An image override of one component; empty fields keep the operator's choice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    pub repository: String,
    pub tag: String,
}

/// What Kairship fills in for a managed instance that does not say (`kairship run
/// --managed-*`, the chart's `managedDefaults`): an air-gapped fleet's registry, tags and
/// CRD tarball. Applied when an instance is created, so each Instance describes itself and
/// a later change of defaults never rolls existing control planes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub karmada_version: Option<String>,
    pub image_registry: Option<String>,
    /// Component name to tag (for images whose tag is not the Karmada version: etcd,
    /// karmadaAPIServer, kubeControllerManager).
    pub image_tags: BTreeMap<String, String>,
    /// May contain `{version}`, replaced by the instance's Karmada version.
    pub crd_tarball_url: Option<String>,
}

fn component_pointer(field: &str, component: &str) -> Result<&'static str, ApiError> {
    IMAGES
        .iter()
        .find(|(c, _, _)| *c == component)
        .map(|(_, p, _)| *p)
        .ok_or_else(|| {
            let known: Vec<&str> = IMAGES.iter().map(|(c, _, _)| *c).collect();
            ApiError::invalid(
                field,
                format!(
                    "{component:?} is not a karmada-operator component (one of {})",
                    known.join(", ")
                ),
            )
        })
}

/// A spec fragment: `value` at the JSON pointer `at` (objects all the way).
fn at(pointer: &str, value: Value) -> Value {
    pointer
        .rsplit('/')
        .filter(|k| !k.is_empty())
        .fold(value, |v, k| json!({ k: v }))
}

/// An image reference part: no spaces, no scheme, nothing a container runtime rejects.
fn check_image_part(field: &str, v: &str, what: &str) -> Result<(), ApiError> {
    let ok = !v.is_empty()
        && !v.contains("://")
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._/:@".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            format!("{v:?} is not {what} (like registry.example.com/karmada)"),
        ))
    }
}

/// The fragment pointing every component at `registry` (`<registry>/<image name>`).
pub fn for_registry(field: &str, registry: &str) -> Result<Value, ApiError> {
    let registry = registry.trim_end_matches('/');
    check_image_part(field, registry, "an image registry")?;
    let mut spec = json!({});
    for (_, pointer, image) in IMAGES {
        merge(
            &mut spec,
            &at(
                pointer,
                json!({"imageRepository": format!("{registry}/{image}")}),
            ),
        );
    }
    Ok(spec)
}

/// The fragment setting one component's repository and/or tag.
pub fn for_image(field: &str, component: &str, image: &Image) -> Result<Value, ApiError> {
    let pointer = component_pointer(field, component)?;
    let mut fields = Map::new();
    if !image.repository.is_empty() {
        check_image_part(
            &format!("{field}.repository"),
            &image.repository,
            "an image repository",
        )?;
        fields.insert("imageRepository".into(), json!(image.repository));
    }
    if !image.tag.is_empty() {
        if image.tag.len() > 128
            || !image
                .tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        {
            return Err(ApiError::invalid(
                format!("{field}.tag"),
                format!("{:?} is not an image tag", image.tag),
            ));
        }
        fields.insert("imageTag".into(), json!(image.tag));
    }
    if fields.is_empty() {
        return Err(ApiError::invalid(field, "sets neither repository nor tag"));
    }
    Ok(at(pointer, Value::Object(fields)))
}

/// The fragment setting one component's replicas (etcd's: its local members, an odd
/// count so a quorum survives losing one).
pub fn for_replicas(field: &str, component: &str, replicas: i32) -> Result<Value, ApiError> {
    let pointer = component_pointer(field, component)?;
    let (max, odd) = match component {
        "etcd" => (7, true),
        _ => (10, false),
    };
    if !(1..=max).contains(&replicas) || (odd && replicas % 2 == 0) {
        let wanted = match odd {
            true => "an odd count from 1 to 7 (etcd's quorum is a majority: 2 members survive no more losses than 1)".to_string(),
            false => format!("from 1 to {max}"),
        };
        return Err(ApiError::invalid(
            field,
            format!("{replicas} replicas of {component}: must be {wanted}"),
        ));
    }
    Ok(at(pointer, json!({ "replicas": replicas })))
}

/// Each component's replicas where a spec sets them.
pub fn replicas_of(spec: &Value) -> BTreeMap<String, i32> {
    IMAGES
        .iter()
        .filter_map(|(c, pointer, _)| {
            let n = spec.pointer(&format!("{pointer}/replicas"))?.as_i64()?;
            Some((c.to_string(), i32::try_from(n).ok()?))
        })
        .collect()
}

/// The fragment making karmada-operator download Karmada's CRDs from `url` (an
/// air-gapped cluster cannot reach the release on GitHub, the operator's default).
pub fn for_crd_tarball(field: &str, url: &str) -> Result<Value, ApiError> {
    let parsed: http::Uri = url
        .parse()
        .map_err(|e| ApiError::invalid(field, format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
        return Err(ApiError::invalid(
            field,
            format!("{url:?}: karmada-operator downloads over http or https only"),
        ));
    }
    Ok(json!({"crdTarball": {"httpSource": {"url": url}, "crdDownloadPolicy": "IfNotPresent"}}))
}

/// The CRD tarball a spec names, if any.
pub fn crd_tarball_of(spec: &Value) -> Option<String> {
    spec.pointer("/crdTarball/httpSource/url")?
        .as_str()
        .map(String::from)
}

/// Each component's image override in a spec.
pub fn images_of(spec: &Value) -> BTreeMap<String, Image> {
    IMAGES
        .iter()
        .filter_map(|(c, pointer, _)| {
            let at = spec.pointer(pointer)?;
            let field = |k: &str| at.get(k).and_then(Value::as_str).unwrap_or_default();
            let image = Image {
                repository: field("imageRepository").to_string(),
                tag: field("imageTag").to_string(),
            };
            (image != Image::default()).then(|| (c.to_string(), image))
        })
        .collect()
}

/// The registry every component's image comes from, when they all name one.
pub fn registry_of(spec: &Value) -> Option<String> {
    let mut registry = None;
    for (_, pointer, image) in IMAGES {
        let repo = spec
            .pointer(&format!("{pointer}/imageRepository"))?
            .as_str()?;
        let reg = repo.strip_suffix(&format!("/{image}"))?;
        if registry.get_or_insert(reg) != &reg {
            return None;
        }
    }
    registry.map(String::from)
}

impl Defaults {
    /// The fragment these defaults give an instance of `version` (the defaults' own when
    /// `None`); the instance's own spec goes over it.
    pub fn fragment(&self, version: Option<&str>) -> Result<Value, ApiError> {
        let mut spec = json!({});
        let version = version.or(self.karmada_version.as_deref());
        if let Some(v) = version {
            merge(&mut spec, &for_version(v));
        }
        if let Some(r) = &self.image_registry {
            merge(&mut spec, &for_registry("--managed-image-registry", r)?);
        }
        for (component, tag) in &self.image_tags {
            let image = Image {
                tag: tag.clone(),
                ..Image::default()
            };
            merge(
                &mut spec,
                &for_image("--managed-image-tag", component, &image)?,
            );
        }
        if let Some(url) = &self.crd_tarball_url {
            let url = url.replace("{version}", version.unwrap_or("latest"));
            merge(
                &mut spec,
                &for_crd_tarball("--managed-crd-tarball-url", &url)?,
            );
        }
        Ok(spec)
    }

    /// `own` (an instance's spec) over these defaults for its version.
    pub fn under(&self, own: &Value) -> Result<Value, ApiError> {
        let mut spec = self.fragment(version_of(own).as_deref())?;
        merge(&mut spec, own);
        Ok(spec)
    }

    /// For an update of `old` by `change`: a CRD tarball these defaults chose for the old
    /// version follows the new version (a URL the instance set itself stays).
    pub fn follow_version(&self, old: &Value, change: &mut Value) {
        let (Some(template), Some(from), Some(to)) = (
            self.crd_tarball_url.as_deref(),
            version_of(old),
            version_of(change),
        ) else {
            return;
        };
        if from == to || !template.contains("{version}") || crd_tarball_of(change).is_some() {
            return;
        }
        if crd_tarball_of(old).as_deref() == Some(&template.replace("{version}", &from)) {
            let url = template.replace("{version}", &to);
            merge(change, &json!({"crdTarball": {"httpSource": {"url": url}}}));
        }
    }
}

/// `vMAJOR.MINOR.PATCH` (with an optional pre-release suffix).
pub fn check_version(field: &str, v: &str) -> Result<(), ApiError> {
    let core = v.strip_prefix('v').unwrap_or_default();
    let core = core.split_once('-').map_or(core, |(c, _)| c);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            format!("{v:?} is not a Karmada version like v1.12.0"),
        ))
    }
}

/// The spec fragment that sets every component's image tag to `version`.
pub fn for_version(version: &str) -> Value {
    let components: Map<String, Value> = COMPONENTS
        .iter()
        .map(|c| (c.to_string(), json!({"imageTag": version})))
        .collect();
    json!({"components": components})
}

/// The version a Karmada spec asks for, if any.
pub fn version_of(spec: &Value) -> Option<String> {
    ["karmadaControllerManager", "karmadaScheduler"]
        .iter()
        .find_map(|c| spec.pointer(&format!("/components/{c}/imageTag"))?.as_str())
        .map(String::from)
}

/// JSON merge (RFC 7386 without deletions): `patch` over `base`.
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Whether everything `want` sets is already in `have`.
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| contains(hv, v))),
        (h, w) => h == w,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_merge_and_containment() {
        assert!(check_version("v", "v1.13.0").is_ok());
        assert!(check_version("v", "v1.13.0-rc.1").is_ok());
        for bad in ["1.13.0", "v1.13", "latest", "v1.x.0", ""] {
            assert!(check_version("v", bad).is_err(), "{bad}");
        }
        let mut spec = json!({"components": {"etcd": {"local": {}}, "karmadaScheduler": {"replicas": 2}, "karmadaAPIServer": {"imageTag": "v1.31.3"}}, "hostCluster": {}});
        merge(&mut spec, &for_version("v1.13.0"));
        assert_eq!(
            spec["components"]["karmadaScheduler"],
            json!({"replicas": 2, "imageTag": "v1.13.0"})
        );
        assert_eq!(
            spec["components"]["karmadaAPIServer"]["imageTag"], "v1.31.3",
            "the kube-apiserver image keeps its Kubernetes version"
        );
        assert_eq!(spec["components"]["etcd"], json!({"local": {}}));
        assert_eq!(version_of(&spec).as_deref(), Some("v1.13.0"));
        assert!(contains(&spec, &for_version("v1.13.0")));
        assert!(!contains(&spec, &for_version("v1.14.0")));
        assert_eq!(version_of(&json!({})), None);
    }

    #[test]
    fn air_gapped_defaults_compose_in_the_operators_terms() {
        let defaults = Defaults {
            karmada_version: Some("v1.18.2".into()),
            image_registry: Some("mirror.example/karmada/".into()),
            image_tags: [("etcd".to_string(), "3.6.7".to_string())].into(),
            crd_tarball_url: Some("http://crds.example/{version}/crds.tar.gz".into()),
        };
        let spec = defaults.fragment(Some("v1.17.1")).expect("valid defaults");
        assert_eq!(
            spec["components"]["etcd"]["local"],
            json!({"imageRepository": "mirror.example/karmada/etcd", "imageTag": "3.6.7"})
        );
        assert_eq!(
            registry_of(&spec).as_deref(),
            Some("mirror.example/karmada")
        );
        assert_eq!(version_of(&spec).as_deref(), Some("v1.17.1"));
        assert_eq!(
            crd_tarball_of(&spec).as_deref(),
            Some("http://crds.example/v1.17.1/crds.tar.gz")
        );
        assert_eq!(images_of(&spec)["karmadaMetricsAdapter"].tag, "v1.17.1");
        // One component elsewhere: no single registry to report.
        let mut mixed = spec.clone();
        merge(
            &mut mixed,
            &for_image(
                "f",
                "karmadaWebhook",
                &Image {
                    repository: "other.example/webhook".into(),
                    tag: String::new(),
                },
            )
            .expect("valid"),
        );
        assert_eq!(registry_of(&mixed), None);

        // An upgrade moves the defaults' CRD tarball along; an instance's own URL stays.
        let mut change = for_version("v1.18.2");
        defaults.follow_version(&spec, &mut change);
        assert_eq!(
            crd_tarball_of(&change).as_deref(),
            Some("http://crds.example/v1.18.2/crds.tar.gz")
        );
        let mut own = spec.clone();
        merge(
            &mut own,
            &for_crd_tarball("f", "https://own.example/crds.tgz").expect("valid"),
        );
        let mut change = for_version("v1.18.2");
        defaults.follow_version(&own, &mut change);
        assert_eq!(crd_tarball_of(&change), None);

        for (bad, field) in [
            (for_registry("r", "https://x"), "r"),
            (for_crd_tarball("u", "file:///etc/passwd"), "u"),
            (for_image("c", "karmada", &Image::default()), "c"),
        ] {
            let e = bad.expect_err(field).to_string();
            assert!(e.starts_with(field), "{e}");
        }
    }
}
