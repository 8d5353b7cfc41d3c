//! `tusk validate`: the API server's admission checks, run locally.
//!
//! Prints one line per violation, `FILE: Kind/name: field: message`, and
//! exits 1 when there is any; with `--old`, transition rules (storage never
//! shrinks, version changes need approval, immutable fields) compare each
//! object with its earlier version.

use std::path::PathBuf;
use std::process::ExitCode;

use super::CommandError;
use crate::manifests::{self, Manifest};

#[derive(clap::Args)]
pub struct Args {
    /// Manifest files to check (YAML, several documents allowed).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,

    /// The objects as they are now, to check the files as updates of them.
    #[arg(long)]
    pub old: Option<PathBuf>,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let crds = tusk_api::crds();
    let old = match &args.old {
        Some(path) => manifests::read(path)?,
        None => Vec::new(),
    };
    let mut refused = false;
    for path in &args.files {
        let file = path.display();
        let documents = manifests::read(path)?;
        if documents.is_empty() {
            println!("{file}: no manifests found");
            refused = true;
        }
        for manifest in &documents {
            let previous = old.iter().find(|o| o.same_object(manifest));
            let violations = tusk_api::admission::validate(
                &crds,
                &manifest.value,
                previous.map(|p: &Manifest| &p.value),
            );
            let object = manifest.describe();
            if violations.is_empty() {
                let how = if previous.is_some() {
                    "valid update"
                } else {
                    "valid"
                };
                println!("{file}: {object}: {how}");
            }
            for violation in violations {
                refused = true;
                println!("{file}: {object}: {violation}");
            }
        }
    }
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
