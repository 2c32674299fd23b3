//! Compiles the API in `proto/` with protox (pure Rust), so a fresh machine needs no
//! system `protoc`. The encoded descriptor set keeps the `google.api.http` options (protox
//! encodes it itself; prost-types would drop extensions) for reflection and REST.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "kairship/v1alpha1/common.proto",
    "kairship/v1alpha1/instance.proto",
    "kairship/v1alpha1/cluster.proto",
    "kairship/v1alpha1/workload.proto",
    "kairship/v1alpha1/policy.proto",
    "kairship/v1alpha1/supervisor.proto",
    "kairship/v1alpha1/access.proto",
    "kairship/v1alpha1/search.proto",
    "kairship/v1alpha1/rollout.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    embed_console(&out)?;
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true);
    compiler.open_files(PROTOS)?;
    std::fs::write(
        out.join("kairship_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}

/// Writes `console_assets.rs`: every file of the committed console build (`ui/dist`) as
/// `(path, include_bytes!)`, so the binary serves the console without Node at build time.
fn embed_console(out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = std::fs::canonicalize("ui/dist")?;
    println!("cargo:rerun-if-changed=ui/dist");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                println!("cargo:rerun-if-changed={}", path.display());
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut code = String::from("&[\n");
    for path in files {
        let rel = path
            .strip_prefix(&root)?
            .to_string_lossy()
            .replace('\\', "/");
        code.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    code.push_str("]\n");
    std::fs::write(out.join("console_assets.rs"), code)?;
    Ok(())
}
