//! `tusk validate`: the API server's admission checks, run locally, then
//! the controller's own for a PostgresCluster the API server would accept:
//! what admission cannot judge (a parameter's value under the rules of the
//! declared major, which its table of settings decides) the controller
//! refuses with an `InvalidSpec` condition, and `tusk validate` says so
//! before the cluster is applied.
//!
//! Prints one line per violation, `FILE: Kind/name: field: message`, and
//! exits 1 when there is any; with `--old`, transition rules (storage never
//! shrinks, version changes need approval, immutable fields) compare each
//! object with its earlier version.

use std::path::PathBuf;
use std::process::ExitCode;

use tusk_api::admission::Violation;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_operator::config::OperatorConfig;

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
            let mut violations = tusk_api::admission::validate(
                &crds,
                &manifest.value,
                previous.map(|p: &Manifest| &p.value),
            );
            if violations.is_empty() {
                violations.extend(controller_refusal(&manifest.value));
            }
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

/// What the controller refuses in a PostgresCluster that admission
/// accepts, as the `InvalidSpec` condition would say it. The identity the
/// API server gives an object (namespace, uid) is filled in when the file
/// leaves it out.
fn controller_refusal(value: &serde_json::Value) -> Option<Violation> {
    if value.get("kind").and_then(serde_json::Value::as_str) != Some("PostgresCluster") {
        return None;
    }
    let mut cluster: PostgresCluster = serde_json::from_value(value.clone()).ok()?;
    let meta = &mut cluster.metadata;
    meta.namespace.get_or_insert_with(|| "default".to_owned());
    meta.uid
        .get_or_insert_with(|| "00000000-0000-0000-0000-000000000000".to_owned());
    let error = tusk_operator::validate::validate(&cluster, &OperatorConfig::default()).err()?;
    Some(Violation {
        field: error.field,
        message: format!(
            "{} (the API server accepts it; the operator refuses the cluster with condition InvalidSpec)",
            error.rule
        ),
    })
}
