//! kubectl (Debian's `kubernetes-client`, or whatever `KUBECTL` names) against the simulator.

use serde_json::Value;

use crate::common::{kubectl_bin, shared_karmada, Lines, Sim};

fn json(out: &str) -> Value {
    serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("kubectl printed invalid JSON ({e}): {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_version_and_builtin_kinds() {
    let sim = Sim::start(1).await;
    let resources = sim.kubectl("karmada-1", &["api-resources", "--no-headers"]);
    for (name, short) in [
        ("clusters", ""),
        ("propagationpolicies", "pp"),
        ("overridepolicies", "op"),
        ("resourcebindings", "rb"),
        ("deployments", "deploy"),
    ] {
        let line = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from api-resources:\n{resources}"));
        assert!(line.contains(short), "{line}");
    }
    let version = json(&sim.kubectl("karmada-1", &["get", "--raw", "/version"]));
    assert_eq!(version["major"], "1");
    let group = json(&sim.kubectl(
        "karmada-1",
        &["get", "--raw", "/apis/cluster.karmada.io/v1alpha1"],
    ));
    assert_eq!(group["kind"], "APIResourceList");
    assert!(group["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .any(|r| r["name"] == "clusters/status"));

    let clusters = json(&sim.kubectl("karmada-1", &["get", "clusters", "-o", "json"]));
    let items = clusters["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["status"]["conditions"][0]["type"], "Ready");
    assert!(items[0]["status"]["resourceSummary"]["allocatable"]["cpu"].is_string());

    // As in real Karmada: the instance lists its policy and work CRDs, the host the operator's.
    let crds = sim.kubectl("karmada-1", &["get", "crds", "-o", "name"]);
    for crd in [
        "propagationpolicies.policy.karmada.io",
        "resourcebindings.work.karmada.io",
        "works.work.karmada.io",
    ] {
        assert!(crds.contains(crd), "{crd} missing: {crds}");
    }
    assert!(sim
        .kubectl("host", &["get", "crds", "-o", "name"])
        .contains("karmadas.operator.karmada.io"));
    // Human-readable output is a server-side Table with the printer columns.
    let table = sim.kubectl("karmada-1", &["get", "clusters"]);
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.contains("READY") && h.contains("VERSION")),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_selectors_patch_delete() {
    let sim = Sim::start(1).await;
    let k = |args: &[&str]| sim.kubectl("karmada-1", args);
    k(&["create", "configmap", "web", "--from-literal=a=1"]);
    k(&["create", "configmap", "db", "--from-literal=a=2"]);
    k(&["label", "configmap", "web", "tier=frontend"]);
    let dup = sim.kubectl_raw("karmada-1", &["create", "configmap", "web"]);
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));

    let selected = json(&k(&["get", "cm", "-l", "tier=frontend", "-o", "json"]));
    let names: Vec<&str> = selected["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, vec!["web"]);
    let not = json(&k(&[
        "get",
        "cm",
        "-l",
        "tier!=frontend,!missing",
        "-o",
        "json",
    ]));
    assert!(not["items"]
        .as_array()
        .expect("items")
        .iter()
        .all(|i| i["metadata"]["name"] != "web"));
    let by_field = json(&k(&[
        "get",
        "cm",
        "--field-selector",
        "metadata.name=db",
        "-o",
        "json",
    ]));
    assert_eq!(by_field["items"].as_array().map(Vec::len), Some(1));

    k(&[
        "patch",
        "configmap",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    k(&[
        "patch",
        "configmap",
        "web",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/data/a","value":"9"}]"#,
    ]);
    let web = json(&k(&["get", "cm", "web", "-o", "json"]));
    assert_eq!(web["data"], serde_json::json!({"a": "9", "b": "2"}));

    k(&["delete", "configmap", "web"]);
    let gone = sim.kubectl_raw("karmada-1", &["get", "cm", "web"]);
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("not found"),
        "{gone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_added_modified_deleted() {
    let sim = Sim::start(1).await;
    sim.kubectl("karmada-1", &["create", "configmap", "w0"]);
    let mut cmd = std::process::Command::new(kubectl_bin());
    cmd.arg("--kubeconfig")
        .arg(sim.kubeconfig("karmada-1"))
        .args([
            "get",
            "configmaps",
            "-w",
            "--output-watch-events",
            "-o",
            "json",
        ]);
    let mut watch = Lines::spawn(cmd);
    let mut wait_for = |needle: &str| watch.wait_for(needle);
    wait_for("\"w0\"");
    sim.kubectl("karmada-1", &["create", "configmap", "w1"]);
    wait_for("\"w1\"");
    sim.kubectl("karmada-1", &["label", "configmap", "w1", "x=y"]);
    wait_for("\"MODIFIED\"");
    sim.kubectl("karmada-1", &["delete", "configmap", "w1"]);
    wait_for("\"DELETED\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_every_karmada_crd_serves_the_new_kinds() {
    let sim = Sim::start(1).await;
    // The host does not serve policy/work kinds, and the instance not the operator's.
    let crds = std::fs::read_dir(shared_karmada("crds")).expect("crds dir");
    let mut created = 0;
    for entry in crds {
        let path = entry.expect("entry").path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .expect("name")
            .to_string();
        let target = if file.starts_with("operator.") {
            "karmada-1"
        } else {
            "host"
        };
        let doc: Value = {
            let text = std::fs::read_to_string(&path).expect("read crd");
            let kind = text
                .lines()
                .find(|l| l.starts_with("    plural: "))
                .expect("plural")
                .trim()
                .trim_start_matches("plural: ")
                .to_string();
            serde_json::json!({"plural": kind})
        };
        let plural = doc["plural"].as_str().expect("plural");
        let before = sim.kubectl_raw(target, &["get", plural, "-A"]);
        assert!(
            !before.status.success(),
            "{plural} already served on {target}"
        );
        // `create`, not `apply`: the operator CRD is too big for the last-applied annotation.
        sim.kubectl(
            target,
            &["create", "-f", path.to_str().expect("utf-8 path")],
        );
        let after = sim.kubectl(target, &["get", plural, "-A", "-o", "json"]);
        assert_eq!(
            json(&after)["items"],
            serde_json::json!([]),
            "{plural} served empty on {target}"
        );
        created += 1;
    }
    assert_eq!(created, 8, "every CRD file in shared/karmada/crds");
    // The new kinds take objects: a PropagationPolicy on the host now round-trips.
    let pp = shared_karmada("samples/nginx-propagationpolicy.yaml");
    sim.kubectl("host", &["apply", "-f", pp.to_str().expect("path")]);
    let got = json(&sim.kubectl("host", &["get", "pp", "nginx-propagation", "-o", "json"]));
    assert_eq!(
        got["spec"]["placement"]["clusterAffinity"]["clusterNames"],
        serde_json::json!(["member1", "member2"])
    );
    let listed = sim.kubectl(
        "host",
        &[
            "api-resources",
            "--api-group=work.karmada.io",
            "--no-headers",
        ],
    );
    assert_eq!(listed.lines().count(), 3, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_karmada_samples_then_changes_them() {
    let sim = Sim::start(1).await;
    let dir = shared_karmada("samples");
    let apply = |path: &str| sim.kubectl("karmada-1", &["apply", "-f", path]);
    let out = apply(dir.to_str().expect("path"));
    assert_eq!(
        out.lines().filter(|l| l.contains("created")).count(),
        3,
        "{out}"
    );
    assert!(apply(dir.to_str().expect("path"))
        .lines()
        .all(|l| l.contains("unchanged")));

    let deploy = json(&sim.kubectl("karmada-1", &["get", "deployment", "nginx", "-o", "json"]));
    assert_eq!(
        (
            deploy["spec"]["replicas"].as_i64(),
            deploy["metadata"]["generation"].as_i64()
        ),
        (Some(2), Some(1))
    );

    let work = tempfile::tempdir().expect("tempdir");
    let changed = |file: &str, from: &str, to: &str| {
        let original = std::fs::read_to_string(dir.join(file)).expect("sample");
        assert_eq!(
            original.matches(from).count(),
            1,
            "{from:?} must occur once in {file}"
        );
        let text = original.replace(from, to);
        let p = work.path().join(file);
        std::fs::write(&p, text).expect("write");
        p
    };
    let d = changed("nginx-deployment.yaml", "replicas: 2", "replicas: 4");
    let d2 = std::fs::read_to_string(&d)
        .expect("read")
        .replace("image: nginx", "image: nginx:1.27");
    std::fs::write(&d, d2).expect("write");
    let affinity =
        "    clusterAffinity:\n      clusterNames:\n        - member1\n        - member2\n";
    let pp = changed(
        "nginx-propagationpolicy.yaml",
        affinity,
        &format!("{affinity}        - member3\n"),
    );
    assert!(apply(d.to_str().expect("p")).contains("configured"));
    assert!(apply(pp.to_str().expect("p")).contains("configured"));

    let deploy = json(&sim.kubectl("karmada-1", &["get", "deployment", "nginx", "-o", "json"]));
    assert_eq!(deploy["spec"]["replicas"], 4);
    let containers = &deploy["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(1), "{containers}");
    assert_eq!(containers[0]["image"], "nginx:1.27");
    // Decoding defaults, as kube-apiserver fills them: the first image had no tag, so it
    // is pulled every time, and the default stays once set.
    assert_eq!(containers[0]["imagePullPolicy"], "Always");
    assert_eq!(deploy["metadata"]["generation"], 2);
    let pp = json(&sim.kubectl(
        "karmada-1",
        &["get", "pp", "nginx-propagation", "-o", "json"],
    ));
    assert_eq!(
        pp["spec"]["placement"]["clusterAffinity"]["clusterNames"],
        serde_json::json!(["member1", "member2", "member3"])
    );
    let op = json(&sim.kubectl("karmada-1", &["get", "op", "nginx-op", "-o", "json"]));
    assert_eq!(
        op["spec"]["overrideRules"].as_array().map(Vec::len),
        Some(2)
    );
}

/// Karmada's kinds carry Karmada's own schemas: `kubectl explain` describes their fields,
/// an undeclared field is refused by kubectl's strict validation, and the schema's
/// defaults are filled in as a karmada-apiserver fills them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karmada_kinds_are_explained_validated_and_defaulted_by_their_schemas() {
    let sim = Sim::start(1).await;
    let placement = sim.kubectl(
        "karmada-1",
        &["explain", "propagationpolicies.spec.placement"],
    );
    for field in [
        "clusterAffinity",
        "clusterTolerations",
        "replicaScheduling",
        "spreadConstraints",
    ] {
        assert!(
            placement.contains(field),
            "{field} not explained:\n{placement}"
        );
    }
    assert!(placement.contains("DESCRIPTION:"), "{placement}");
    let manifests = sim.kubectl("karmada-1", &["explain", "works.spec.workload.manifests"]);
    assert!(manifests.contains("[]Object"), "{manifests}");
    let taint = sim.kubectl(
        "karmada-1",
        &["explain", "clustertaintpolicies.spec.taints.effect"],
    );
    assert!(taint.contains("the taint effect"), "{taint}");

    let dir = tempfile::tempdir().expect("tempdir");
    let misspelt = dir.path().join("misspelt.yaml");
    std::fs::write(
        &misspelt,
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: misspelt\n  namespace: default\nspec:\n  resourceSelectors:\n    - apiVersion: apps/v1\n      kind: Deployment\n  placment: {}\n",
    )
    .expect("manifest");
    let refused = sim.kubectl_raw(
        "karmada-1",
        &["create", "-f", misspelt.to_str().expect("p")],
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "an undeclared field is refused");
    assert!(err.contains(r#"unknown field "spec.placment""#), "{err}");

    let plain = dir.path().join("plain.yaml");
    std::fs::write(
        &plain,
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: plain\n  namespace: default\nspec:\n  resourceSelectors:\n    - apiVersion: apps/v1\n      kind: Deployment\n  placement:\n    replicaScheduling: {}\n    clusterTolerations:\n      - key: a\n        effect: NoExecute\n",
    )
    .expect("manifest");
    sim.kubectl("karmada-1", &["create", "-f", plain.to_str().expect("p")]);
    let pp = json(&sim.kubectl("karmada-1", &["get", "pp", "plain", "-o", "json"]));
    let spec = &pp["spec"];
    assert_eq!(
        (
            &spec["conflictResolution"],
            &spec["preemption"],
            &spec["priority"],
            &spec["schedulerName"],
            &spec["placement"]["replicaScheduling"]["replicaSchedulingType"],
        ),
        (
            &serde_json::json!("Abort"),
            &serde_json::json!("Never"),
            &serde_json::json!(0),
            &serde_json::json!("default-scheduler"),
            &serde_json::json!("Divided"),
        ),
        "{pp}"
    );
    // Karmada's schema gives tolerations no default; only what the user wrote is kept.
    assert_eq!(
        spec["placement"]["clusterTolerations"],
        serde_json::json!([{"key": "a", "effect": "NoExecute"}])
    );
}
