//! `tusk install`: the operator's installation as YAML, generated from the
//! Rust builders (crates/operator/src/install) and the CRD types. It is the
//! source of `deploy/install.yaml` and of the kustomize base in
//! `deploy/kustomize/` and of the Helm chart in `deploy/helm/tusk/`
//! (`helm`), which tests keep in line.

mod helm;
mod parts;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::CommandError;
use crate::output::out;
use parts::{HEADER, Part};

#[derive(clap::Args)]
#[group(required = true, multiple = true)]
pub struct Args {
    /// Print the whole installation (deploy/install.yaml) to standard output.
    #[arg(long)]
    pub print: bool,
    /// Write the kustomize base (one file per part and kustomization.yaml)
    /// into this directory.
    #[arg(long)]
    pub kustomize_dir: Option<PathBuf>,
    /// Write the Helm chart (Chart.yaml, values.yaml, crds/, templates/)
    /// into this directory.
    #[arg(long)]
    pub helm_dir: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let parts = parts::parts()?;
    if args.print {
        out!("{}", install_yaml(&parts))?;
    }
    if let Some(dir) = &args.kustomize_dir {
        write_kustomize(dir, &parts)?;
    }
    if let Some(dir) = &args.helm_dir {
        helm::write_chart(dir, &parts)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn install_yaml(parts: &[Part]) -> String {
    let documents: Vec<&str> = parts
        .iter()
        .flat_map(|p| p.documents.iter().map(String::as_str))
        .collect();
    format!("{HEADER}{}", documents.join("---\n"))
}

fn write_kustomize(dir: &Path, parts: &[Part]) -> Result<(), CommandError> {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| CommandError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    let mut resources = String::new();
    for part in parts {
        write(
            part.file,
            format!("{HEADER}{}", part.documents.join("---\n")),
        )?;
        resources.push_str(&format!("- {}\n", part.file));
    }
    write(
        "kustomization.yaml",
        format!(
            "{HEADER}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{resources}"
        ),
    )
}
