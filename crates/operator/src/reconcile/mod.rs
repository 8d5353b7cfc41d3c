//! One reconcile of one PostgresCluster, as a pipeline (`CONTRIBUTING.md`, 1):
//!
//! [`fetch`] (children and instance reports) -> [`validate`] (the spec and
//! what was observed, together) -> [`plan`] (pure: every decision of the
//! pass) -> [`apply`] (server-side apply, in a fixed order) -> status and
//! events ([`crate::report`]) -> [`requeue`].
//!
//! A spec that fails validation changes nothing of what it declares: the
//! pass maintains the last valid spec instead ([`last_valid`]), or, for a
//! cluster never valid, keeps the observed state in status. Deletion goes
//! through the finalizer's cleanup instead (R8, R16).

mod apply;
mod backups;
mod certificates;
mod claims;
mod fetch;
mod last_valid;
mod plan;
pub mod preview;
mod primary;
mod rehearsal;
mod requeue;
mod role_secrets;
mod roles;
mod rollout;
mod secrets;
mod storage;
mod upgrade;
mod validate;

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{ResourceExt, runtime};
use tracing::Instrument;
use tusk_api::v1alpha1::PostgresCluster;

use crate::cached_cluster::CachedCluster;
use crate::cleanup;
use crate::context::Context;
use crate::error::Error;
use crate::events::{publish_all, report_undecodable};
use crate::freshness::cluster_key;
use crate::report;
use crate::status::StatusInput;

pub use plan::Plan;

/// Finalizer guarding volumes and backups kept by `deletionPolicy: Retain`.
pub const FINALIZER: &str = "postgres.tusk.dev/cleanup";

/// One pass over a cluster that is not being deleted.
async fn converge(cluster: &PostgresCluster, ctx: &Context) -> Result<Action, Error> {
    let observed = fetch::fetch(cluster, ctx).await?;
    let now = Timestamp::now();
    let target = match last_valid::choose(cluster, &ctx.config, &observed) {
        Ok(target) => target,
        Err(error) => {
            // Nothing valid to maintain: nothing is applied, and status
            // keeps what was observed: the last known positions are what
            // a later failover decides on.
            let kept = StatusInput::unplanned(
                cluster,
                &observed.children.pods,
                observed.children.volume_count(),
                &observed.reports,
                Time(now),
            );
            report::write(cluster, ctx, &kept, Some(&error)).await?;
            return Err(error);
        }
    };
    let (kept, valid) = (&target.cluster, &target.valid);
    let outdated = rollout::Outdated::observe(kept, valid, ctx, &observed);
    let mut plan = plan::plan(kept, valid, &observed, &outdated, now);
    target.describe(&mut plan.status, cluster);
    let applied = match apply::apply(ctx, valid, &observed.children, &plan).await {
        Ok(()) => match backups::apply(ctx, valid, &plan).await {
            Ok(()) => match rehearsal::apply(ctx, valid, &plan).await {
                Ok(()) => {
                    let primary = &plan.instances.target_primary;
                    let children = &observed.children;
                    upgrade::apply(ctx, valid, children, &plan.upgrade, primary).await
                }
                failed => failed,
            },
            failed => failed,
        },
        failed => failed,
    };
    if applied.is_ok() && !valid.paused {
        expect_creation(cluster, ctx, &plan);
    }
    publish_all(cluster, ctx, &plan.events).await;
    let written = report::write(cluster, ctx, &plan.status, applied.as_ref().err()).await?;
    // One-shot requests are removed once acted on, so they never fire
    // again later, even when applying failed.
    apply::clear_requests(cluster, ctx, &plan.clear, written.version.as_deref()).await?;
    applied?;
    let held = requeue::standby_held(observed.reports.values());
    let mut wait = requeue::after(&written.status, &plan, held);
    if let Some(roles) = requeue::roles_settling(&valid.roles, &written.status) {
        wait = wait.min(roles);
    }
    Ok(Action::requeue(wait))
}

/// Remembers the instance the pass created until the caches show it (see
/// [`crate::expectations`]).
fn expect_creation(cluster: &PostgresCluster, ctx: &Context, plan: &Plan<'_>) {
    use crate::plan::InstanceStep;
    if let InstanceStep::Create(instance) | InstanceStep::RecreatePod(instance) =
        &plan.instances.step
    {
        let key = cluster_key(cluster);
        ctx.expectations
            .created(&key, instance.as_str(), Instant::now());
    }
}

/// Entry point used by the controller.
pub async fn reconcile(cached: Arc<CachedCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    match cached.unpack().0 {
        Ok(cluster) => reconcile_cluster(Arc::new(cluster), ctx).await,
        Err(invalid) => {
            report_undecodable(&invalid, &ctx).await;
            Ok(Action::await_change())
        }
    }
}

async fn reconcile_cluster(
    cluster: Arc<PostgresCluster>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let key = cluster_key(cluster.as_ref());
    if ctx
        .freshness
        .is_stale(&key, cluster.resource_version().as_deref())
    {
        // The cache has not yet seen our last write: acting now would
        // decide from the status before it.
        tracing::debug!(cluster = %key, version = ?cluster.resource_version(), "cluster not yet seen as last written; waiting");
        return Ok(Action::requeue(requeue::STALE));
    }
    if let Some(left) = ctx.failures.held(&key, Instant::now())
        && cluster.metadata.deletion_timestamp.is_none()
    {
        // A failure that no change of a child can cure (the namespace is
        // being deleted) waits for its retry; the cluster's own deletion
        // does not.
        tracing::debug!(cluster = %key, wait_seconds = left.as_secs_f64(), "held until the retry");
        return Ok(Action::requeue(left));
    }
    let started = Instant::now();
    let namespace = cluster.namespace().unwrap_or_default();
    let api: Api<PostgresCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let span =
        tracing::info_span!("reconcile", cluster = %cluster.name_any(), namespace = %namespace);
    let result = finalizer(&api, FINALIZER, cluster, |event| async {
        match event {
            Finalizer::Apply(cluster) => converge(&cluster, &ctx).instrument(span.clone()).await,
            Finalizer::Cleanup(cluster) => {
                cleanup::run(&cluster, &ctx).instrument(span.clone()).await
            }
        }
    })
    .await
    .map_err(finalizer_error);
    ctx.metrics
        .reconciled(started, result.as_ref().err().map(Error::category));
    tracing::debug!(
        seconds = started.elapsed().as_secs_f64(),
        outcome = ?result.as_ref().map_err(Error::category),
        "reconciled"
    );
    if result.is_ok() {
        ctx.failures.succeeded(&key);
    }
    result
}

fn finalizer_error(error: runtime::finalizer::Error<Error>) -> Error {
    use runtime::finalizer::Error as Failed;
    match error {
        Failed::ApplyFailed(inner) | Failed::CleanupFailed(inner) => inner,
        Failed::AddFinalizer(source) | Failed::RemoveFinalizer(source) => Error::Kube {
            action: "update the finalizer".to_owned(),
            source,
        },
        other => Error::Finalizer(other.to_string()),
    }
}

/// Back-off by category (see [`crate::retry`]): permanent errors wait for
/// a spec change (the status already says what to fix), transient ones
/// retry after a delay that doubles with each failure in a row.
pub fn error_policy(cluster: Arc<CachedCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = cluster_key(cluster.as_ref());
    let failures = ctx.failures.failed(&key);
    let category = error.category();
    // The same fields as the reconcile span, which has ended by now.
    let (name, namespace) = (cluster.name_any(), cluster.namespace().unwrap_or_default());
    match crate::retry::delay(category, failures) {
        Some(delay) => {
            if crate::retry::holds_triggers(category) {
                ctx.failures.hold(&key, Instant::now() + delay);
            }
            tracing::warn!(cluster = %name, %namespace, %error, category = category.reason(), failures, retry_in_seconds = delay.as_secs_f64(), "reconcile failed");
            Action::requeue(delay)
        }
        None => {
            tracing::warn!(cluster = %name, %namespace, %error, category = category.reason(), "reconcile failed; waiting for a change");
            Action::await_change()
        }
    }
}
