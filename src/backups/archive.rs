//! What a backup holds and in what order a restore writes it: one JSON line per object
//! (`Entry`: the resource it is of, and the object without what its cluster assigned),
//! gzip-compressed. What an instance makes itself is left out: events, leases, endpoints,
//! Karmada's Works and bindings (its detector writes them again from templates and
//! policies), execution namespaces, service-account tokens, bootstrap RBAC, Karmada's own
//! CRDs (the instance's version installs them) and objects a controller owns.

use std::io::{Read, Write};

use kube::api::ApiResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Groups whose objects an instance makes or serves by itself.
const SKIP_GROUPS: &[&str] = &[
    "events.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "work.karmada.io",
    "apiregistration.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "metrics.k8s.io",
    "custom.metrics.k8s.io",
    "external.metrics.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "certificates.k8s.io",
];
/// Core resources an instance makes or serves by itself.
const SKIP_CORE: &[&str] = &["events", "endpoints", "componentstatuses", "pods", "nodes"];
/// Namespaces every instance has, whose objects are its own.
const SYSTEM_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease"];

/// The resource of an entry, as a restore needs it to write the object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

impl Resource {
    pub fn of(ar: &ApiResource, namespaced: bool) -> Self {
        Self {
            group: ar.group.clone(),
            version: ar.version.clone(),
            kind: ar.kind.clone(),
            plural: ar.plural.clone(),
            namespaced,
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        let api_version = match self.group.as_str() {
            "" => self.version.clone(),
            g => format!("{g}/{}", self.version),
        };
        ApiResource {
            group: self.group.clone(),
            version: self.version.clone(),
            api_version,
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }

    /// "deployments.apps", "secrets".
    pub fn key(&self) -> String {
        match self.group.as_str() {
            "" => self.plural.clone(),
            g => format!("{}.{g}", self.plural),
        }
    }

    /// Whether a backup reads this resource at all.
    pub fn backed_up(&self) -> bool {
        let core_skipped = self.group.is_empty() && SKIP_CORE.contains(&self.plural.as_str());
        !(SKIP_GROUPS.contains(&self.group.as_str()) || core_skipped)
    }

    /// When a restore writes it: what others need first (CRDs, namespaces, RBAC, the
    /// Secrets clusters name), then clusters, then Karmada's policies, then templates.
    pub fn rank(&self) -> u8 {
        match (self.group.as_str(), self.plural.as_str()) {
            ("apiextensions.k8s.io", _) => 0,
            ("", "namespaces") => 1,
            _ if !self.namespaced && !self.group.ends_with("karmada.io") => 2,
            ("", "serviceaccounts" | "secrets" | "configmaps") => 3,
            ("rbac.authorization.k8s.io", _) => 3,
            ("cluster.karmada.io", _) => 4,
            (g, _) if g.ends_with("karmada.io") => 5,
            _ => 6,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub resource: Resource,
    pub object: Value,
}

/// Whether `object` of `resource` goes into a backup.
pub fn keeps(resource: &Resource, object: &Value) -> bool {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    if SYSTEM_NAMESPACES.contains(&namespace) || namespace.starts_with("karmada-es-") {
        return false;
    }
    let controlled = meta["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["controller"] == true));
    if controlled {
        return false;
    }
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "namespaces") => {
            !SYSTEM_NAMESPACES.contains(&name)
                && name != "default"
                && !name.starts_with("karmada-es-")
        }
        ("", "secrets") => object["type"] != "kubernetes.io/service-account-token",
        ("", "configmaps") => name != "kube-root-ca.crt",
        ("", "serviceaccounts") => name != "default",
        ("rbac.authorization.k8s.io", "clusterroles" | "clusterrolebindings") => {
            !name.starts_with("system:")
                && meta["labels"]["kubernetes.io/bootstrapping"] != "rbac-defaults"
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => !object["spec"]["group"]
            .as_str()
            .is_some_and(|g| g.ends_with("karmada.io")),
        _ => true,
    }
}

/// `object` without what its cluster assigned (identity, versions, status, a Service's
/// addresses), so it can be created anywhere.
pub fn portable(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "ownerReferences",
            "generateName",
        ] {
            meta.remove(field);
        }
    }
    if let Some(o) = object.as_object_mut() {
        o.remove("status");
    }
    if object["kind"] == "Service" {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            if spec.get("clusterIP").is_some_and(|ip| ip != "None") {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
        }
    }
    object
}

/// Appends entries to a gzip stream.
pub struct Writer {
    gz: flate2::write::GzEncoder<Vec<u8>>,
}

impl Default for Writer {
    fn default() -> Self {
        Self {
            gz: flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()),
        }
    }
}

impl Writer {
    pub fn push(&mut self, entry: &Entry) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.gz, entry)?;
        self.gz.write_all(b"\n")
    }

    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        self.gz.finish()
    }
}

/// The entries of a backup's data, or what is wrong with it.
pub fn read(data: &[u8]) -> Result<Vec<Entry>, String> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(data)
        .read_to_string(&mut text)
        .map_err(|e| format!("not gzip-compressed JSON lines: {e}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(group: &str, plural: &str, namespaced: bool) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            kind: "K".into(),
            plural: plural.into(),
            namespaced,
        }
    }

    #[test]
    fn what_an_instance_makes_itself_is_left_out() {
        let secrets = res("", "secrets", true);
        let token = json!({"metadata": {"name": "t", "namespace": "a"}, "type": "kubernetes.io/service-account-token"});
        assert!(!keeps(&secrets, &token));
        let opaque =
            json!({"metadata": {"name": "s", "namespace": "karmada-cluster"}, "type": "Opaque"});
        assert!(keeps(&secrets, &opaque));
        let es = json!({"metadata": {"name": "s", "namespace": "karmada-es-member1"}});
        assert!(!keeps(&secrets, &es));
        let owned = json!({"metadata": {"name": "s", "namespace": "a", "ownerReferences": [{"controller": true}]}});
        assert!(!keeps(&secrets, &owned));
        let crds = res("apiextensions.k8s.io", "customresourcedefinitions", false);
        assert!(!keeps(
            &crds,
            &json!({"metadata": {"name": "x"}, "spec": {"group": "policy.karmada.io"}})
        ));
        assert!(keeps(
            &crds,
            &json!({"metadata": {"name": "x"}, "spec": {"group": "example.com"}})
        ));
        assert!(!res("work.karmada.io", "resourcebindings", true).backed_up());
        assert!(res("policy.karmada.io", "propagationpolicies", true).backed_up());
    }

    #[test]
    fn restores_write_what_others_need_first() {
        let order = [
            res("apiextensions.k8s.io", "customresourcedefinitions", false),
            res("", "namespaces", false),
            res("rbac.authorization.k8s.io", "clusterroles", false),
            res("", "secrets", true),
            res("cluster.karmada.io", "clusters", false),
            res("policy.karmada.io", "propagationpolicies", true),
            res("apps", "deployments", true),
        ];
        let ranks: Vec<u8> = order.iter().map(Resource::rank).collect();
        assert!(ranks.windows(2).all(|w| w[0] < w[1]), "{ranks:?}");
    }

    #[test]
    fn objects_lose_what_their_cluster_assigned_and_round_trip() {
        let svc = json!({"kind": "Service", "metadata": {"name": "web", "uid": "u", "resourceVersion": "7"},
            "spec": {"clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": [{"port": 80}]}, "status": {}});
        let p = portable(svc);
        assert_eq!(
            p,
            json!({"kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
        );
        let mut w = Writer::default();
        let entry = Entry {
            resource: res("", "services", true),
            object: p.clone(),
        };
        w.push(&entry).expect("valid in this test");
        let data = w.finish().expect("valid in this test");
        let back = read(&data).expect("valid in this test");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].object, p);
        assert!(read(b"not gzip").expect_err("not gzip").contains("gzip"));
    }
}
