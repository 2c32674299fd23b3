//! A check on the crate's layout: no two modules import each other, directly or around a
//! circle, so each file can be read after the ones it uses. A module may use its ancestors
//! (`super::`): that is Rust's nesting, not a circle.
//!
//! The reading is textual: `crate::` and `super::` paths in code (comments skipped),
//! brace groups expanded, each path resolved to the longest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`api::proxy`) -> its source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let Ok(rel) = path.strip_prefix(src) else {
                continue;
            };
            let mut segs: Vec<String> = rel
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if segs.last().map(String::as_str) == Some("mod") {
                segs.pop();
            }
            if segs == ["lib"] || segs == ["main"] || segs.is_empty() {
                continue;
            }
            out.insert(segs.join("::"), path);
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands the path starting at `text` (after its `crate::`/`super::` prefix was taken)
/// into full paths under `base`: `a::b::{c, d::{e, f}}` gives `a::b::c`, `a::b::d::e`, ...
fn expand(base: &str, text: &str, out: &mut Vec<String>) {
    let mut path = base.to_string();
    let mut rest = text;
    loop {
        let ident: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() {
            if let Some(group) = rest.strip_prefix('{') {
                for item in split_group(group) {
                    expand(&path, item.trim(), out);
                }
                return;
            }
            break;
        }
        if ident != "self" {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(&ident);
        }
        rest = &rest[ident.len()..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

/// The top-level comma-separated items of a brace group, up to its closing brace.
fn split_group(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0usize, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// Every module path `source` names, resolved against `module` for `super::`.
fn named_paths(module: &str, source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < code.len() {
        let starts_word = i == 0 || !is_ident(bytes[i - 1] as char);
        if starts_word && code[i..].starts_with("crate::") {
            expand("", &code[i + 7..], &mut out);
            i += 7;
        } else if starts_word && code[i..].starts_with("super::") {
            // `super` is the parent module, for `a/b.rs` and `a/b/mod.rs` alike.
            let mut segs: Vec<&str> = module.split("::").collect();
            segs.pop();
            let mut rest = &code[i..];
            while let Some(r) = rest.strip_prefix("super::") {
                rest = r;
            }
            let ups = (code[i..].len() - rest.len()) / 7;
            for _ in 1..ups {
                segs.pop();
            }
            expand(&segs.join("::"), rest, &mut out);
            i += 7 * ups;
        } else {
            i += code[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

fn resolve<'a>(path: &str, modules: &'a BTreeMap<String, PathBuf>) -> Option<&'a str> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .find_map(|n| modules.get_key_value(&segs[..n].join("::")))
        .map(|(k, _)| k.as_str())
}

/// Module -> the modules it uses (ancestors left out).
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let source = std::fs::read_to_string(file).unwrap_or_default();
        let deps: BTreeSet<String> = named_paths(module, &source)
            .iter()
            .filter_map(|p| resolve(p, &modules))
            .filter(|d| *d != module && !module.starts_with(&format!("{d}::")))
            .map(str::to_string)
            .collect();
        graph.insert(module.clone(), deps);
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                match self.index.get(w).copied() {
                    None => {
                        self.visit(w);
                        let low = self.index[w].1.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some((wi, _)) if self.stack.contains(&w) => {
                        let low = wi.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some(_) => {}
                }
            }
            let (vi, vl) = self.index[v];
            if vi == vl {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn paths_expand_and_resolve_as_rust_reads_them() {
    let mut out = Vec::new();
    expand("", "a::b::{c, d::{e, self}, f as g};", &mut out);
    assert_eq!(out, ["a::b::c", "a::b::d::e", "a::b::d", "a::b::f"]);
    let found = named_paths(
        "api::grpc::search",
        "use super::super::context::X; // crate::not::this\nuse crate::auth::{oidc, webhook::Y};",
    );
    assert_eq!(found, ["api::context::X", "auth::oidc", "auth::webhook::Y"]);
}

#[test]
fn the_check_finds_a_circle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&g), [["a", "b", "c"]]);
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    assert!(graph.contains_key("api::proxy") && graph.len() > 50);
    assert!(
        graph["api::proxy"].iter().any(|d| d.starts_with("api::")),
        "the reading sees the proxy's imports"
    );
    let found = circles(&graph);
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            c.iter()
                .map(|m| {
                    let uses: Vec<&str> = graph[m]
                        .iter()
                        .filter(|d| c.contains(d))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", uses.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect();
    assert!(found.is_empty(), "modules in a circle: {described:#?}");
}

/// The graph with every module folded into its top-level folder (`api::proxy` -> `api`).
fn folders(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut folded: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, deps) in graph {
        let uses = folded.entry(top(module)).or_default();
        uses.extend(deps.iter().map(|d| top(d)).filter(|d| *d != top(module)));
    }
    folded
}

#[test]
fn top_level_folders_depend_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph(&src);
    let folded = folders(&graph);
    assert!(
        folded["actors"].contains("controllers"),
        "the reading sees folders"
    );
    let found = circles(&folded);
    // Name the module imports that close each circle, so the fix is plain.
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            let mut edges = Vec::new();
            for (module, deps) in &graph {
                let from = module.split("::").next().unwrap_or_default();
                for dep in deps {
                    let to = dep.split("::").next().unwrap_or_default();
                    if from != to && c.iter().any(|f| f == from) && c.iter().any(|f| f == to) {
                        edges.push(format!("{module} -> {dep}"));
                    }
                }
            }
            format!("{}: {}", c.join(", "), edges.join("; "))
        })
        .collect();
    assert!(found.is_empty(), "folders in a circle: {described:#?}");
}
