//! The image `scripts/image/build.sh` writes: what it runs as and carries, that skopeo
//! reads it, that the binary starts from it with nothing but its own files, that it holds
//! none of the test doubles, and that the Containerfile describes the same image.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{image_archive, image_name, repo, run, skip_unless, stdout};

fn built() -> Result<(), String> {
    match image_archive().is_file() {
        true => Ok(()),
        false => Err(format!(
            "{} is missing: run scripts/image/build.sh",
            image_archive().display()
        )),
    }
}

fn inspect() -> Value {
    let out = run(Command::new("python3")
        .arg(repo().join("scripts/image/oci.py"))
        .arg("inspect")
        .arg(image_archive()));
    serde_json::from_str(&stdout(&out)).expect("inspect prints JSON")
}

/// `ENTRYPOINT`, `USER`, `LABEL` keys and values, and the `COPY` destination of the
/// Containerfile's final stage (ARG defaults substituted).
fn containerfile() -> (
    Vec<String>,
    String,
    BTreeMap<String, String>,
    String,
    String,
) {
    let text = std::fs::read_to_string(repo().join("Containerfile")).expect("Containerfile");
    // Continuation lines joined, comments dropped.
    let joined = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let (mut entrypoint, mut user, mut labels, mut copy, mut build) = (
        Vec::new(),
        String::new(),
        BTreeMap::new(),
        String::new(),
        String::new(),
    );
    let mut args = BTreeMap::new();
    for line in joined.lines().map(str::trim) {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "ARG" => {
                if let Some((k, v)) = rest.split_once('=') {
                    args.insert(format!("${{{k}}}"), v.to_string());
                }
            }
            "ENTRYPOINT" => entrypoint = serde_json::from_str(rest).expect("ENTRYPOINT is JSON"),
            "USER" => user = rest.to_string(),
            "RUN" if rest.contains("cargo build") => build = rest.to_string(),
            "COPY" if rest.starts_with("--from=") => {
                copy = rest.rsplit(' ').next().unwrap_or_default().to_string()
            }
            "LABEL" => {
                // key="value" pairs
                let mut rest = rest.trim();
                while let Some((k, after)) = rest.split_once("=\"") {
                    let (v, tail) = after.split_once('"').expect("closing quote");
                    let mut v = v.to_string();
                    for (a, d) in &args {
                        v = v.replace(a, d);
                    }
                    labels.insert(k.trim().to_string(), v);
                    rest = tail.trim();
                }
            }
            _ => {}
        }
    }
    (entrypoint, user, labels, copy, build)
}

#[test]
fn the_image_runs_as_nonroot_with_only_the_production_binary() {
    if skip_unless(built()) {
        return;
    }
    let image = inspect();
    assert_eq!(image["name"], image_name().as_str());
    let config = &image["config"]["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/kairship"])
    );
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://github.com/kairship/kairship"
    );
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap_or_default();
    assert!(
        revision.len() == 40 || revision == "unknown",
        "revision {revision:?}"
    );

    // The binary, the loader and the libraries it needs, users, CA bundle: nothing else.
    let files = image["files"].as_object().expect("files");
    let regular: Vec<&str> = files
        .iter()
        .filter(|(_, f)| f["sha256"].is_string())
        .map(|(p, _)| p.as_str())
        .collect();
    for p in &regular {
        let allowed = *p == "/usr/local/bin/kairship"
            || p.starts_with("/lib/")
            || p.starts_with("/lib64/")
            || [
                "/etc/passwd",
                "/etc/group",
                "/etc/ssl/certs/ca-certificates.crt",
            ]
            .contains(p);
        assert!(allowed, "unexpected file {p} in the image");
    }
    assert!(regular.iter().any(|p| p.contains("libc.so")), "{regular:?}");
    let size: u64 = image["manifest"]["layers"][0]["size"]
        .as_u64()
        .expect("layer size");
    println!(
        "image {}: {:.1} MB compressed (goal: under 30 MB)",
        image_name(),
        size as f64 / 1e6
    );

    // skopeo, a client nobody here wrote, reads the archive.
    let skopeo = Command::new("skopeo")
        .arg("inspect")
        .arg(format!("oci-archive:{}", image_archive().display()))
        .output();
    match skopeo {
        Ok(out) => {
            assert!(
                out.status.success(),
                "skopeo: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_slice(&out.stdout).expect("skopeo prints JSON");
            assert_eq!(
                v["Labels"]["org.opencontainers.image.version"],
                env!("CARGO_PKG_VERSION")
            );
        }
        Err(e) => assert!(!crate::skip_unless(Err(format!("skopeo: {e}"))), "skopeo"),
    }
}

/// The layer unpacked into a directory, as a container runtime would.
fn unpack(dir: &Path) {
    let script = r#"
import gzip, io, json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    idx = json.load(t.extractfile("index.json"))
    blob = lambda d: t.extractfile("blobs/sha256/" + d.split(":", 1)[1]).read()
    m = json.loads(blob(idx["manifests"][0]["digest"]))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(m["layers"][0]["digest"])))) as l:
        l.extractall(sys.argv[2], filter="tar")
"#;
    run(Command::new("python3")
        .args(["-c", script])
        .arg(image_archive())
        .arg(dir));
}

#[test]
fn the_binary_starts_from_the_image_alone_and_carries_no_test_doubles() {
    if skip_unless(built()) {
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    unpack(root.path());
    let binary = root.path().join("usr/local/bin/kairship");
    let bytes = std::fs::read(&binary).expect("binary");
    // Source paths of the simulator, the real-fleet launcher and the chaos harness would
    // be in any panic location compiled in.
    for needle in [
        "sim/src/",
        "realfleet/src/",
        "src/chaos/",
        "kairship_sim",
        "kairship_realfleet",
        // The panic buttons chaos presses: none in a product build.
        "chaos: panic injected",
        "told to crash",
        "told to panic",
    ] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "the production binary contains {needle:?}"
        );
    }
    // With only the image's files (chroot needs root, as the cluster tier does).
    let help = Command::new("chroot")
        .arg(root.path())
        .args(["/usr/local/bin/kairship", "--help"])
        .output();
    match help {
        Ok(out) if out.status.success() => {
            let text = stdout(&out);
            for sub in ["run", "ctl", "crds", "openapi"] {
                assert!(text.contains(&format!("  {sub} ")), "{sub} missing: {text}");
            }
            for sub in ["demo", "sim", "chaos"] {
                assert!(
                    !text.contains(&format!("  {sub} ")),
                    "{sub} in the production binary: {text}"
                );
            }
        }
        Ok(out) => panic!(
            "the image's binary does not start: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => assert!(!skip_unless(Err(format!("chroot: {e}"))), "chroot"),
    }

    // The dependency tree of the production build has none of them either.
    let tree = run(Command::new(env!("CARGO")).current_dir(repo()).args([
        "tree",
        "-p",
        "kairship",
        "--no-default-features",
        "-e",
        "normal",
        "--prefix",
        "none",
        "--locked",
        "--offline",
    ]));
    let tree = stdout(&tree);
    for c in ["kairship-sim", "kairship-realfleet"] {
        assert!(
            !tree.contains(c),
            "{c} is in the production build's dependencies"
        );
    }
}

#[test]
fn the_containerfile_describes_the_same_image() {
    if skip_unless(built()) {
        return;
    }
    let image = inspect();
    let config = &image["config"]["config"];
    let (entrypoint, user, labels, copy, build) = containerfile();
    assert_eq!(serde_json::json!(entrypoint), config["Entrypoint"]);
    assert_eq!(user, config["User"].as_str().unwrap_or_default());
    assert_eq!(
        Some(copy.as_str()),
        entrypoint.first().map(String::as_str),
        "COPY puts the binary at the entrypoint"
    );
    for (k, v) in &labels {
        let built = config["Labels"][k].as_str().unwrap_or_default();
        if k.ends_with(".revision") {
            continue; // a build argument: the commit
        }
        assert_eq!(built, v, "label {k}");
    }
    assert_eq!(
        labels.keys().collect::<Vec<_>>(),
        config["Labels"]
            .as_object()
            .expect("labels")
            .keys()
            .collect::<Vec<_>>()
    );
    let script = std::fs::read_to_string(repo().join("scripts/image/build.sh")).expect("build.sh");
    assert!(
        script.contains(build.trim()),
        "the Containerfile builds with `{build}`, which scripts/image/build.sh does not run"
    );
}
