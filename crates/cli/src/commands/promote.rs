//! `tusk promote CLUSTER INSTANCE`: a planned switchover, or with
//! `--accept-data-loss` the approval of a failover that `dataDurability:
//! required` blocked. It writes the request as an annotation on the cluster
//! (`tusk.dev/promote` or `tusk.dev/approve-data-loss`), which the
//! operator acts on, then waits until the instance is the primary.
//!
//! Exit codes: 0 done, 1 refused (by this command or by the operator),
//! 2 the command could not run.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use tusk_api::conditions::{FAILOVER_BLOCKED, find_condition};
use tusk_api::labels;
use tusk_api::v1alpha1::{PostgresCluster, PostgresClusterStatus};

use super::CommandError;

#[derive(clap::Args)]
pub struct Args {
    /// The PostgresCluster.
    pub cluster: String,
    /// The instance to make primary, e.g. `orders-2`.
    pub instance: String,
    /// Namespace of the cluster [default: the kubeconfig's].
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Approve a blocked failover to INSTANCE, accepting that commits the
    /// failed primary acknowledged and INSTANCE never received are lost.
    #[arg(long)]
    pub accept_data_loss: bool,
    /// Seconds to wait for INSTANCE to become the primary (0: do not wait).
    #[arg(long, default_value_t = 120)]
    pub wait: u64,
}

/// The annotation to write, or why the request makes no sense now.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    Annotate(&'static str),
    AlreadyPrimary,
    Refuse(String),
}

fn plan(
    cluster: &str,
    instance: &str,
    accept_data_loss: bool,
    status: &PostgresClusterStatus,
) -> Plan {
    if !status.instances.iter().any(|i| i.name == instance) {
        let known: Vec<&str> = status.instances.iter().map(|i| i.name.as_str()).collect();
        return Plan::Refuse(format!(
            "{instance} is not an instance of {cluster} (instances: {})",
            if known.is_empty() {
                "none yet".to_owned()
            } else {
                known.join(", ")
            }
        ));
    }
    let blocked =
        find_condition(&status.conditions, FAILOVER_BLOCKED).is_some_and(|c| c.status == "True");
    if accept_data_loss {
        if !blocked {
            return Plan::Refuse(format!(
                "no failover of {cluster} is blocked, so there is no data loss to accept; \
                 without --accept-data-loss this is a switchover"
            ));
        }
        return Plan::Annotate(labels::APPROVE_DATA_LOSS);
    }
    if blocked {
        return Plan::Refuse(format!(
            "a failover of {cluster} is blocked: promoting may lose acknowledged commits \
             (see `kubectl describe pgc {cluster}`); add --accept-data-loss to approve it"
        ));
    }
    if status.current_primary.as_deref() == Some(instance)
        && status.target_primary.as_deref() == Some(instance)
    {
        return Plan::AlreadyPrimary;
    }
    Plan::Annotate(labels::PROMOTE)
}

fn kubernetes(error: kube::Error) -> CommandError {
    CommandError::Kubernetes(error.to_string())
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    runtime.block_on(promote(args))
}

async fn promote(args: &Args) -> Result<ExitCode, CommandError> {
    let client = kube::Client::try_default().await.map_err(kubernetes)?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let api: Api<PostgresCluster> = Api::namespaced(client, &namespace);
    let Some(cluster) = api.get_opt(&args.cluster).await.map_err(kubernetes)? else {
        eprintln!(
            "refused: no PostgresCluster {} in namespace {namespace}",
            args.cluster
        );
        return Ok(ExitCode::from(1));
    };
    let status = cluster.status.unwrap_or_default();
    let annotation = match plan(
        &args.cluster,
        &args.instance,
        args.accept_data_loss,
        &status,
    ) {
        Plan::Refuse(reason) => {
            eprintln!("refused: {reason}");
            return Ok(ExitCode::from(1));
        }
        Plan::AlreadyPrimary => {
            println!(
                "{} is the primary of {} already",
                args.instance, args.cluster
            );
            return Ok(ExitCode::SUCCESS);
        }
        Plan::Annotate(annotation) => annotation,
    };
    let patch = serde_json::json!({"metadata": {"annotations": {annotation: args.instance}}});
    api.patch(
        &args.cluster,
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(kubernetes)?;
    println!(
        "requested: {annotation}={} on {namespace}/{}",
        args.instance, args.cluster
    );
    if args.wait == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    wait_for_primary(&api, args, annotation, Duration::from_secs(args.wait)).await
}

/// Waits until the instance is the current primary, or the operator
/// removed a switchover request without acting on it (it refused; its
/// event says why).
async fn wait_for_primary(
    api: &Api<PostgresCluster>,
    args: &Args,
    annotation: &str,
    limit: Duration,
) -> Result<ExitCode, CommandError> {
    let started = Instant::now();
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cluster = api.get(&args.cluster).await.map_err(kubernetes)?;
        let pending = cluster
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(annotation));
        let status = cluster.status.unwrap_or_default();
        let target = status.target_primary.as_deref() == Some(args.instance.as_str());
        if target && status.current_primary.as_deref() == Some(args.instance.as_str()) {
            println!(
                "{} is the primary of {} ({:.1} s)",
                args.instance,
                args.cluster,
                started.elapsed().as_secs_f64()
            );
            return Ok(ExitCode::SUCCESS);
        }
        if annotation == labels::PROMOTE && !pending && !target {
            eprintln!(
                "refused by the operator: see the SwitchoverRefused event in `kubectl describe pgc {}`",
                args.cluster
            );
            return Ok(ExitCode::from(1));
        }
    }
    eprintln!(
        "{} is not the primary of {} after {} s; the request stands: watch `kubectl get pgc {} -w`",
        args.instance,
        args.cluster,
        limit.as_secs(),
        args.cluster
    );
    Ok(ExitCode::from(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_api::v1alpha1::InstanceStatus;

    fn status(blocked: bool) -> PostgresClusterStatus {
        let mut status: PostgresClusterStatus = serde_json::from_value(serde_json::json!({
            "currentPrimary": "db-1", "targetPrimary": "db-1",
            "instances": [
                {"name": "db-1", "role": "primary", "ready": true},
                {"name": "db-2", "role": "replica", "ready": true}
            ]
        }))
        .expect("status");
        if blocked {
            status.conditions = serde_json::from_value(serde_json::json!([{
                "type": "FailoverBlocked", "status": "True", "reason": "DurabilityAtRisk",
                "message": "", "lastTransitionTime": "2026-12-02T10:00:00Z"
            }]))
            .expect("conditions");
        }
        status
    }

    #[test]
    fn a_standby_is_promoted_by_a_switchover_request() {
        assert_eq!(
            plan("db", "db-2", false, &status(false)),
            Plan::Annotate(labels::PROMOTE)
        );
        assert_eq!(
            plan("db", "db-1", false, &status(false)),
            Plan::AlreadyPrimary
        );
    }

    #[test]
    fn accepting_data_loss_approves_only_a_blocked_failover() {
        assert_eq!(
            plan("db", "db-2", true, &status(true)),
            Plan::Annotate(labels::APPROVE_DATA_LOSS)
        );
        let Plan::Refuse(reason) = plan("db", "db-2", true, &status(false)) else {
            panic!("refused");
        };
        assert!(reason.contains("no failover of db is blocked"), "{reason}");
        let Plan::Refuse(reason) = plan("db", "db-2", false, &status(true)) else {
            panic!("refused");
        };
        assert!(reason.contains("--accept-data-loss"), "{reason}");
    }

    #[test]
    fn an_unknown_instance_is_refused_naming_the_instances() {
        let Plan::Refuse(reason) = plan("db", "db-9", false, &status(false)) else {
            panic!("refused");
        };
        assert_eq!(
            reason,
            "db-9 is not an instance of db (instances: db-1, db-2)"
        );
        let empty = PostgresClusterStatus {
            instances: Vec::<InstanceStatus>::new(),
            ..PostgresClusterStatus::default()
        };
        assert!(
            matches!(plan("db", "db-1", false, &empty), Plan::Refuse(r) if r.contains("none yet"))
        );
    }
}
