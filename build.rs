//! Compiles the API in `proto/` with protox (pure Rust), so a fresh machine needs no
//! system `protoc`. The encoded descriptor set is kept for server reflection and for
//! the REST mapping read from `google.api.http` annotations.

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
    let fds = protox::compile(PROTOS, ["proto"])?;
    std::fs::write(
        out.join("kairship_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
