//! One pass over one Deployment (`sync.go`, `rolling.go`, `recreate.go`):
//! find its ReplicaSets, make or find the one for the current template,
//! take one step of the strategy, drop ReplicaSets beyond the revision
//! history, and write the status.
//!
//! Each write is made against the cached object's resourceVersion, so a
//! decision taken on a stale cache fails with a conflict and is taken again
//! on the next pass instead of being applied twice.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use super::DeploymentError;
use super::hash::{self, LABEL};
use super::rollout::{self, Limits, Set};
use super::status::{self, Observed};

const REVISION: &str = "deployment.kubernetes.io/revision";

/// The Deployment, the cached pods and a client.
struct Context<'a> {
    client: &'a Client,
    deployment: &'a Deployment,
    pods: &'a [Arc<Pod>],
    namespace: String,
    name: String,
}

impl Context<'_> {
    fn error(&self, what: &'static str) -> impl Fn(kube::Error) -> DeploymentError + '_ {
        move |source| DeploymentError::Write {
            what,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    fn sets(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

fn is_controlled_by(rs: &ReplicaSet, uid: &str) -> bool {
    rs.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn template_of(rs: &ReplicaSet) -> Value {
    rs.spec
        .as_ref()
        .and_then(|s| serde_json::to_value(&s.template).ok())
        .unwrap_or(Value::Null)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn counted(rs: &ReplicaSet) -> Set {
    Set {
        replicas: spec_replicas(rs),
        available: rs
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0),
    }
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSet of `template` for the Deployment, with the hash label on
/// its selector, template and itself.
fn replica_set_for(
    deployment: &Deployment,
    template: &Value,
    pod_hash: &str,
    replicas: i32,
    revision: i64,
) -> Result<ReplicaSet, serde_json::Error> {
    let spec = deployment.spec.as_ref();
    let mut template = template.clone();
    template["metadata"]["labels"][LABEL] = json!(pod_hash);
    let mut selector = spec.map(|s| json!(s.selector)).unwrap_or(json!({}));
    selector["matchLabels"][LABEL] = json!(pod_hash);
    let mut labels = template["metadata"]["labels"].clone();
    labels[LABEL] = json!(pod_hash);
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("{}-{pod_hash}", deployment.name_any()),
            "namespace": deployment.namespace(),
            "labels": labels,
            "annotations": {REVISION: revision.to_string()},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "Deployment",
                "name": deployment.name_any(), "uid": deployment.uid(),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": replicas,
            "minReadySeconds": spec.and_then(|s| s.min_ready_seconds).unwrap_or(0),
            "selector": selector,
            "template": template,
        },
    }))
}

/// Sets a ReplicaSet's size, unless it has it already.
async fn scale(ctx: &Context<'_>, rs: &ReplicaSet, replicas: i32) -> Result<(), DeploymentError> {
    if spec_replicas(rs) == replicas {
        return Ok(());
    }
    let mut wanted = rs.clone();
    if let Some(spec) = wanted.spec.as_mut() {
        spec.replicas = Some(replicas);
    }
    ctx.sets()
        .replace(&rs.name_any(), &PostParams::default(), &wanted)
        .await
        .map_err(ctx.error("the ReplicaSet's size"))?;
    Ok(())
}

/// Creates the ReplicaSet for the current template. A name already taken
/// by this Deployment's ReplicaSet of the same template (the cache had not
/// seen it yet) is that ReplicaSet; taken by anything else, it is a hash
/// collision, counted in the status so the next hash differs.
async fn create_new(
    ctx: &Context<'_>,
    template: &Value,
    replicas: i32,
    revision: i64,
) -> Result<ReplicaSet, DeploymentError> {
    let collisions = ctx
        .deployment
        .status
        .as_ref()
        .and_then(|s| s.collision_count);
    let pod_hash = hash::pod_template_hash(template, collisions);
    let wanted = replica_set_for(ctx.deployment, template, &pod_hash, replicas, revision)
        .map_err(|e| ctx.error("a ReplicaSet")(kube::Error::SerdeError(e)))?;
    let api = ctx.sets();
    match api.create(&PostParams::default(), &wanted).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api
                .get(&wanted.name_any())
                .await
                .map_err(ctx.error("a ReplicaSet"))?;
            let ours = is_controlled_by(&existing, &ctx.deployment.uid().unwrap_or_default());
            if ours && hash::same_template(&template_of(&existing), template) {
                return Ok(existing);
            }
            let count = collisions.unwrap_or(0) + 1;
            let patch = json!({"status": {"collisionCount": count}});
            Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.namespace)
                .patch_status(&ctx.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(ctx.error("the collision count"))?;
            Err(ctx.error("a ReplicaSet")(kube::Error::Api(status)))
        }
        Err(error) => Err(ctx.error("a ReplicaSet")(error)),
    }
}

/// One RollingUpdate step: grow the new ReplicaSet within the surge; once
/// it is at its size for this step, shrink the old ones within the
/// unavailability budget.
async fn rolling(
    ctx: &Context<'_>,
    limits: Limits,
    template: &Value,
    new: Option<&ReplicaSet>,
    olds: &[&ReplicaSet],
    revision: i64,
) -> Result<Option<ReplicaSet>, DeploymentError> {
    let replicas = replicas_of(ctx.deployment);
    let old_sets: Vec<Set> = olds.iter().map(|rs| counted(rs)).collect();
    let Some(new) = new else {
        let size = rollout::new_replicas(
            replicas,
            limits,
            &Set {
                replicas: 0,
                available: 0,
            },
            &old_sets,
        );
        return create_new(ctx, template, size, revision).await.map(Some);
    };
    let new_set = counted(new);
    let size = rollout::new_replicas(replicas, limits, &new_set, &old_sets);
    if size != new_set.replicas {
        scale(ctx, new, size).await?;
        return Ok(None);
    }
    let sizes = rollout::old_replicas(replicas, limits, &new_set, &old_sets);
    for (rs, size) in olds.iter().zip(sizes) {
        scale(ctx, rs, size).await?;
    }
    Ok(None)
}

/// Whether a pod of one of `sets` has not finished, terminating ones
/// included (`oldPodsRunning`).
fn pods_running(pods: &[Arc<Pod>], sets: &[&ReplicaSet]) -> bool {
    pods.iter().any(|pod| {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        !matches!(phase, Some("Succeeded" | "Failed"))
            && sets.iter().any(|rs| is_controlled_by_pod(pod, rs))
    })
}

fn is_controlled_by_pod(pod: &Pod, rs: &ReplicaSet) -> bool {
    let uid = rs.uid().unwrap_or_default();
    pod.namespace() == rs.namespace()
        && pod
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// One Recreate step: every old pod is gone (terminating ones too) before
/// the new ReplicaSet is made or grown.
async fn recreate(
    ctx: &Context<'_>,
    template: &Value,
    new: Option<&ReplicaSet>,
    olds: &[&ReplicaSet],
    revision: i64,
) -> Result<Option<ReplicaSet>, DeploymentError> {
    let mut waiting = false;
    for rs in olds {
        scale(ctx, rs, 0).await?;
        waiting |= rs.status.as_ref().is_some_and(|s| s.replicas > 0) || spec_replicas(rs) > 0;
    }
    waiting |= pods_running(ctx.pods, olds);
    if waiting {
        return Ok(None);
    }
    let replicas = replicas_of(ctx.deployment);
    match new {
        Some(new) => scale(ctx, new, replicas).await.map(|()| None),
        None => create_new(ctx, template, replicas, revision)
            .await
            .map(Some),
    }
}

fn replicas_of(deployment: &Deployment) -> i32 {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
}

/// Deletes the oldest scaled-down ReplicaSets beyond
/// `revisionHistoryLimit`.
async fn clean_history(ctx: &Context<'_>, olds: &[&ReplicaSet]) -> Result<(), DeploymentError> {
    let limit = ctx
        .deployment
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    let idle: Vec<&&ReplicaSet> = olds
        .iter()
        .filter(|rs| spec_replicas(rs) == 0 && rs.status.as_ref().is_none_or(|s| s.replicas == 0))
        .collect();
    let excess = idle
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    for rs in idle.into_iter().take(excess) {
        match ctx
            .sets()
            .delete(&rs.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(ctx.error("the revision history")(error)),
        }
    }
    Ok(())
}

/// Records the new ReplicaSet's revision on the Deployment, as `kubectl
/// rollout history` expects.
async fn record_revision(ctx: &Context<'_>, new: &ReplicaSet) -> Result<(), DeploymentError> {
    let revision = revision(new).to_string();
    if ctx.deployment.annotations().get(REVISION) == Some(&revision) {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {REVISION: revision}}});
    Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch(&ctx.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(ctx.error("the revision annotation"))?;
    Ok(())
}

/// Writes the status if it changed (a merge patch: the revision
/// annotation may have just changed the resourceVersion).
async fn write_status(ctx: &Context<'_>, observed: &Observed<'_>) -> Result<(), DeploymentError> {
    let wanted = status::status(ctx.deployment, observed);
    if ctx.deployment.status.as_ref() == Some(&wanted) {
        return Ok(());
    }
    let patch = json!({"status": wanted});
    Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.namespace)
        .patch_status(&ctx.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(ctx.error("the status"))?;
    Ok(())
}

/// One pass over one Deployment.
pub async fn sync(
    client: &Client,
    deployment: &Deployment,
    sets: &[Arc<ReplicaSet>],
    pods: &[Arc<Pod>],
) -> Result<(), DeploymentError> {
    if deployment.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let ctx = Context {
        client,
        deployment,
        pods,
        namespace: deployment.namespace().unwrap_or_default(),
        name: deployment.name_any(),
    };
    let uid = deployment.uid().unwrap_or_default();
    let mut owned: Vec<&ReplicaSet> = sets
        .iter()
        .map(AsRef::as_ref)
        .filter(|rs| rs.namespace() == deployment.namespace() && is_controlled_by(rs, &uid))
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    owned.sort_by_key(|rs| (rs.creation_timestamp().map(|t| t.0), rs.name_any()));
    let spec = deployment.spec.as_ref();
    let template = spec
        .and_then(|s| serde_json::to_value(&s.template).ok())
        .unwrap_or(Value::Null);
    let new = owned
        .iter()
        .copied()
        .find(|rs| hash::same_template(&template_of(rs), &template));
    let olds: Vec<&ReplicaSet> = owned
        .iter()
        .copied()
        .filter(|rs| Some(*rs) != new)
        .collect();
    let next_revision = owned.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
    let strategy = spec.and_then(|s| s.strategy.as_ref());
    let recreating = strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let limits = if recreating {
        Limits {
            max_surge: 0,
            max_unavailable: 0,
        }
    } else {
        let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
        rollout::limits(
            replicas_of(deployment),
            rolling.and_then(|r| r.max_surge.as_ref()),
            rolling.and_then(|r| r.max_unavailable.as_ref()),
        )
        .map_err(|message| DeploymentError::Invalid {
            namespace: ctx.namespace.clone(),
            name: ctx.name.clone(),
            message,
        })?
    };
    let paused = spec.and_then(|s| s.paused).unwrap_or(false);
    let created = match (paused, recreating) {
        (true, _) => None,
        (false, true) => recreate(&ctx, &template, new, &olds, next_revision).await?,
        (false, false) => rolling(&ctx, limits, &template, new, &olds, next_revision).await?,
    };
    let new = created.as_ref().or(new);
    if let Some(new) = new {
        record_revision(&ctx, new).await?;
    }
    clean_history(&ctx, &olds).await?;
    let mut all: Vec<&ReplicaSet> = olds.clone();
    all.extend(new);
    let observed = Observed {
        new,
        all: &all,
        max_unavailable: limits.max_unavailable,
        created_new: created.is_some(),
        now: jiff::Timestamp::now(),
    };
    write_status(&ctx, &observed).await
}
