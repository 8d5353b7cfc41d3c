//! `tusk plan CLUSTER [-o json]`: what the operator's next pass over a
//! cluster would do, computed by the operator's own validation and
//! planner from the live objects (see `tusk_operator::reconcile::preview`),
//! applying nothing: the objects it would create, update or delete, a
//! promotion or why none happens yet, how the status would change and the
//! events it would publish.
//!
//! It reads what the operator reads: the cluster's children and
//! PostgresBackups, the primary lease while the primary fails, and each
//! instance manager's report through the API server's pod proxy (`get` on
//! `pods/proxy`; an instance it cannot reach is listed, and the plan is
//! made without its report, as the operator makes it when an instance is
//! silent). The operator's settings (its images, PostgreSQL's user) come
//! from its Deployment (`--operator-namespace`), else from this
//! environment's `TUSK_*` variables, as `tusk operator` reads them.
//!
//! `-o json` prints the preview as a stable document: fields are only
//! added, never renamed or removed.

use std::fmt::Write as _;
use std::process::ExitCode;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use tusk_operator::config::OperatorConfig;
use tusk_operator::install;
use tusk_operator::reconcile::preview::{Preview, preview};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes, table};
use super::status::Format;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Namespace of the operator's Deployment, whose settings the plan uses.
    #[arg(long, default_value = install::NAMESPACE)]
    pub operator_namespace: String,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        let cluster = target.cluster(&args.at.cluster).await?;
        let (config, mut notes) = operator_config(&target, &args.operator_namespace).await?;
        let mut preview = preview(&target.client, &config, &cluster)
            .await
            .map_err(|e| CommandError::Kubernetes(e.to_string()))?;
        notes.append(&mut preview.notes);
        preview.notes = notes;
        args.output.print(&preview, render)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The running operator's settings, from its Deployment's container; when
/// there is no such Deployment (an operator run another way), this
/// environment's. Notes say where they came from when not from the
/// Deployment, and which settings it does not give literally.
async fn operator_config(
    target: &Target,
    namespace: &str,
) -> Result<(OperatorConfig, Vec<String>), CommandError> {
    let deployments: Api<Deployment> = Api::namespaced(target.client.clone(), namespace);
    let deployment = deployments.get_opt(install::NAME).await;
    let container = match &deployment {
        Ok(Some(deployment)) => deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers.iter().find(|c| c.name == "operator")),
        Ok(None) | Err(_) => None,
    };
    let Some(container) = container else {
        let why = match deployment {
            Err(error) => format!("it cannot be read ({})", kubernetes(error)),
            Ok(Some(_)) => "it has no `operator` container".to_owned(),
            Ok(None) => "there is none".to_owned(),
        };
        let config = OperatorConfig::from_settings(|name| std::env::var(name).ok())
            .map_err(|e| CommandError::Kubernetes(format!("this environment: {e}")))?;
        let note = format!(
            "the operator's settings are this environment's TUSK_* variables or their defaults: \
             its Deployment {namespace}/{}: {why}",
            install::NAME
        );
        return Ok((config, vec![note]));
    };
    let (config, unresolved) = OperatorConfig::from_container(container).map_err(|e| {
        CommandError::Kubernetes(format!("Deployment {namespace}/{}: {e}", install::NAME))
    })?;
    let notes = unresolved
        .into_iter()
        .map(|name| {
            format!(
                "{name} is not a literal value in the operator's Deployment: its default is used"
            )
        })
        .collect();
    Ok((config, notes))
}

/// The preview as text: what would be done, then the status and events,
/// then what it was decided without.
pub fn render(preview: &Preview) -> String {
    let mut out = format!(
        "Plan for {}/{} (from the live objects at {}; nothing was applied)\n",
        preview.namespace, preview.cluster, preview.at
    );
    if let Some(held) = &preview.held {
        let _ = writeln!(out, "Held: {held}");
    }
    if let Some(refused) = &preview.refused {
        let _ = writeln!(out, "Refused: {refused}");
    }
    if preview.steps.is_empty() && preview.status.is_empty() && preview.events.is_empty() {
        out.push_str("Nothing to do: the cluster is as declared.\n");
    }
    let steps = preview.steps.iter();
    section(
        &mut out,
        "Steps",
        steps.map(|s| vec![s.action.to_owned(), s.object.clone(), s.why.clone()]),
    );
    if !preview.status.is_empty() {
        out.push_str("\nStatus:\n");
        for change in &preview.status {
            let _ = writeln!(out, "  {}: {} -> {}", change.field, change.from, change.to);
        }
    }
    let events = preview.events.iter();
    section(
        &mut out,
        "Events",
        events.map(|e| vec![e.type_.to_owned(), e.reason.clone(), e.message.clone()]),
    );
    let lists = [
        ("Decided without the report of", &preview.unreached),
        ("Notes", &preview.notes),
    ];
    for (title, lines) in lists.into_iter().filter(|(_, l)| !l.is_empty()) {
        let _ = writeln!(out, "\n{title}:");
        for line in lines {
            let _ = writeln!(out, "- {line}");
        }
    }
    out
}

/// A titled table of `rows`, when there are any.
fn section(out: &mut String, title: &str, rows: impl Iterator<Item = Vec<String>>) {
    let rows: Vec<Vec<String>> = rows.collect();
    if !rows.is_empty() {
        let _ = writeln!(out, "\n{title}:");
        out.push_str(&table(&rows, "  "));
    }
}

#[cfg(test)]
mod tests;
