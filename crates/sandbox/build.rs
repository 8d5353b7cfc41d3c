//! Compiles the Kubernetes protobuf definitions under `proto/` into a
//! descriptor set the API server reads at run time to translate protobuf
//! bodies of built-in kinds to and from JSON.

use std::path::PathBuf;

const FILES: &[&str] = &[
    "k8s.io/api/core/v1/generated.proto",
    "k8s.io/api/events/v1/generated.proto",
    "k8s.io/api/policy/v1/generated.proto",
    "k8s.io/api/coordination/v1/generated.proto",
    "k8s.io/api/rbac/v1/generated.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::Compiler::new(["proto"])?
        .include_imports(true)
        .open_files(FILES)?
        .encode_file_descriptor_set();
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("kubernetes.descriptors");
    std::fs::write(out, descriptors)?;
    Ok(())
}
