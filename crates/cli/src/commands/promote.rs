//! `tusk promote CLUSTER INSTANCE`: a planned switchover, or with
//! `--accept-data-loss` the approval of a failover that `dataDurability:
//! required` blocked. It writes the request as an annotation on the cluster
//! (`tusk.dev/promote` naming the instance, or `tusk.dev/approve-data-loss`
//! quoting the blocked decision's identity from `status.failover.blocked.id`),
//! which the operator acts on, then waits until the instance is the primary.
//!
//! Exit codes: 0 done, 1 refused (by this command or by the operator),
//! 2 the command could not run. The judgement and the waiting live in
//! `tusk_operator::switchover`; this command parses and prints.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use kube::api::Api;
use tusk_api::v1alpha1::PostgresCluster;
use tusk_operator::switchover::{self, Progress, Requested};

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::outln;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// The instance to make primary, e.g. `orders-2`.
    pub instance: String,
    /// Approve a blocked failover to INSTANCE, accepting that commits the
    /// failed primary acknowledged and INSTANCE never received are lost.
    #[arg(long)]
    pub accept_data_loss: bool,
    /// Seconds to wait for INSTANCE to become the primary (0: do not wait).
    #[arg(long, default_value_t = 120)]
    pub wait: u64,
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(promote(args))
}

async fn promote(args: &Args) -> Result<ExitCode, CommandError> {
    let target = Target::connect(args.at.namespace.as_deref()).await?;
    let api: Api<PostgresCluster> = target.clusters();
    let namespace = &target.namespace;
    let requested = switchover::request(
        &api,
        &args.at.cluster,
        &args.instance,
        args.accept_data_loss,
    )
    .await
    .map_err(kubernetes)?;
    let annotation = match requested {
        Requested::NoCluster => {
            eprintln!(
                "refused: no PostgresCluster {} in namespace {namespace}",
                args.at.cluster
            );
            return Ok(ExitCode::from(1));
        }
        Requested::Refused(reason) => {
            eprintln!("refused: {reason}");
            return Ok(ExitCode::from(1));
        }
        Requested::AlreadyPrimary => {
            outln!(
                "{} is the primary of {} already",
                args.instance,
                args.at.cluster
            )?;
            return Ok(ExitCode::SUCCESS);
        }
        Requested::Annotated(annotation, value) => {
            outln!(
                "requested: {annotation}={value} on {namespace}/{}",
                args.at.cluster
            )?;
            annotation
        }
    };
    if args.wait == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let limit = Duration::from_secs(args.wait);
    let progress = switchover::wait(&api, &args.at.cluster, &args.instance, annotation, limit)
        .await
        .map_err(kubernetes)?;
    match progress {
        Progress::Primary => {
            outln!(
                "{} is the primary of {} ({:.1} s)",
                args.instance,
                args.at.cluster,
                started.elapsed().as_secs_f64()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Progress::Refused => {
            eprintln!(
                "refused by the operator: see the SwitchoverRefused or ApprovalRejected event in \
                 `kubectl describe pgc {}`",
                args.at.cluster
            );
            Ok(ExitCode::from(1))
        }
        Progress::Pending => {
            eprintln!(
                "{} is not the primary of {} after {} s; the request stands: watch `kubectl get pgc {} -w`",
                args.instance,
                args.at.cluster,
                limit.as_secs(),
                args.at.cluster
            );
            Ok(ExitCode::from(1))
        }
    }
}
