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
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
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
