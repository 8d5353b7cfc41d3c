//! Derives the descriptor set of the Kubernetes protobuf messages the API
//! server reads and writes (`application/vnd.kubernetes.protobuf` bodies
//! of built-in kinds) from two published crates, so no `.proto` file is
//! kept here:
//!
//! - `k8s-pb` (kube-rs' prost bindings of Kubernetes' `generated.proto`
//!   files): every message, its fields' numbers, labels and types;
//! - `k8s-openapi` (already the crate's model of Kubernetes objects, at
//!   the same Kubernetes version): the JSON spelling of each field, which
//!   Kubernetes also uses as the proto field name.
//!
//! Field for field (name, number, label, type, map entries) the result is
//! the set `protoc` compiles from the `generated.proto` files of
//! Kubernetes 1.33; it leaves out imports no field uses. Two field names
//! neither crate spells are listed in [`json_names`]. It is written to
//! `$OUT_DIR/kubernetes.descriptors` and read by `src/apiserver/protobuf`,
//! whose tests check the messages and fields it relies on.

mod descriptors;
mod json_names;
mod messages;
mod sources;

use std::error::Error;
use std::path::PathBuf;

use prost::Message as _;

/// The packages served in protobuf; the packages their messages use
/// (`meta/v1`, `runtime`, `resource`, `intstr`) come along.
const PACKAGES: &[&str] = &[
    "k8s.io.api.core.v1",
    "k8s.io.api.events.v1",
    "k8s.io.api.policy.v1",
    "k8s.io.api.coordination.v1",
    "k8s.io.api.rbac.v1",
];

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=build");
    let sources = sources::locate()?;
    println!("cargo:rerun-if-changed={}", sources.lock_file.display());
    let names = json_names::read(&sources.json_names)?;
    let messages = messages::read(&sources.messages, PACKAGES)?;
    let set = descriptors::build(&messages, &names);
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("kubernetes.descriptors");
    std::fs::write(out, set.encode_to_vec())?;
    Ok(())
}
