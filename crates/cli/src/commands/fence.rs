//! `tusk fence CLUSTER INSTANCE|*` and `tusk unfence CLUSTER INSTANCE|*`:
//! add an instance to (or remove it from) the cluster's
//! `tusk.dev/fenced-instances` annotation, keeping the other entries. A
//! fenced instance's PostgreSQL is stopped and stays stopped until it is
//! unfenced (see docs/operator.md). The annotation is written as a JSON
//! list with a merge patch; an empty list removes it.

use std::collections::BTreeSet;
use std::process::ExitCode;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use tusk_api::fencing::Fencing;
use tusk_api::labels::FENCED_INSTANCES;

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// The instance, e.g. `orders-2`, or `*` for every instance.
    pub instance: String,
}

/// The names in an annotation value, refusing one that cannot be read.
pub fn names(annotation: Option<&str>) -> Result<BTreeSet<String>, String> {
    Fencing::parse(annotation).map_err(|e| e.to_string())?;
    let Some(value) = annotation.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(BTreeSet::new());
    };
    let list: Vec<String> = if value.starts_with('[') {
        serde_json::from_str(value).map_err(|e| e.to_string())?
    } else {
        value.split(',').map(str::to_owned).collect()
    };
    Ok(list
        .into_iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect())
}

/// The annotation after fencing (`fence`) or unfencing `instance`; `None`
/// removes it. Unfencing `*` clears the list.
pub fn edited(
    annotation: Option<&str>,
    instance: &str,
    fence: bool,
) -> Result<Option<String>, String> {
    let mut set = names(annotation)?;
    if fence {
        set.insert(instance.to_owned());
    } else if instance == "*" {
        set.clear();
    } else {
        set.remove(instance);
    }
    if set.is_empty() {
        return Ok(None);
    }
    let list: Vec<&String> = set.iter().collect();
    serde_json::to_string(&list)
        .map(Some)
        .map_err(|e| e.to_string())
}

pub fn run(args: &Args, fence: bool) -> Result<ExitCode, CommandError> {
    let verb = if fence { "fenced" } else { "unfenced" };
    if Fencing::parse(Some(&args.instance)).is_err() || args.instance.contains(',') {
        eprintln!(
            "refused: `{}` is not an instance name or `*`",
            args.instance
        );
        return Ok(ExitCode::from(1));
    }
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        let cluster = target.cluster(&args.at.cluster).await?;
        let current = cluster.annotations().get(FENCED_INSTANCES).cloned();
        let value = match edited(current.as_deref(), &args.instance, fence) {
            Ok(value) => value,
            Err(reason) => {
                eprintln!("refused: {reason}; fix the annotation with kubectl annotate");
                return Ok(ExitCode::from(1));
            }
        };
        // The resourceVersion makes the patch fail rather than lose an
        // entry someone else added meanwhile.
        let patch = serde_json::json!({"metadata": {
            "resourceVersion": cluster.resource_version(),
            "annotations": {FENCED_INSTANCES: value},
        }});
        target
            .clusters()
            .patch(
                &args.at.cluster,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(kubernetes)?;
        let still = Fencing::parse(value.as_deref()).is_ok_and(|f| f.covers(&args.instance));
        if !fence && still {
            eprintln!(
                "{} stays fenced: the annotation fences `*`; `tusk unfence {} '*'` unfences every instance",
                args.instance, args.at.cluster
            );
        }
        outln!(
            "{verb} {} in {}/{}: {FENCED_INSTANCES}={}",
            args.instance,
            target.namespace,
            args.at.cluster,
            value.as_deref().unwrap_or("(removed)")
        )?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_keeps_the_other_entries() {
        let cases = [
            (None, "db-2", true, Some("[\"db-2\"]")),
            (Some("db-1"), "db-2", true, Some("[\"db-1\",\"db-2\"]")),
            (Some("[\"db-2\"]"), "db-2", true, Some("[\"db-2\"]")),
            (Some("db-1, db-2"), "db-2", false, Some("[\"db-1\"]")),
            (Some("[\"db-2\"]"), "db-2", false, None),
            (Some("[\"db-1\",\"*\"]"), "*", false, None),
            (Some("db-1"), "*", true, Some("[\"*\",\"db-1\"]")),
            (None, "db-2", false, None),
        ];
        for (before, instance, fence, after) in cases {
            assert_eq!(
                edited(before, instance, fence),
                Ok(after.map(str::to_owned)),
                "{before:?} {instance} fence={fence}"
            );
        }
    }

    #[test]
    fn an_unreadable_annotation_is_not_overwritten() {
        let error = edited(Some("[\"db-1\""), "db-2", true).expect_err("refused");
        assert!(error.contains("tusk.dev/fenced-instances"), "{error}");
    }
}
