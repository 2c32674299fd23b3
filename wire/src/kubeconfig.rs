//! Kubeconfig files (written as JSON, which every kubeconfig reader accepts as YAML).

use std::path::Path;

use base64::Engine;
use serde_json::{json, Value};

/// A kubeconfig with one cluster, one user with a bearer token, and one context.
pub fn build(name: &str, server: &str, ca_pem: &str, token: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    })
}

/// Writes a file atomically (temp file, then rename), so readers never see half of it.
/// Writes `contents` to `path` through a temporary file, readable by its owner only:
/// kubeconfigs and endpoints files carry bearer tokens.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    // A leftover keeps its mode through a truncating open: start from none.
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(contents)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

pub fn write(path: &Path, config: &Value) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(config).map_err(std::io::Error::other)?;
    write_atomic(path, &text)
}
