//! Karmada's kinds compared: the real kube-apiserver given Karmada's own CRDs (from the
//! Karmada module the real fleet builds, as a karmada-apiserver has them) against a
//! simulated instance, whose schemas are embedded data. `kubectl explain` on each kind's
//! main fields, a misspelt field refused by strict validation, and a PropagationPolicy
//! created and server-side applied (defaults, pruning, field ownership). A difference
//! here usually means `scripts/sim/karmada-schemas.py` was not re-run after the Karmada
//! version changed.

use std::path::Path;

use serde_json::Value;

use super::openapi::kubectl;
use super::writes::normalized;

/// The CRDs a simulated instance serves, as files of Karmada's `_crds/bases`.
const SERVED: &[&str] = &[
    "policy.karmada.io_propagationpolicies",
    "policy.karmada.io_clusterpropagationpolicies",
    "policy.karmada.io_clustertaintpolicies",
    "policy.karmada.io_overridepolicies",
    "policy.karmada.io_clusteroverridepolicies",
    "work.karmada.io_resourcebindings",
    "work.karmada.io_clusterresourcebindings",
    "work.karmada.io_works",
];

const EXPLAINED: &[&str] = &[
    "propagationpolicies.spec.placement",
    "propagationpolicies.spec.failover.application",
    "clusterpropagationpolicies.spec",
    "overridepolicies.spec.overrideRules.overriders",
    "clusteroverridepolicies.spec.resourceSelectors",
    "clustertaintpolicies.spec",
    "resourcebindings.spec",
    "resourcebindings.status.aggregatedStatus",
    "clusterresourcebindings.spec.clusters",
    "works.spec.workload",
];

const POLICY: &str = "apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: NAME
  namespace: default
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: web
  placement:
    clusterAffinity:
      clusterNames: [member1]
    replicaScheduling: {}
    clusterTolerations:
      - key: cluster.karmada.io/not-ready
        effect: NoExecute
  failover:
    application:
      decisionConditions: {}
";

/// Differences between kube-apiserver with Karmada's CRDs and a simulated instance.
pub fn compared(
    crds: &Path,
    real_kubeconfig: &Path,
    sim_kubeconfig: &Path,
    dir: &Path,
) -> Vec<String> {
    let (real_cache, sim_cache) = (
        dir.join("karmada-real-cache"),
        dir.join("karmada-sim-cache"),
    );
    let real = |args: &[&str]| kubectl(real_kubeconfig, &real_cache, args);
    let sim = |args: &[&str]| kubectl(sim_kubeconfig, &sim_cache, args);
    // Installed with a discovery cache of their own, so the comparisons' caches start
    // with the new groups in them.
    let install_cache = dir.join("karmada-install-cache");
    let install = |args: &[&str]| kubectl(real_kubeconfig, &install_cache, args);
    for file in SERVED {
        let path = crds.join(format!("{file}.yaml"));
        let out = install(&["apply", "--server-side", "-f", &path.to_string_lossy()]);
        assert!(!out.starts_with("FAILED"), "installing {file}: {out}");
    }
    let established = install(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd",
        "--all",
    ]);
    assert!(!established.starts_with("FAILED"), "{established}");

    let mut differences = Vec::new();
    for target in EXPLAINED {
        let (a, b) = (real(&["explain", target]), sim(&["explain", target]));
        assert!(
            !a.starts_with("FAILED"),
            "kube-apiserver: explain {target}: {a}"
        );
        if a != b {
            differences.push(format!(
                "kubectl explain {target}:\nreal:\n{a}\nsimulator:\n{b}"
            ));
        }
    }

    let write = |name: &str, text: &str| {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, text).expect("manifest");
        path.to_string_lossy().into_owned()
    };
    let misspelt = write(
        "misspelt",
        &POLICY
            .replace("NAME", "misspelt")
            .replace("  placement:", "  placment: {}\n  placement:"),
    );
    let (a, b) = (
        real(&["create", "-f", &misspelt]),
        sim(&["create", "-f", &misspelt]),
    );
    assert!(
        a.starts_with("FAILED"),
        "kube-apiserver took a misspelt field: {a}"
    );
    if a != b {
        differences.push(format!("misspelt policy: real {a:?}, simulator {b:?}"));
    }
    let created = write("created", &POLICY.replace("NAME", "created"));
    let applied = write("applied", &POLICY.replace("NAME", "applied"));
    // The writes' own answers: the simulated instance's Karmada controllers act on the
    // policy afterwards (labels, finalizers), which a bare kube-apiserver does not.
    for (what, args) in [
        ("created", vec!["create", "-o", "json", "-f", &created]),
        (
            "applied",
            vec!["apply", "--server-side", "-o", "json", "-f", &applied],
        ),
    ] {
        let shown = |out: String| -> Value {
            match serde_json::from_str::<Value>(&out) {
                Ok(v) => normalized(&v),
                Err(_) => Value::String(out),
            }
        };
        let (a, b) = (shown(real(&args)), shown(sim(&args)));
        assert!(a.is_object(), "kube-apiserver: {what}: {a}");
        if a != b {
            differences.push(format!("policy {what}:\nreal {a}\nsimulator {b}"));
        }
    }
    differences
}
