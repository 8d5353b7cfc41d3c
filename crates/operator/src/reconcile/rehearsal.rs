//! Fetch and apply for restore rehearsals (decided in
//! [`crate::rehearsal`]): the rehearsal's pod and scratch volume are read
//! by name while the cluster declares a backup destination (they are not
//! cached: at most one of each per cluster, and only then), and not again
//! once found absent until the operator creates them
//! ([`crate::absent`]); created to start one, and deleted once its
//! outcome is recorded.

use std::time::Instant;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use tusk_api::labels;
use tusk_api::rehearsal::pod_name;
use tusk_api::v1alpha1::PostgresCluster;

use super::Plan;
use crate::builders::{rehearsal_pod, rehearsal_pvc};
use crate::context::Context;
use crate::error::Error;
use crate::rehearsal::{Observed, RehearsalInput, RehearsalPlan};
use crate::validate::ValidatedCluster;

/// The rehearsal under way, if any; only read when the cluster declares a
/// backup destination.
pub async fn fetch(
    cluster: &PostgresCluster,
    client: &kube::Client,
) -> Result<Option<Observed>, Error> {
    if cluster.spec.backup.is_none() {
        return Ok(None);
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let name = pod_name(&cluster.name_any());
    one_shot(client, &namespace, &name, "restore rehearsal").await
}

/// [`fetch`] for the operator's passes: nothing is read while an earlier
/// pass found no rehearsal and the operator has not started one since.
pub async fn fetch_unless_absent(
    cluster: &PostgresCluster,
    ctx: &Context,
) -> Result<Option<Observed>, Error> {
    let key = absent_key(
        &cluster.namespace().unwrap_or_default(),
        &cluster.name_any(),
    );
    if ctx.absent.absent(&key, Instant::now()) {
        return Ok(None);
    }
    let observed = fetch(cluster, &ctx.client).await?;
    if cluster.spec.backup.is_some() {
        ctx.absent.read(&key, observed.is_some(), Instant::now());
    }
    Ok(observed)
}

/// How [`crate::absent`] names a cluster's rehearsal (its pod and
/// volume share the name).
fn absent_key(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{}", pod_name(cluster))
}

/// A one-shot pod `name` and its scratch volume of the same name (`what`
/// names them in errors), as the planner sees them.
pub(super) async fn one_shot(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
) -> Result<Option<Observed>, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let read = |kind: &str, source| Error::Kube {
        action: format!("read the {what}'s {kind} {name}"),
        source,
    };
    let pod = pods.get_opt(name).await.map_err(|e| read("pod", e))?;
    let claim = claims.get_opt(name).await.map_err(|e| read("volume", e))?;
    Ok(match (pod, claim) {
        (Some(pod), _) => Some(observe(&pod)),
        // A scratch volume still going away: nothing new on it yet.
        (None, Some(claim)) if claim.meta().deletion_timestamp.is_some() => {
            Some(Observed::Removing)
        }
        // A volume left without its pod is removed (or, for the
        // pre-check, used again).
        (None, Some(_)) => Some(Observed::Orphaned),
        (None, None) => None,
    })
}

/// The rehearsal pod as the planner sees it.
pub(super) fn observe(pod: &Pod) -> Observed {
    let created = pod
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or_else(Timestamp::now, |t| t.0);
    if pod.meta().deletion_timestamp.is_some() {
        return Observed::Removing;
    }
    let status = pod.status.as_ref();
    let terminated = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    if let Some(ended) = terminated {
        return Observed::Finished {
            exit_code: Some(ended.exit_code),
            message: ended.message.clone(),
            at: ended.finished_at.as_ref().map_or(created, |t| t.0),
        };
    }
    if status.and_then(|s| s.phase.as_deref()) == Some("Failed") {
        let why = status.and_then(|s| s.message.clone().or_else(|| s.reason.clone()));
        return Observed::Finished {
            exit_code: None,
            message: why,
            at: created,
        };
    }
    Observed::Running { since: created }
}

/// The pass's rehearsal decisions (none while the cluster is paused).
pub fn decide(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    pod: Option<&crate::rehearsal::Observed>,
    now: Timestamp,
) -> RehearsalPlan {
    if valid.paused {
        return RehearsalPlan::default();
    }
    let status = cluster.status.as_ref();
    let mut plan = crate::rehearsal::decide(&RehearsalInput {
        schedule: valid.verify_schedule.as_ref(),
        requested: cluster.annotations().contains_key(labels::REHEARSE),
        unable: valid.backups_unable(),
        last: status.and_then(|s| s.last_restore_verification.as_ref()),
        last_backup: status
            .and_then(|s| s.backup.as_ref())
            .and_then(|b| b.last_successful_backup_time.as_ref()),
        pod,
        now,
    });
    plan.next_slot = valid
        .verify_schedule
        .as_ref()
        .and_then(|cron| crate::backups::schedule::next(cron, now));
    plan
}

/// The `RestoreRehearsed` condition while rehearsals are declared, from
/// the newest record (this pass's, else the last one).
pub fn condition(
    cluster: &PostgresCluster,
    valid: &ValidatedCluster,
    plan: &RehearsalPlan,
    now: Timestamp,
) -> Option<crate::status::Judgement> {
    let cron = valid.verify_schedule.as_ref()?;
    let last = plan.record.as_ref().or_else(|| {
        cluster
            .status
            .as_ref()
            .and_then(|s| s.last_restore_verification.as_ref())
    });
    Some(crate::rehearsal::condition(
        cron,
        last,
        declared(cluster, now),
        now,
    ))
}

/// When the cluster was declared (its creation), the start of the
/// schedules' first period.
pub fn declared(cluster: &PostgresCluster, now: Timestamp) -> Timestamp {
    cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0)
}

/// Starts the rehearsal the plan asks for, or removes the finished one.
pub async fn apply(ctx: &Context, valid: &ValidatedCluster, plan: &Plan<'_>) -> Result<(), Error> {
    let decided = &plan.rehearsal;
    let name = pod_name(valid.name.as_str());
    if decided.remove {
        remove_one_shot(ctx, &valid.namespace, &name, WHAT).await?;
    }
    if decided.start {
        ctx.absent
            .creating(&absent_key(&valid.namespace, valid.name.as_str()));
        let pod = rehearsal_pod(valid, &ctx.config);
        create_one_shot(ctx, &valid.namespace, &rehearsal_pvc(valid), &pod, WHAT).await?;
    }
    Ok(())
}

/// What the rehearsal's objects are called in errors.
const WHAT: &str = "restore rehearsal";

/// Creates a one-shot pod's scratch volume, then the pod (`what` names
/// them in errors); either one already there is as wanted.
pub(super) async fn create_one_shot(
    ctx: &Context,
    namespace: &str,
    claim: &PersistentVolumeClaim,
    pod: &Pod,
    what: &str,
) -> Result<(), Error> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let post = PostParams::default();
    let created = claims.create(&post, claim).await.map(drop);
    settled(created, 409, || {
        format!("create the {what}'s volume {}", claim.name_any())
    })?;
    let created = pods.create(&post, pod).await.map(drop);
    settled(created, 409, || {
        format!("create the {what}'s pod {}", pod.name_any())
    })
}

/// Deletes the one-shot pod `name`, then its scratch volume of the same
/// name; either one already gone is as wanted.
pub(super) async fn remove_one_shot(
    ctx: &Context,
    namespace: &str,
    name: &str,
    what: &str,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let delete = DeleteParams::default();
    let deleted = pods.delete(name, &delete).await.map(drop);
    settled(deleted, 404, || format!("delete the {what}'s pod {name}"))?;
    let deleted = claims.delete(name, &delete).await.map(drop);
    settled(deleted, 404, || {
        format!("delete the {what}'s volume {name}")
    })
}

/// A request's outcome, where the API's `done` code (404 for a deletion,
/// 409 for a creation) means the object is already as wanted.
pub(super) fn settled(
    result: Result<(), kube::Error>,
    done: u16,
    action: impl FnOnce() -> String,
) -> Result<(), Error> {
    match result {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == done => Ok(()),
        Err(source) => Err(Error::Kube {
            action: action(),
            source,
        }),
    }
}
