//! The OpenAPI documents compared as clients use them: `kubectl explain` on built-in and
//! custom kinds, `kubectl create` validating on the server without `--validate=false`,
//! the v3 index, and the operations and schemas kubectl looks up.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::get;

/// `kubectl` against a kubeconfig, with its own discovery cache: stdout, or stderr on
/// failure (prefixed so a success never equals a failure).
pub(super) fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let out = Command::new(crate::common::kubectl_bin())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl runs");
    match out.status.success() {
        true => String::from_utf8_lossy(&out.stdout).into_owned(),
        false => format!("FAILED: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// The operation of one path and method, as kubectl looks it up: its group-version-kind,
/// action and query parameters.
fn operation(doc: &Value, path: &str, method: &str) -> Value {
    let op = &doc["paths"][path][method];
    let mut params: Vec<String> = op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(String::from))
        .collect();
    params.sort();
    serde_json::json!({
        "gvk": op["x-kubernetes-group-version-kind"], "action": op["x-kubernetes-action"],
        "query": params,
    })
}

pub async fn compared(
    real: &kube::Client,
    sim: &kube::Client,
    real_kubeconfig: &Path,
    sim_kubeconfig: &Path,
    scratch: &Path,
) -> Vec<String> {
    let mut differences = Vec::new();
    let (real_cache, sim_cache) = (scratch.join("real-cache"), scratch.join("sim-cache"));
    for target in [
        "deployment",
        "deployment.spec",
        "deployment.spec.template.spec.containers",
        "configmap",
        "service.spec.ports",
        "pods.spec.volumes",
        "clusterrolebinding.subjects",
        "lease.spec",
        "widgets",
        "widgets.spec",
        "widgets.spec.parts",
    ] {
        let a = kubectl(real_kubeconfig, &real_cache, &["explain", target]);
        assert!(
            !a.starts_with("FAILED"),
            "kube-apiserver: explain {target}: {a}"
        );
        let b = kubectl(sim_kubeconfig, &sim_cache, &["explain", target]);
        if a != b {
            differences.push(format!(
                "kubectl explain {target}:\nreal:\n{a}\nsimulator:\n{b}"
            ));
        }
    }
    // Server-side validation, as kubectl create asks for it after reading the documents.
    let manifests = scratch.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifests dir");
    for (name, body) in [
        (
            "valid",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"explained"},"data":{"a":"1"}}"#,
        ),
        (
            "unknown",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"unexplained"},"data":{"a":"1"},"spec":{"foo":"bar"}}"#,
        ),
        (
            "widget",
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"created"},"spec":{"size":3,"shape":"round"}}"#,
        ),
    ] {
        let file = manifests.join(format!("{name}.json"));
        std::fs::write(&file, body).expect("manifest");
        let f = file.to_string_lossy();
        let a = kubectl(real_kubeconfig, &real_cache, &["create", "-f", &f]);
        // Manifests with an undeclared field are refused (validated on the server).
        assert_eq!(
            a.starts_with("FAILED"),
            name != "valid",
            "kube-apiserver: {name}: {a}"
        );
        let b = kubectl(sim_kubeconfig, &sim_cache, &["create", "-f", &f]);
        if a != b {
            differences.push(format!(
                "kubectl create -f {name}: real {a:?}, simulator {b:?}"
            ));
        }
    }
    // kubectl's typed `create` subcommands, which send protobuf (kubectl 1.33 and later).
    for args in [
        &["create", "configmap", "typed", "--from-literal=a=1"][..],
        &["create", "secret", "generic", "typed", "--from-literal=a=1"],
        &[
            "create",
            "deployment",
            "typed",
            "--image=nginx:1.25",
            "--port=80",
            "--replicas=0",
        ],
        &["create", "service", "nodeport", "typed", "--tcp=80:8080"],
        &[
            "create",
            "job",
            "typed",
            "--image=busybox",
            "--",
            "echo",
            "hi",
        ],
        &[
            "create",
            "clusterrolebinding",
            "typed",
            "--clusterrole=view",
            "--user=alice",
        ],
    ] {
        let mut args = args.to_vec();
        // Output flags before `--`, which starts a Job's command.
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        args.splice(at..at, ["-o", "json", "--show-managed-fields"]);
        let shown = |out: String| -> Value {
            match serde_json::from_str::<Value>(&out) {
                Ok(mut v) => {
                    // Allocated and generated values differ by nature.
                    if let Some(ports) = v.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
                    {
                        for p in ports.iter_mut().filter(|p| p.get("nodePort").is_some()) {
                            p["nodePort"] = "<allocated>".into();
                        }
                    }
                    // A Job's generated selector and labels carry its uid.
                    for labels in [
                        "/spec/selector/matchLabels",
                        "/metadata/labels",
                        "/spec/template/metadata/labels",
                    ] {
                        for key in ["batch.kubernetes.io/controller-uid", "controller-uid"] {
                            if let Some(x) = v.pointer_mut(labels).and_then(|l| l.get_mut(key)) {
                                *x = "<uid>".into();
                            }
                        }
                    }
                    super::writes::normalized(&v)
                }
                Err(_) => Value::String(out),
            }
        };
        let a = shown(kubectl(real_kubeconfig, &real_cache, &args));
        assert!(
            a["kind"].is_string(),
            "kube-apiserver: kubectl {args:?}: {a}"
        );
        let b = shown(kubectl(sim_kubeconfig, &sim_cache, &args));
        if a != b {
            differences.push(format!("kubectl {args:?}: real {a}, simulator {b}"));
        }
    }
    // Every group-version of a built-in kind the simulator publishes, the real server
    // publishes too (the simulated host also serves Karmada's and Kairship's CRDs).
    let index = |body: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(body).unwrap_or_default();
        v["paths"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    };
    let (ra, sb) = (
        get(real, "/openapi/v3").await,
        get(sim, "/openapi/v3").await,
    );
    let real_index = index(&ra.1);
    for gv in index(&sb.1)
        .into_iter()
        .filter(|gv| !gv.contains("karmada") && !gv.contains("kairship"))
    {
        if !real_index.contains(&gv) {
            differences.push(format!(
                "/openapi/v3 lists {gv}, which kube-apiserver does not"
            ));
        }
    }
    // The operations kubectl looks up, and a CRD's published schema, in both versions.
    let doc = |body: &str| -> Value { serde_json::from_str(body).unwrap_or_default() };
    for (gv, path, method) in [
        (
            "apis/apps/v1",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
            "patch",
        ),
        (
            "apis/apps/v1",
            "/apis/apps/v1/namespaces/{namespace}/deployments",
            "post",
        ),
        (
            "apis/apps/v1",
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale",
            "put",
        ),
        (
            "api/v1",
            "/api/v1/namespaces/{namespace}/configmaps/{name}",
            "put",
        ),
        (
            "apis/example.com/v1",
            "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status",
            "patch",
        ),
    ] {
        let uri = format!("/openapi/v3/{gv}");
        let (a, b) = (doc(&get(real, &uri).await.1), doc(&get(sim, &uri).await.1));
        let (oa, ob) = (operation(&a, path, method), operation(&b, path, method));
        assert!(
            oa["action"].is_string(),
            "kube-apiserver has no {method} {path}"
        );
        if oa != ob {
            differences.push(format!("{method} {path}: real {oa}, simulator {ob}"));
        }
    }
    // Every enum of a built-in field both publish (recorded by scripts/openapi-enums.py).
    for gv in [
        "api/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/rbac.authorization.k8s.io/v1",
    ] {
        let uri = format!("/openapi/v3/{gv}");
        let (a, b) = (doc(&get(real, &uri).await.1), doc(&get(sim, &uri).await.1));
        let enums = |d: &Value, name: &str| -> Vec<(String, Value)> {
            d["components"]["schemas"][name]["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(f, p)| (f.clone(), p.get("items").unwrap_or(p)["enum"].clone()))
                .filter(|(_, e)| !e.is_null())
                .collect()
        };
        for name in b["components"]["schemas"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(n, _)| n)
        {
            if a["components"]["schemas"].get(name).is_some() && enums(&a, name) != enums(&b, name)
            {
                differences.push(format!(
                    "{name} enums: real {:?}, simulator {:?} (run scripts/openapi-enums.py)",
                    enums(&a, name),
                    enums(&b, name)
                ));
            }
        }
    }
    let v3 = |d: &Value| d["components"]["schemas"]["com.example.v1.Widget"].clone();
    let (a, b) = (
        doc(&get(real, "/openapi/v3/apis/example.com/v1").await.1),
        doc(&get(sim, "/openapi/v3/apis/example.com/v1").await.1),
    );
    assert!(
        v3(&a).is_object(),
        "kube-apiserver publishes the Widget schema (v3)"
    );
    if v3(&a) != v3(&b) {
        differences.push(format!(
            "v3 Widget schema: real {}, simulator {}",
            v3(&a),
            v3(&b)
        ));
    }
    let v2 = |d: &Value| d["definitions"]["com.example.v1.Widget"].clone();
    let (a, b) = (
        doc(&get(real, "/openapi/v2").await.1),
        doc(&get(sim, "/openapi/v2").await.1),
    );
    assert!(
        v2(&a).is_object(),
        "kube-apiserver publishes the Widget schema (v2)"
    );
    if v2(&a) != v2(&b) {
        differences.push(format!(
            "v2 Widget schema: real {}, simulator {}",
            v2(&a),
            v2(&b)
        ));
    }
    differences
}
