//! `tusk validate`: the API server's admission checks, run locally: the
//! CRD's schema and CEL rules, then, for a PostgresCluster they accept,
//! the controller's own checks, which the operator's admission webhook
//! runs too (a parameter's value under the rules of the declared major, a
//! parameter that major lacks, resource quantities). Where the webhook is
//! not installed the controller refuses such a spec with an `InvalidSpec`
//! condition (keeping a running cluster as its last valid spec declares
//! it); either way `tusk validate` says so before the cluster is applied.
//!
//! Manifests are read as kubectl reads them, with YAML 1.1's booleans and
//! numbers: an unquoted `off` is `false`, which a string field refuses, and
//! the message says to quote it.
//!
//! Prints one line per violation, `FILE: Kind/name: field: message`, and
//! exits 1 when there is any; with `--old`, transition rules (storage never
//! shrinks, version changes need approval, immutable fields) compare each
//! object with its earlier version.

use std::path::PathBuf;
use std::process::ExitCode;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tusk_api::admission::Violation;
use tusk_operator::config::OperatorConfig;

use super::CommandError;
use crate::manifests::{self, Manifest};
use crate::output::Lines;

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
    // The exit code is the verdict, whether or not anyone reads why.
    let mut lines = Lines::default();
    for path in &args.files {
        let file = path.display();
        let documents = manifests::read(path)?;
        if documents.is_empty() {
            lines.line(format_args!("{file}: no manifests found"))?;
            refused = true;
        }
        for manifest in &documents {
            let previous = old.iter().find(|o| o.same_object(manifest));
            let previous = previous.map(|p: &Manifest| &p.value);
            let mut violations = manifest.metadata_violations();
            let admission = tusk_api::admission::validate(&crds, &manifest.value, previous);
            let refused_fields: Vec<String> = violations.iter().map(|v| v.field.clone()).collect();
            violations.extend(
                admission
                    .into_iter()
                    .filter(|v| !refused_fields.contains(&v.field))
                    .map(|v| explain_yaml_1_1(&crds, manifest, previous, v)),
            );
            if violations.is_empty() {
                violations.extend(controller_refusal(&manifest.value, previous));
            }
            let object = manifest.describe();
            if violations.is_empty() {
                let how = if previous.is_some() {
                    "valid update"
                } else {
                    "valid"
                };
                lines.line(format_args!("{file}: {object}: {how}"))?;
            }
            for violation in violations {
                refused = true;
                lines.line(format_args!("{file}: {object}: {violation}"))?;
            }
        }
    }
    Ok(if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A violation at a field YAML 1.1 read as a boolean or a number, told
/// with what was written: `must be a string (YAML 1.1 reads an unquoted off
/// as a boolean: quote it, "off")` when quoting it clears the field, the
/// reading added to the message otherwise. kubectl reads YAML 1.1, so an
/// unquoted `off` reaches the API server as `false`.
fn explain_yaml_1_1(
    crds: &[CustomResourceDefinition],
    manifest: &Manifest,
    previous: Option<&serde_json::Value>,
    violation: Violation,
) -> Violation {
    let Violation { field, message } = violation;
    if let Some(resolved) = manifest.resolved_value_at(&field) {
        let quoted = manifest.quoted(resolved);
        let cleared = !tusk_api::admission::validate(crds, &quoted, previous)
            .iter()
            .any(|v| v.field == field);
        let message = if cleared {
            manifests::must_be_a_string(resolved)
        } else {
            format!("{message} ({})", resolved.reading())
        };
        return Violation { field, message };
    }
    if let Some(key) = manifest.resolved_key_on(&field) {
        let message = format!("{message} ({})", manifests::quote_it(key));
        return Violation { field, message };
    }
    Violation { field, message }
}

/// What the controller (and so the operator's webhook) refuses in a
/// PostgresCluster the CRD's rules accept, as the webhook says it: the
/// webhook's own decision, on the object as a create (or, with `previous`,
/// as an update of it). The identity the API server gives an object
/// (namespace, uid) is filled in when the file leaves it out.
fn controller_refusal(
    value: &serde_json::Value,
    previous: Option<&serde_json::Value>,
) -> Option<Violation> {
    use tusk_api::admission_review::{AdmissionRequest, GroupVersionKind};
    if value.get("kind").and_then(serde_json::Value::as_str) != Some("PostgresCluster") {
        return None;
    }
    let text = |pointer: &str| {
        value
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let request = AdmissionRequest {
        kind: GroupVersionKind {
            group: tusk_api::GROUP.to_owned(),
            version: "v1alpha1".to_owned(),
            kind: "PostgresCluster".to_owned(),
        },
        operation: if previous.is_some() {
            "UPDATE"
        } else {
            "CREATE"
        }
        .to_owned(),
        name: text("/metadata/name"),
        namespace: text("/metadata/namespace").or_else(|| Some("default".to_owned())),
        object: Some(value.clone()),
        old_object: previous.cloned(),
        ..AdmissionRequest::default()
    };
    let response = tusk_operator::webhook::review::decide(&request, &OperatorConfig::default());
    if response.allowed {
        return None;
    }
    let status = response.status.unwrap_or_default();
    let cause = &status["details"]["causes"][0];
    let said = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
    let (field, rule) = match cause.get("field") {
        Some(field) => (said(field), said(&cause["message"])),
        None => (String::new(), said(&status["message"])),
    };
    Some(Violation {
        field,
        message: format!(
            "{rule} (refused at admission by the operator's webhook; where the webhook is not \
             installed, the API server accepts it and the operator refuses the cluster with \
             condition InvalidSpec and applies none of it: a running cluster is kept as its \
             last valid spec declares it)"
        ),
    })
}
