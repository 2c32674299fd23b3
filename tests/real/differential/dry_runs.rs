//! Dry runs on every verb, reviews and protobuf request bodies, as everyday clients send
//! them: `kubectl` with `--dry-run=server` on create, apply, replace, patch, delete and
//! delete by label (each followed by a read showing nothing changed), `kubectl auth can-i`
//! and `auth whoami` (protobuf reviews), and a delete whose DeleteOptions come as protobuf
//! (as Helm's typed client sends them). The answers of both servers are compared.

use std::path::Path;

use serde_json::Value;

use super::openapi::kubectl;
use super::writes::normalized;

/// The same kubectl run against both servers; their answers (JSON ones normalized).
fn both(real: (&Path, &Path), sim: (&Path, &Path), args: &[&str]) -> (String, String) {
    let shown = |out: String| match serde_json::from_str::<Value>(&out) {
        Ok(v) => normalized(&v).to_string(),
        Err(_) => out,
    };
    (
        shown(kubectl(real.0, real.1, args)),
        shown(kubectl(sim.0, sim.1, args)),
    )
}

/// A protobuf body: `k8s\0` and a `runtime.Unknown` holding `raw` as `kind` of `api_version`.
fn protobuf(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    fn field(n: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![n << 3 | 2];
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
        out
    }
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    let unknown = [field(1, &type_meta), field(2, raw)].concat();
    [b"k8s\0".as_slice(), &unknown].concat()
}

/// Differences between kube-apiserver and the simulator.
pub async fn compared(
    real: &kube::Client,
    sim: &kube::Client,
    real_kubeconfig: &Path,
    sim_kubeconfig: &Path,
    dir: &Path,
) -> Vec<String> {
    let (real_cache, sim_cache) = (dir.join("dry-real-cache"), dir.join("dry-sim-cache"));
    let (r, s) = (
        (real_kubeconfig, real_cache.as_path()),
        (sim_kubeconfig, sim_cache.as_path()),
    );
    let manifest = |name: &str, value: &str| {
        let path = dir.join(format!("{name}-{value}.yaml"));
        let text = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default, labels: {{dry: \"yes\"}}}}\ndata: {{a: \"{value}\"}}\n"
        );
        std::fs::write(&path, text).expect("write a manifest");
        path.display().to_string()
    };
    let (kept1, kept2) = (manifest("kept", "1"), manifest("kept", "2"));
    let fresh = manifest("fresh", "1");
    let mut differences = Vec::new();
    let mut compare = |what: &str, args: &[&str]| {
        let (a, b) = tokio::task::block_in_place(|| both(r, s, args));
        if a != b {
            differences.push(format!("{what}: real {a}, simulator {b}"));
        }
        a
    };
    let get_kept = ["get", "configmap", "kept", "-n", "default", "-o", "json"];
    let created = compare("create", &["create", "-f", &kept1]);
    assert!(!created.starts_with("FAILED"), "kube-apiserver: {created}");
    let steps: [(&str, Vec<&str>); 8] = [
        (
            "dry create",
            vec!["create", "-f", &fresh, "--dry-run=server", "-o", "json"],
        ),
        (
            "dry apply",
            vec!["apply", "-f", &kept2, "--dry-run=server", "-o", "json"],
        ),
        (
            "dry replace",
            vec!["replace", "-f", &kept2, "--dry-run=server", "-o", "json"],
        ),
        (
            "dry patch",
            vec![
                "patch",
                "configmap",
                "kept",
                "-n",
                "default",
                "--type=merge",
                "-p",
                r#"{"data":{"a":"3"}}"#,
                "--dry-run=server",
                "-o",
                "json",
            ],
        ),
        (
            "dry server-side apply",
            vec![
                "apply",
                "--server-side",
                "-f",
                &kept2,
                "--dry-run=server",
                "-o",
                "json",
            ],
        ),
        (
            "dry delete",
            vec![
                "delete",
                "configmap",
                "kept",
                "-n",
                "default",
                "--dry-run=server",
            ],
        ),
        (
            "dry delete by label",
            vec![
                "delete",
                "configmaps",
                "-n",
                "default",
                "-l",
                "dry=yes",
                "--dry-run=server",
            ],
        ),
        (
            "can-i (a protobuf review)",
            vec!["auth", "can-i", "create", "configmaps", "-n", "default"],
        ),
    ];
    for (what, args) in steps {
        compare(what, &args);
        // Nothing a dry run did is stored.
        let after = compare(&format!("after {what}"), &get_kept);
        assert!(
            after.contains(r#""a":"1""#),
            "kube-apiserver after {what}: {after}"
        );
    }
    let fresh_left = compare(
        "no object from a dry create",
        &["get", "configmap", "fresh", "-n", "default"],
    );
    assert!(fresh_left.starts_with("FAILED"), "{fresh_left}");
    // Who the caller is: the user and groups (the uid is how each names its admin).
    let whoami = |kubeconfig: &Path, cache: &Path| {
        let out = kubectl(kubeconfig, cache, &["auth", "whoami", "-o", "json"]);
        let v: Value = serde_json::from_str(&out).unwrap_or(Value::String(out));
        let u = &v["status"]["userInfo"];
        (
            v["kind"].clone(),
            u["username"].clone(),
            u["groups"].clone(),
        )
    };
    let (a, b) = tokio::task::block_in_place(|| (whoami(r.0, r.1), whoami(s.0, s.1)));
    assert_eq!(a.0, "SelfSubjectReview", "kube-apiserver: {a:?}");
    if a != b {
        differences.push(format!("whoami: real {a:?}, simulator {b:?}"));
    }
    // A delete whose DeleteOptions are protobuf, dry run in them: answered, nothing deleted.
    let options = protobuf("v1", "DeleteOptions", &[5 << 3 | 2, 3, b'A', b'l', b'l']);
    for (name, c) in [("real", real), ("simulator", sim)] {
        let req = http::Request::delete("/api/v1/namespaces/default/configmaps/kept")
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .header("accept", "application/json")
            .body(options.clone())
            .expect("request");
        let (code, _, body) = super::request(c, req).await;
        let (after, _) = super::get(c, "/api/v1/namespaces/default/configmaps/kept").await;
        if (code, after) != (200, 200) {
            differences.push(format!(
                "protobuf DeleteOptions on the {name} server: {code} {body}, then GET {after}"
            ));
        }
    }
    differences
}
