//! Clusterpedia registration on the real host kube-apiserver, against Clusterpedia's own
//! CRDs (v0.9.1, from its module): the PediaCluster Kairship writes survives the CRD's
//! schema as written (nothing pruned), reads the instance through a Secret in
//! Clusterpedia's namespace as a read-only ServiceAccount of the real karmada-apiserver,
//! and leaves with its Instance. Clusterpedia's servers are not run: they cannot be built
//! from the module proxy here (see the README).

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::common::eventually;
use crate::Demo;

const NS: &str = "clusterpedia-system";

fn host(demo: &Demo) -> std::path::PathBuf {
    demo.dir.path().join("real/host/admin.kubeconfig")
}

/// Each instance has its PediaCluster, as Kairship wrote it, and a Secret with a read-only
/// identity on the instance.
pub async fn registered(demo: &Demo, instances: &[&str]) {
    let host = host(demo);
    for name in instances {
        let pedia = demo
            .eventually_json(
                Duration::from_secs(60),
                "a PediaCluster",
                &host,
                &["get", "pediacluster", name, "-o", "json"],
            )
            .await;
        assert_eq!(
            pedia["spec"],
            kairship::controllers::clusterpedia::spec(name),
            "the real CRD keeps every field Kairship writes"
        );
        assert_eq!(pedia["metadata"]["ownerReferences"][0]["kind"], "Instance");
        // Clusterpedia reads the real karmada-apiserver as a read-only ServiceAccount, with
        // a token the instance issued (TokenRequest), never Kairship's admin kubeconfig.
        let secret = demo.json(
            &host,
            &[
                "get",
                "secret",
                &format!("kairship-{name}-kubeconfig"),
                "-n",
                NS,
                "-o",
                "json",
            ],
        );
        let kubeconfig = secret["data"]["kubeconfig"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .expect("a kubeconfig in the Secret");
        let file = demo.dir.path().join(format!("pedia-{name}.kubeconfig"));
        std::fs::write(&file, kubeconfig).expect("write");
        let whoami = demo.ok(
            &file,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        );
        assert_eq!(
            whoami,
            "system:serviceaccount:kube-system:kairship-clusterpedia"
        );
        demo.ok(&file, &["get", "deployments", "-A"]);
        demo.ok(&file, &["get", "clusters.cluster.karmada.io"]);
        let secrets = demo.kubectl(&file, &["get", "secrets", "-A"]);
        assert!(
            !secrets.status.success()
                && String::from_utf8_lossy(&secrets.stderr).contains("forbidden"),
            "{name}: Clusterpedia's identity must not read Secrets: {secrets:?}"
        );
        // Nothing reports on it yet: the Instance says so.
        eventually(
            Duration::from_secs(30),
            "ClusterpediaSynced Unknown",
            || async {
                condition(demo, name)
                    .filter(|c| c["status"] == "Unknown" && c["reason"] == "Registered")
            },
        )
        .await;
    }
    // What clustersynchro-manager writes when it cannot read an instance (its v0.9.1
    // conditions and words) reaches the Instance.
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "NotReady", "message": "cluster is not ready",
         "lastTransitionTime": "2026-11-24T00:00:00Z"},
        {"type": "SynchroRunning", "status": "False", "reason": "InitialFailed",
         "message": "failed to create dynamic discovery manager: the server has asked for the client to provide credentials",
         "lastTransitionTime": "2026-11-24T00:00:00Z"}]}});
    demo.ok(
        &host,
        &[
            "patch",
            "pediacluster",
            instances[0],
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
    );
    eventually(
        Duration::from_secs(30),
        "ClusterpediaSynced False",
        || async {
            condition(demo, instances[0])
                .filter(|c| c["status"] == "False" && c["reason"] == "NotReady")
        },
    )
    .await;
}

fn condition(demo: &Demo, name: &str) -> Option<Value> {
    let out = demo.kubectl(&host(demo), &["get", "instance", name, "-o", "json"]);
    let i: Value = serde_json::from_slice(&out.stdout).ok()?;
    i["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ClusterpediaSynced")
        .cloned()
}

/// Deleting `gone` removes its PediaCluster and Secret; `kept`'s stay.
pub async fn removed_with_the_instance(demo: &Demo, gone: &str, kept: &str) {
    let host = host(demo);
    demo.ok(&host, &["delete", "instance", gone, "--wait=false"]);
    eventually(
        Duration::from_secs(60),
        "PediaCluster and Secret gone",
        || async {
            let p = demo.kubectl(&host, &["get", "pediacluster", gone]);
            let s = demo.kubectl(
                &host,
                &[
                    "get",
                    "secret",
                    &format!("kairship-{gone}-kubeconfig"),
                    "-n",
                    NS,
                ],
            );
            let absent = |o: &std::process::Output| {
                !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("NotFound")
            };
            (absent(&p) && absent(&s)).then_some(())
        },
    )
    .await;
    demo.ok(&host, &["get", "pediacluster", kept]);
    demo.ok(
        &host,
        &[
            "get",
            "secret",
            &format!("kairship-{kept}-kubeconfig"),
            "-n",
            NS,
        ],
    );
}
