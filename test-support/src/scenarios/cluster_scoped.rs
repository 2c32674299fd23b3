//! A cluster-scoped template (a ClusterRole) claimed by a ClusterPropagationPolicy, as
//! real Karmada leaves it: a ClusterResourceBinding `<name>-clusterrole` placed on the
//! chosen cluster, and a Work there naming that binding. Run against the simulated fleet
//! and the real one, so both must agree.

use std::process::Output;
use std::time::Duration;

use crate::wait;
use serde_json::Value;

const MANIFEST: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: team-reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list]
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: team-reader
spec:
  resourceSelectors:
    - apiVersion: rbac.authorization.k8s.io/v1
      kind: ClusterRole
      name: team-reader
  placement:
    clusterAffinity:
      clusterNames: [member1]
"#;

fn get_json(kubectl: &dyn Fn(&[&str]) -> Output, args: &[&str]) -> Value {
    let out = kubectl(args);
    if !out.status.success() {
        return Value::Null;
    }
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// The Work in `karmada-es-<cluster>` carrying the ClusterRole, if any.
fn work_on(kubectl: &dyn Fn(&[&str]) -> Output, cluster: &str) -> Option<Value> {
    let ns = format!("karmada-es-{cluster}");
    let works = get_json(
        kubectl,
        &["get", "works.work.karmada.io", "-n", &ns, "-o", "json"],
    );
    works["items"].as_array()?.iter().find_map(|w| {
        let m = &w["spec"]["workload"]["manifests"][0];
        (m["kind"] == "ClusterRole" && m["metadata"]["name"] == "team-reader").then(|| w.clone())
    })
}

/// `dir`: a directory to write the manifest into.
pub fn cluster_role(kubectl: &dyn Fn(&[&str]) -> Output, dir: &std::path::Path, within: Duration) {
    let path = dir.join("team-reader.yaml");
    std::fs::write(&path, MANIFEST).expect("write the manifest");
    super::apply(kubectl, &path);
    let crb = wait(
        within,
        "team-reader's ClusterResourceBinding on member1",
        || {
            let b = get_json(
                kubectl,
                &[
                    "get",
                    "clusterresourcebindings.work.karmada.io",
                    "team-reader-clusterrole",
                    "-o",
                    "json",
                ],
            );
            let names: Vec<&str> = b["spec"]["clusters"]
                .as_array()?
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            (names == ["member1"]).then_some(b)
        },
    );
    assert_eq!(crb["kind"], "ClusterResourceBinding");
    assert!(crb["metadata"]["namespace"].is_null(), "{crb}");
    assert_eq!(crb["spec"]["resource"]["kind"], "ClusterRole", "{crb}");
    assert!(
        crb["metadata"]["labels"]["clusterpropagationpolicy.karmada.io/permanent-id"].is_string(),
        "{crb}"
    );
    let work = wait(within, "team-reader's Work for member1", || {
        work_on(kubectl, "member1")
    });
    assert_eq!(
        work["metadata"]["annotations"]["clusterresourcebinding.karmada.io/name"],
        "team-reader-clusterrole",
        "{work}"
    );
    let manifest = &work["spec"]["workload"]["manifests"][0];
    assert_eq!(
        manifest["rules"][0]["resources"][0], "configmaps",
        "{manifest}"
    );
    assert!(work_on(kubectl, "member2").is_none(), "nothing on member2");
}
