//! Kubeconfig files (written as JSON, which every kubeconfig reader accepts as YAML).

use std::path::Path;

use base64::Engine;
use serde_json::{json, Value};

/// A kubeconfig with one cluster, one user with a bearer token, and one context.
pub fn build(name: &str, server: &str, ca_pem: &str, token: &str) -> Value {
    build_with(name, server, Some(ca_pem), Some(token))
}

/// As [`build`], the CA (else the system's roots) and the token (else no credentials)
/// each optional.
pub fn build_with(name: &str, server: &str, ca_pem: Option<&str>, token: Option<&str>) -> Value {
    let mut cluster = json!({"server": server});
    if let Some(ca) = ca_pem {
        cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    let user = match token {
        Some(t) => json!({"token": t}),
        None => json!({}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    })
}

/// `kc` (one cluster, from [`build`]) asking for `server_name` in TLS (SNI and the
/// certificate's name) instead of the server address's host.
pub fn with_tls_server_name(mut kc: Value, server_name: &str) -> Value {
    if let Some(cluster) = kc
        .pointer_mut("/clusters/0/cluster")
        .and_then(Value::as_object_mut)
    {
        cluster.insert("tls-server-name".into(), server_name.into());
    }
    kc
}

/// Writes a file atomically (temp file, then rename), so readers never see half of it.
/// Writes `contents` to `path` through a temporary file, readable by its owner only:
/// kubeconfigs and endpoints files carry bearer tokens.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    // A name of its own per writer (created 0600): two writers of one file must not
    // rename each other's temporary file away.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut f = tempfile::Builder::new()
        .prefix(".kairship-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    f.write_all(contents)?;
    f.persist(path).map_err(|e| e.error)?;
    Ok(())
}

pub fn write(path: &Path, config: &Value) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(config).map_err(std::io::Error::other)?;
    write_atomic(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_of_one_file_all_succeed_and_leave_it_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.kubeconfig");
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|_| write_atomic(&path, format!("writer {i}").as_bytes()))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        for w in writers {
            w.join().expect("writer").expect("every write succeeds");
        }
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("writer "), "{text}");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary file left behind: {left:?}");
    }
}
