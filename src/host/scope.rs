//! What Kairship may touch on the host on an instance's behalf. Kairship reads Secrets and
//! writes `Karmada` objects with its own (broad) host credentials, so an instance admin
//! must not be able to point it anywhere else: kubeconfig Secrets only in the namespaces
//! the operator of Kairship allows, managed control planes only in allowed namespaces and
//! only from allowed image registries and CRD tarball URLs. The API refuses such specs
//! naming the field; the actors refuse them again for Instances written straight to the
//! host.

use serde_json::Value;

/// The label Kairship puts on every `Karmada` object it creates, with the instance's name;
/// an object without it is someone else's, never adopted, patched or deleted.
pub const OWNER_LABEL: &str = "kairship.io/instance";

/// karmada-operator's own registries (images it uses when a component names none).
pub const OPERATOR_REGISTRIES: &[&str] = &["docker.io/karmada", "registry.k8s.io"];
/// Where karmada-operator downloads Karmada's CRDs by default.
pub const OPERATOR_CRD_URLS: &[&str] =
    &["https://github.com/karmada-io/karmada/releases/download/"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostScope {
    /// Namespaces of External instances' kubeconfig Secrets.
    pub kubeconfig_namespaces: Vec<String>,
    /// Namespaces managed instances' `Karmada` objects may live in (besides the managed
    /// namespace, which is always allowed).
    pub managed_namespaces: Vec<String>,
    /// Registries (or repository prefixes) a managed instance's images may come from.
    pub image_registries: Vec<String>,
    /// URL prefixes a managed instance's CRD tarball may come from.
    pub crd_urls: Vec<String>,
}

impl Default for HostScope {
    fn default() -> Self {
        Self {
            kubeconfig_namespaces: vec!["kairship-system".into()],
            managed_namespaces: Vec::new(),
            image_registries: OPERATOR_REGISTRIES.iter().map(|s| s.to_string()).collect(),
            crd_urls: OPERATOR_CRD_URLS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// What a spec asks that the scope does not allow: the field (in the Karmada spec's or the
/// request's terms) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OutOfScope {
    pub field: String,
    pub message: String,
}

fn out(field: impl Into<String>, message: String) -> OutOfScope {
    OutOfScope {
        field: field.into(),
        message,
    }
}

fn listed(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("{i:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl HostScope {
    pub fn check_kubeconfig_namespace(&self, field: &str, ns: &str) -> Result<(), OutOfScope> {
        match self.kubeconfig_namespaces.iter().any(|n| n == ns) {
            true => Ok(()),
            false => Err(out(
                field,
                format!(
                    "Kairship reads kubeconfig Secrets only in {} (the chart's kubeconfigSecretNamespaces), not in {ns:?}",
                    listed(&self.kubeconfig_namespaces)
                ),
            )),
        }
    }

    /// `managed_namespace` is Kairship's default one, always allowed.
    pub fn check_managed_namespace(
        &self,
        field: &str,
        ns: &str,
        managed_namespace: &str,
    ) -> Result<(), OutOfScope> {
        if ns == managed_namespace || self.managed_namespaces.iter().any(|n| n == ns) {
            return Ok(());
        }
        let mut allowed = vec![managed_namespace.to_string()];
        allowed.extend(self.managed_namespaces.iter().cloned());
        Err(out(
            field,
            format!(
                "managed control planes may live only in {} (the chart's managed.allowedNamespaces), not in {ns:?}",
                listed(&allowed)
            ),
        ))
    }

    /// Whether an image repository (`registry/path/name`) comes from an allowed registry;
    /// `extra` is a registry Kairship's own defaults name.
    pub fn check_image(
        &self,
        field: &str,
        repository: &str,
        extra: Option<&str>,
    ) -> Result<(), OutOfScope> {
        let allowed = |prefix: &str| {
            let prefix = prefix.trim_end_matches('/');
            repository == prefix
                || repository
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        if self.image_registries.iter().any(|r| allowed(r)) || extra.is_some_and(allowed) {
            return Ok(());
        }
        let mut names = self.image_registries.clone();
        names.extend(extra.map(String::from));
        Err(out(
            field,
            format!(
                "{repository:?} is not from an allowed image registry ({}; the chart's managed.allowedImageRegistries)",
                listed(&names)
            ),
        ))
    }

    pub fn check_crd_url(
        &self,
        field: &str,
        url: &str,
        extra: Option<&str>,
    ) -> Result<(), OutOfScope> {
        if self.crd_urls.iter().any(|p| url.starts_with(p.as_str()))
            || extra.is_some_and(|p| url.starts_with(p))
        {
            return Ok(());
        }
        let mut names = self.crd_urls.clone();
        names.extend(extra.map(String::from));
        Err(out(
            field,
            format!(
                "{url:?} is not under an allowed CRD tarball location ({}; the chart's managed.allowedCRDTarballURLs)",
                listed(&names)
            ),
        ))
    }

    /// Every image and CRD tarball a `Karmada` spec names, wherever it names them (an
    /// Instance written to the host may carry any spec); `defaults` are Kairship's own
    /// managed defaults, which are allowed too.
    pub fn check_karmada_spec(
        &self,
        spec: &Value,
        defaults: &crate::crd::karmada_spec::Defaults,
    ) -> Result<(), OutOfScope> {
        let registry = defaults.image_registry.as_deref();
        let crd_prefix = defaults.crd_tarball_url.as_deref().map(crd_url_prefix);
        let mut found = Vec::new();
        repositories(spec, String::new(), &mut found);
        for (pointer, repository) in found {
            self.check_image(&format!("spec{pointer}"), &repository, registry)?;
        }
        if let Some(url) = spec
            .pointer("/crdTarball/httpSource/url")
            .and_then(Value::as_str)
        {
            self.check_crd_url("spec.crdTarball.httpSource.url", url, crd_prefix)?;
        }
        Ok(())
    }
}

/// The part of a CRD URL template before `{version}`: the location every version of it
/// shares.
pub fn crd_url_prefix(template: &str) -> &str {
    template
        .split_once("{version}")
        .map_or(template, |(before, _)| before)
}

/// Every `imageRepository` in a spec, with its JSON pointer.
fn repositories(v: &Value, at: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let here = format!("{at}.{k}");
                match (k.as_str(), child) {
                    ("imageRepository", Value::String(r)) => out.push((here, r.clone())),
                    _ => repositories(child, here, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                repositories(child, format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubeconfigs_only_from_allowed_namespaces() {
        let scope = HostScope::default();
        assert!(scope
            .check_kubeconfig_namespace("f", "kairship-system")
            .is_ok());
        let e = scope
            .check_kubeconfig_namespace("f", "kube-system")
            .expect_err("kube-system");
        assert_eq!(e.field, "f");
        assert!(e.message.contains("kube-system"), "{e}");
    }

    #[test]
    fn managed_namespace_is_always_allowed() {
        let scope = HostScope {
            managed_namespaces: vec!["karmada-teams".into()],
            ..HostScope::default()
        };
        assert!(scope.check_managed_namespace("f", "ks", "ks").is_ok());
        assert!(scope
            .check_managed_namespace("f", "karmada-teams", "ks")
            .is_ok());
        assert!(scope
            .check_managed_namespace("f", "kube-system", "ks")
            .is_err());
    }

    #[test]
    fn images_match_whole_path_segments() {
        let scope = HostScope::default();
        assert!(scope
            .check_image("f", "docker.io/karmada/karmada-scheduler", None)
            .is_ok());
        assert!(scope
            .check_image("f", "registry.k8s.io/kube-apiserver", None)
            .is_ok());
        // A prefix that is not a whole segment is another registry.
        assert!(scope
            .check_image("f", "docker.io/karmadaevil/x", None)
            .is_err());
        assert!(scope
            .check_image("f", "registry.k8s.io.evil.com/kube-apiserver", None)
            .is_err());
        assert!(scope
            .check_image(
                "f",
                "mirror.local/karmada/etcd",
                Some("mirror.local/karmada")
            )
            .is_ok());
    }

    #[test]
    fn every_image_in_a_spec_is_checked() {
        let scope = HostScope::default();
        let defaults = crate::crd::karmada_spec::Defaults::default();
        let ok =
            json!({"components": {"etcd": {"local": {"imageRepository": "registry.k8s.io/etcd"}}}});
        assert!(scope.check_karmada_spec(&ok, &defaults).is_ok());
        let bad =
            json!({"components": {"karmadaScheduler": {"imageRepository": "evil.example/x"}}});
        let e = scope.check_karmada_spec(&bad, &defaults).expect_err("evil");
        assert_eq!(e.field, "spec.components.karmadaScheduler.imageRepository");
        let url = json!({"crdTarball": {"httpSource": {"url": "http://169.254.169.254/latest"}}});
        let e = scope
            .check_karmada_spec(&url, &defaults)
            .expect_err("metadata service");
        assert_eq!(e.field, "spec.crdTarball.httpSource.url");
        let own = crate::crd::karmada_spec::Defaults {
            crd_tarball_url: Some("http://ks.svc:8080/karmada-crds/{version}/crds.tar.gz".into()),
            ..Default::default()
        };
        let served = json!({"crdTarball": {"httpSource": {"url": "http://ks.svc:8080/karmada-crds/v1.2.3/crds.tar.gz"}}});
        assert!(scope.check_karmada_spec(&served, &own).is_ok());
    }
}
