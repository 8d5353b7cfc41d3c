//! Where the published crates the descriptors are derived from live on
//! this machine, found through `cargo metadata` as Cargo resolved them
//! for this crate.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The source directories the descriptor set is derived from.
pub struct Sources {
    /// `src/` of `k8s-pb`: the messages, their field numbers and types.
    pub messages: PathBuf,
    /// `src/v1_XX/` of `k8s-openapi` for the Kubernetes version selected
    /// by its feature: the JSON names of the fields.
    pub json_names: PathBuf,
    /// The workspace's `Cargo.lock`, which pins both.
    pub lock_file: PathBuf,
}

pub fn locate() -> Result<Sources, Box<dyn Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // For the platform being built, with the lock file as it is. Not
    // offline: the metadata covers the whole workspace (other members and
    // dev-dependencies too), which a build of one package may not have
    // downloaded yet on a fresh machine.
    let mut command = Command::new(cargo);
    command
        .args(["metadata", "--format-version", "1", "--locked"])
        .arg("--manifest-path")
        .arg(&manifest);
    if let Ok(target) = std::env::var("TARGET") {
        command.args(["--filter-platform", &target]);
    }
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let metadata: Value = serde_json::from_slice(&output.stdout)?;
    let (pb, _) = dependency(&metadata, &manifest, "k8s-pb")?;
    let (openapi, features) = dependency(&metadata, &manifest, "k8s-openapi")?;
    let version = features
        .iter()
        .find(|feature| feature.starts_with("v1_"))
        .ok_or("k8s-openapi has no Kubernetes version feature (v1_XX) enabled")?;
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace_root")?;
    Ok(Sources {
        messages: pb.join("src"),
        json_names: openapi.join("src").join(version),
        lock_file: Path::new(root).join("Cargo.lock"),
    })
}

/// The source directory of a dependency of this crate, and the features
/// Cargo enabled on it.
fn dependency(
    metadata: &Value,
    manifest: &Path,
    name: &str,
) -> Result<(PathBuf, Vec<String>), Box<dyn Error>> {
    let packages = metadata["packages"].as_array().ok_or("no packages")?;
    let this = packages
        .iter()
        .find(|p| p["manifest_path"].as_str().map(Path::new) == Some(manifest))
        .and_then(|p| p["id"].as_str())
        .ok_or("cargo metadata does not list this crate")?;
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .ok_or("no resolve")?;
    let node = |id: &str| nodes.iter().find(|n| n["id"].as_str() == Some(id));
    let id = node(this)
        .and_then(|n| n["deps"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|dep| dep["pkg"].as_str())
        .find(|pkg| {
            packages
                .iter()
                .any(|p| p["id"].as_str() == Some(pkg) && p["name"] == name)
        })
        .ok_or_else(|| format!("this crate does not depend on {name}"))?;
    let package = packages
        .iter()
        .find(|p| p["id"].as_str() == Some(id))
        .ok_or_else(|| format!("{name} is not among the packages"))?;
    let manifest_path = package["manifest_path"]
        .as_str()
        .ok_or_else(|| format!("{name} has no manifest_path"))?;
    let dir = Path::new(manifest_path)
        .parent()
        .ok_or_else(|| format!("{name}'s manifest has no directory"))?;
    let features = node(id)
        .and_then(|n| n["features"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    Ok((dir.to_path_buf(), features))
}
