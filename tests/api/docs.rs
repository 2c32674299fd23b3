//! The README and docs/ name files that exist: every repository path they quote (in
//! backticks or as a link) is there, so a moved file cannot leave a stale pointer behind.
//! And the README stays a README: at most 400 lines.

use std::path::Path;

/// Top-level folders whose paths the docs quote.
const ROOTS: &[&str] = &[
    "src/",
    "tests/",
    "deploy/",
    "scripts/",
    "docs/",
    "ui/",
    "wire/",
    "sim/",
    "benches/",
    "proto/",
    "realfleet/",
    "test-support/",
    "chaos/",
    "heap/",
    "fuzz/",
];

/// The repository paths quoted in `text`: backticked spans and link targets that start
/// with one of `ROOTS`, up to the first character a path does not hold.
fn quoted_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let candidates = text
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .chain(
            text.split("](")
                .skip(1)
                .filter_map(|s| s.split(')').next().map(str::to_string)),
        );
    for c in candidates {
        let c = c.trim_start_matches("../").trim_start_matches("./");
        if !ROOTS.iter().any(|r| c.starts_with(r)) {
            continue;
        }
        let path: String = c
            .chars()
            .take_while(|ch| ch.is_ascii_alphanumeric() || "/._-".contains(*ch))
            .collect();
        // Globs and placeholders (`karmada-es-*`, `<name>`) are not paths.
        if c[path.len()..].starts_with(['*', '<', '{']) {
            continue;
        }
        let path = path.trim_end_matches(['.', ',']).to_string();
        if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let p = entry.expect("entry").path();
        if p.extension().is_some_and(|e| e == "md") {
            docs.push(p);
        }
    }
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("doc");
        for path in quoted_paths(&text) {
            if !root.join(&path).exists() {
                missing.push(format!("{}: {path}", doc.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist:\n{}",
        missing.join("\n")
    );
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let n = readme.lines().count();
    assert!(
        n <= 400,
        "the README has {n} lines; its details belong in docs/"
    );
}

#[test]
fn quoted_paths_are_found() {
    let text = "see `src/api/chain/` and [the guide](docs/security.md#roles), not `karmada-es-*` or `src/<x>`";
    assert_eq!(quoted_paths(text), ["src/api/chain/", "docs/security.md"]);
}
