//! One reconcile of one PostgresCluster: the pipeline of STYLE.md.
//!
//! fetch -> validate -> plan -> apply (fixed order) -> observe -> status.
//! Deletion goes through the finalizer's cleanup instead (R8, R16).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Resource, ResourceExt};
use rand::distr::{Alphanumeric, SampleString};
use serde_json::json;
use tracing::Instrument;
use tusk_api::instance::{InstanceReport, InstanceRole};
use tusk_api::labels;
use tusk_api::v1alpha1::{DeletionPolicy, PostgresCluster, PostgresClusterStatus};

use crate::apply::{FIELD_MANAGER, apply, create_once};
use crate::builders::{self, Credential};
use crate::children::{Children, named, not_ready_since, pod_ready};
use crate::cleanup;
use crate::context::Context;
use crate::error::Error;
use crate::failover::{self, Decision, FailoverCheck};
use crate::names::InstanceName;
use crate::observe::{poll_briefly, poll_instances};
use crate::plan::{InstancePlan, InstanceStep, ObservedInstance, plan_instances};
use crate::status::{self, StatusInput};
use crate::switchover::{self, Request};
use crate::validate::{ValidatedCluster, quantity_bytes, validate};

/// `lastFailover.reason` of a failover a person approved.
const APPROVED_FAILOVER: &str = "ApprovedFailover";

/// Finalizer guarding volumes and backups kept by `deletionPolicy: Retain`.
pub const FINALIZER: &str = "postgres.tusk.dev/cleanup";

/// How soon to look again while the cluster is still converging.
/// Child changes (a pod becoming ready) trigger reconciles through the
/// watches; this only bounds how stale the polled instance figures get.
const PROGRESS_REQUEUE: Duration = Duration::from_secs(10);
/// While a standby is being promoted.
const PROMOTING_REQUEUE: Duration = Duration::from_millis(250);
/// While the primary is unavailable and the failover delay runs.
const FAILING_REQUEUE: Duration = Duration::from_secs(1);
/// While the cache lags behind the operator's own last write.
const STALE_REQUEUE: Duration = Duration::from_millis(100);
/// Periodic resync of a converged cluster (R7).
const RESYNC: Duration = Duration::from_secs(60);

/// Entry point used by the controller.
pub async fn reconcile(
    guard: Arc<DeserializeGuard<PostgresCluster>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    match &guard.0 {
        Ok(cluster) => reconcile_cluster(Arc::new(cluster.clone()), ctx).await,
        Err(invalid) => {
            report_undecodable(invalid, &ctx).await;
            Ok(Action::await_change())
        }
    }
}

/// A cluster object that does not match this operator's types: nothing
/// can be done with it until it is fixed, so say so, on the object, once
/// per change of it.
async fn report_undecodable(invalid: &InvalidObject, ctx: &Context) {
    let meta = &invalid.metadata;
    let name = meta.name.clone().unwrap_or_default();
    tracing::warn!(cluster = %name, namespace = ?meta.namespace, error = %invalid.error, "cannot read the PostgresCluster");
    ctx.metrics.reconciled(
        Instant::now(),
        Some(crate::error::ErrorCategory::InvalidSpec),
    );
    let reference = ObjectReference {
        api_version: Some(PostgresCluster::api_version(&()).into_owned()),
        kind: Some(PostgresCluster::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    };
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidSpec".to_owned(),
        note: Some(format!(
            "this operator cannot read the object: {}",
            invalid.error
        )),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &reference).await {
        tracing::warn!(%error, "could not publish an event");
    }
}

async fn reconcile_cluster(
    cluster: Arc<PostgresCluster>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let key = retry_key(cluster.as_ref());
    if ctx
        .freshness
        .is_stale(&key, cluster.resource_version().as_deref())
    {
        // The cache has not yet seen our last write: acting now would
        // decide from the status before it.
        tracing::debug!(cluster = %key, version = ?cluster.resource_version(), "cluster not yet seen as last written; waiting");
        return Ok(Action::requeue(STALE_REQUEUE));
    }
    let started = Instant::now();
    let namespace = cluster.namespace().unwrap_or_default();
    let api: Api<PostgresCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, FINALIZER, cluster, |event| async {
        match event {
            Finalizer::Apply(cluster) => converge(&cluster, &ctx).await,
            Finalizer::Cleanup(cluster) => cleanup::run(&cluster, &ctx).await,
        }
    })
    .await
    .map_err(|error| match error {
        kube::runtime::finalizer::Error::ApplyFailed(inner)
        | kube::runtime::finalizer::Error::CleanupFailed(inner) => inner,
        kube::runtime::finalizer::Error::AddFinalizer(source)
        | kube::runtime::finalizer::Error::RemoveFinalizer(source) => Error::Kube {
            action: "update the finalizer".to_owned(),
            source,
        },
        other => Error::Finalizer(other.to_string()),
    });
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

/// The key the back-off counts failures under.
fn retry_key(cluster: &impl ResourceExt) -> String {
    format!(
        "{}/{}",
        cluster.namespace().unwrap_or_default(),
        cluster.name_any()
    )
}

/// Back-off by category (see [`crate::retry`]): permanent errors wait for
/// a spec change (the status already says what to fix), transient ones
/// retry after a delay that doubles with each failure in a row.
pub fn error_policy(
    cluster: Arc<DeserializeGuard<PostgresCluster>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let failures = ctx.failures.failed(&retry_key(cluster.as_ref()));
    let category = error.category();
    match crate::retry::delay(category, failures) {
        Some(delay) => {
            tracing::warn!(%error, category = category.reason(), failures, retry_in_seconds = delay.as_secs_f64(), "reconcile failed");
            Action::requeue(delay)
        }
        None => {
            tracing::warn!(%error, category = category.reason(), "reconcile failed; waiting for a change");
            Action::await_change()
        }
    }
}

async fn converge(cluster: &PostgresCluster, ctx: &Context) -> Result<Action, Error> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let span = tracing::info_span!("reconcile", cluster = %name, namespace = %namespace);
    converge_in_span(cluster, ctx, name, namespace)
        .instrument(span)
        .await
}

async fn converge_in_span(
    cluster: &PostgresCluster,
    ctx: &Context,
    name: String,
    namespace: String,
) -> Result<Action, Error> {
    let valid = match validate(cluster, &ctx.config) {
        Ok(valid) => valid,
        Err(error) => {
            let error = Error::from(error);
            let nothing = BTreeMap::new();
            report(
                cluster,
                ctx,
                &Children::default(),
                &nothing,
                None,
                None,
                Some(&error),
                &[],
                &FailoverCheck::default(),
            )
            .await?;
            return Err(error);
        }
    };
    let children = Children::fetch(&ctx.stores, &namespace, &name).await?;
    let previous = cluster.status.as_ref();
    let plan = plan_instances(
        &valid.name,
        valid.instances,
        &observe_instances(&valid, &children),
        previous.and_then(|s| s.target_primary.as_deref()),
        previous.map_or(0, |s| u32::try_from(s.latest_instance_serial).unwrap_or(0)),
    );

    let outcome = if valid.paused {
        Ok(())
    } else {
        apply_children(cluster, ctx, &valid, &children, &plan).await
    };
    let brief = poll_briefly(previous, &children.pods);
    let reports = poll_instances(&ctx.http, &children.pods, &brief, &ctx.metrics).await;
    let mut plan = plan;
    let mut failover = if valid.paused {
        FailoverCheck::default()
    } else {
        check_primary(cluster, ctx, &valid, &children, &reports, &mut plan).await
    };
    let switchover_request = cluster
        .annotations()
        .get(labels::PROMOTE)
        .filter(|_| !valid.paused)
        .cloned();
    if let Some(requested) = &switchover_request {
        request_switchover(cluster, ctx, requested, &reports, &mut plan, &mut failover).await;
    }
    if outcome.is_ok() && !valid.paused {
        label_roles(ctx, &valid, &children.pods, &reports, &plan).await?;
    }
    let failure = outcome.as_ref().err();
    let reported = report(
        cluster,
        ctx,
        &children,
        &reports,
        Some(&valid),
        Some(&plan),
        failure,
        &valid.unsupported,
        &failover,
    )
    .await?;
    // One-shot requests are removed once acted on, so they never fire
    // again later: a switchover request, and an approval of data loss
    // once a failover used it.
    let approval_used = failover
        .record
        .as_ref()
        .is_some_and(|r| r.reason == APPROVED_FAILOVER);
    let done: Vec<&str> = [
        switchover_request.as_ref().map(|_| labels::PROMOTE),
        approval_used.then_some(labels::APPROVE_DATA_LOSS),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !done.is_empty() {
        clear_annotations(cluster, ctx, &done, reported.version.as_deref()).await?;
    }
    let status = reported.status;
    outcome?;
    // A promotion under way: look again very soon, so the new primary is
    // recorded (and `-rw` follows it) as soon as it serves; a failing
    // primary: every second, so the failover starts when its delay ends.
    if status::promotion_under_way(&status) {
        return Ok(Action::requeue(PROMOTING_REQUEUE));
    }
    if failover.primary_available == Some(false) {
        // When the delay ends, not up to a second after.
        let wait = failover
            .delay_left
            .map_or(FAILING_REQUEUE, |left| left.min(FAILING_REQUEUE));
        return Ok(Action::requeue(wait.max(STALE_REQUEUE)));
    }
    let converged = status.phase == Some(tusk_api::v1alpha1::ClusterPhase::Ready)
        && plan.step == InstanceStep::Steady;
    Ok(Action::requeue(if converged {
        RESYNC
    } else {
        PROGRESS_REQUEUE
    }))
}

fn observe_instances(valid: &ValidatedCluster, children: &Children) -> Vec<ObservedInstance> {
    let mut observed: Vec<ObservedInstance> = Vec::new();
    let names = children
        .pods
        .iter()
        .map(|p| p.name_any())
        .chain(children.volumes.iter().map(|v| v.name_any()));
    for name in names {
        let Some(serial) = valid.name.serial_of(&name) else {
            continue;
        };
        if observed.iter().any(|o| o.serial == serial) {
            continue;
        }
        let pod = named(&children.pods, &name).filter(|p| p.metadata.deletion_timestamp.is_none());
        observed.push(ObservedInstance {
            name: valid.name.instance(serial),
            serial,
            has_pod: pod.is_some(),
            has_volume: named(&children.volumes, &name).is_some(),
            ready: pod.is_some_and(pod_ready),
        });
    }
    observed.sort_by_key(|o| o.serial);
    observed
}

/// Applies the children in a fixed order: credentials and identity first,
/// then Services and budgets, then volumes, then the instance step.
async fn apply_children(
    cluster: &PostgresCluster,
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    plan: &InstancePlan,
) -> Result<(), Error> {
    let client = &ctx.client;
    let ns = valid.namespace.as_str();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for credential in Credential::ALL {
        let name = credential.secret_name(valid);
        if named(&children.secrets, &name).is_none() {
            let password = Alphanumeric.sample_string(&mut rand::rng(), 32);
            let desired = builders::credentials_secret(valid, credential, &password);
            create_once(&secrets, None, &desired).await?;
        }
    }

    let account = builders::instance_service_account(valid);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    apply(
        &accounts,
        named(&children.service_accounts, &valid.name.instance_account()),
        &account,
    )
    .await?;
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    apply(
        &roles,
        named(&children.roles, &valid.name.instance_account()),
        &builders::instance_role(valid),
    )
    .await?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let binding = builders::instance_role_binding(valid);
    apply(
        &bindings,
        named(&children.role_bindings, &valid.name.instance_account()),
        &binding,
    )
    .await?;

    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    for service in [
        builders::rw_service(valid),
        builders::ro_service(valid),
        builders::r_service(valid),
    ] {
        let live = named(&children.services, &service.name_any());
        apply(&services, live, &service).await?;
    }

    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let primary_pdb = builders::primary_pdb(valid);
    apply(
        &pdbs,
        named(&children.pdbs, &primary_pdb.name_any()),
        &primary_pdb,
    )
    .await?;
    match builders::replicas_pdb(valid) {
        Some(pdb) => {
            apply(&pdbs, named(&children.pdbs, &pdb.name_any()), &pdb).await?;
        }
        None => {
            if named(&children.pdbs, &valid.name.replicas_pdb()).is_some() {
                delete(&pdbs, &valid.name.replicas_pdb()).await?;
            }
        }
    }

    grow_volumes(cluster, ctx, valid, children).await?;
    apply_instance_step(ctx, valid, children, plan).await
}

/// Storage may grow, never shrink (R26): a larger declared size patches
/// each claim; a smaller one is refused even if it got past admission.
async fn grow_volumes(
    _cluster: &PostgresCluster,
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for volume in &children.volumes {
        let Some(current) = volume
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
        else {
            continue;
        };
        let Some(current_bytes) = quantity_bytes(current) else {
            continue;
        };
        if valid.storage_bytes < current_bytes {
            return Err(Error::Refused(format!(
                "spec.storage.size: storage may grow but never shrink: volume {} has {}, the spec asks for {}",
                volume.name_any(),
                current.0,
                valid.storage_size.0
            )));
        }
        if valid.storage_bytes > current_bytes {
            let patch =
                json!({"spec": {"resources": {"requests": {"storage": valid.storage_size}}}});
            volumes
                .patch(
                    &volume.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .map_err(Error::kube(format!("grow volume {}", volume.name_any())))?;
        }
    }
    Ok(())
}

async fn apply_instance_step(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    plan: &InstancePlan,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    match &plan.step {
        InstanceStep::Steady | InstanceStep::WaitForReady(_) => Ok(()),
        InstanceStep::Create(instance) | InstanceStep::RecreatePod(instance) => {
            let pvc = builders::instance_pvc(valid, instance);
            if named(&children.volumes, instance.as_str()).is_none() {
                apply(&volumes, None, &pvc).await?;
            }
            let role = (instance == &plan.target_primary && children.pods.is_empty())
                .then_some(labels::role::PRIMARY);
            let pod = builders::instance_pod(valid, &ctx.config, instance, role);
            apply(&pods, None, &pod).await?;
            Ok(())
        }
        InstanceStep::Remove(instance) => {
            delete(&pods, instance.as_str()).await?;
            if valid.deletion_policy == DeletionPolicy::Delete {
                delete(&volumes, instance.as_str()).await?;
            } else {
                cleanup::retain_volume(&volumes, instance.as_str()).await?;
            }
            Ok(())
        }
    }
}

/// Keeps `tusk.dev/role` in line with what each instance reports, so the
/// Services select the right pods. An instance that did not answer keeps
/// its label (a missed poll must not take the primary out of `-rw`); only
/// the target primary reporting `primary` is labelled primary.
async fn label_roles(
    ctx: &Context,
    valid: &ValidatedCluster,
    pods: &[Pod],
    reports: &BTreeMap<String, InstanceReport>,
    plan: &InstancePlan,
) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for pod in pods {
        let name = pod.name_any();
        let is_target = InstanceName::recorded(&name) == plan.target_primary;
        let current = pod.labels().get(labels::ROLE).map(String::as_str);
        let wanted = match (reports.get(&name).map(|r| r.role), is_target) {
            (Some(InstanceRole::Primary), true) => Some(labels::role::PRIMARY),
            (Some(InstanceRole::Replica), _) => Some(labels::role::REPLICA),
            (Some(_), _) => None,
            // A missed poll keeps the label, except that only the target
            // primary may ever carry `primary`: a former primary leaves
            // `-rw` the moment another instance is chosen (fencing).
            (None, true) => current,
            (None, false) => current.filter(|c| *c != labels::role::PRIMARY),
        };
        if current != wanted {
            let patch = json!({"metadata": {"labels": {labels::ROLE: wanted}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!("label pod {name}")))?;
        }
    }
    Ok(())
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!("delete {} {name}", K::kind(&K::DynamicType::default())),
            source,
        }),
    }
}

/// Computes status, writes it if it changed, and publishes an Event for
/// each transition and failure (R22).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn report(
    cluster: &PostgresCluster,
    ctx: &Context,
    children: &Children,
    reports: &BTreeMap<String, InstanceReport>,
    valid: Option<&ValidatedCluster>,
    plan: Option<&InstancePlan>,
    failure: Option<&Error>,
    unsupported: &[String],
    failover: &FailoverCheck,
) -> Result<Reported, Error> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let previous = cluster.status.as_ref();
    let mut version = cluster.resource_version();
    let new = status::compose(&StatusInput {
        previous,
        generation: cluster.metadata.generation,
        declared: valid.map_or(0, |v| v.instances),
        pods: &children.pods,
        volumes: u32::try_from(children.volumes.len()).unwrap_or(u32::MAX),
        reports,
        target_primary: plan
            .map(|p| p.target_primary.to_string())
            .or_else(|| previous.and_then(|s| s.target_primary.clone())),
        latest_serial: plan.map_or_else(
            || previous.map_or(0, |s| u32::try_from(s.latest_instance_serial).unwrap_or(0)),
            |p| p.latest_serial,
        ),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        failure: failure.map(|e| (e.category(), e.to_string())),
        unsupported,
        primary_available: failover.primary_available,
        failover_blocked: failover.blocked.clone(),
        last_failover: failover.record.clone(),
        now: now.clone(),
    });
    let old_phase = previous.and_then(|s| s.phase);
    if let Some(to_write) = status::to_write(previous, new.clone(), &now) {
        let api: Api<PostgresCluster> =
            Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
        // The version the status was computed from is a precondition: a
        // status computed from an older cluster is refused (409), never
        // written over a newer decision (see `freshness`).
        let body = json!({
            "apiVersion": PostgresCluster::api_version(&()),
            "kind": PostgresCluster::kind(&()),
            "metadata": {"resourceVersion": version},
            "status": to_write,
        });
        let written = api
            .patch_status(
                &cluster.name_any(),
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(Error::kube("write status"))?;
        ctx.freshness
            .replaced(&retry_key(cluster), version.as_deref());
        version = written.resource_version();
        if old_phase != new.phase {
            publish(
                cluster,
                ctx,
                EventType::Normal,
                "PhaseChanged",
                &format!(
                    "phase {} -> {}",
                    old_phase.map_or("none", phase_name),
                    new.phase.map_or("none", phase_name)
                ),
            )
            .await;
        }
        if previous.and_then(|s| s.observed_generation) != cluster.metadata.generation
            && let Some(created) = cluster.metadata.creation_timestamp.as_ref()
        {
            // Approximation: time since creation for the first generation.
            if cluster.metadata.generation == Some(1) {
                let seconds = now.0.as_second() - created.0.as_second();
                ctx.metrics.generation_observed(seconds as f64);
            }
        }
        if let Some(error) = failure {
            publish(
                cluster,
                ctx,
                EventType::Warning,
                error.category().reason(),
                &error.to_string(),
            )
            .await;
        }
    }
    Ok(Reported {
        status: new,
        version,
    })
}

/// What [`report`] wrote.
pub(crate) struct Reported {
    pub status: PostgresClusterStatus,
    /// The cluster's resourceVersion after the write (or as read, when
    /// nothing changed).
    pub version: Option<String>,
}

fn phase_name(phase: tusk_api::v1alpha1::ClusterPhase) -> &'static str {
    use tusk_api::v1alpha1::ClusterPhase::*;
    match phase {
        Pending => "Pending",
        Provisioning => "Provisioning",
        Ready => "Ready",
        Degraded => "Degraded",
        Scaling => "Scaling",
        Upgrading => "Upgrading",
        Deleting => "Deleting",
    }
}

/// Publishes an Event on the cluster; a failure to publish is logged, not
/// fatal (events are for people, the status is the record).
pub async fn publish(
    cluster: &PostgresCluster,
    ctx: &Context,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note.to_owned()),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &cluster.object_ref(&())).await {
        tracing::warn!(%error, "could not publish an event");
    }
}

/// Watches the primary and, once it has been unavailable for
/// `spec.failover.delaySeconds`, chooses its replacement (R25). The time
/// it became unavailable is the `PrimaryAvailable` condition's transition
/// time, so a restarted operator keeps counting from the same moment.
async fn check_primary(
    cluster: &PostgresCluster,
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    reports: &BTreeMap<String, InstanceReport>,
    plan: &mut InstancePlan,
) -> FailoverCheck {
    let Some(previous) = cluster.status.as_ref() else {
        return FailoverCheck::default();
    };
    let target = plan.target_primary.to_string();
    // Only a primary that was serving can fail over; one that is still
    // being promoted or bootstrapped is not judged yet.
    if previous.current_primary.as_deref() != Some(target.as_str()) {
        return FailoverCheck::default();
    }
    let pod = named(&children.pods, &target).filter(|p| p.metadata.deletion_timestamp.is_none());
    if failover::primary_healthy(pod.is_some_and(pod_ready), reports.get(&target)) {
        return FailoverCheck {
            primary_available: Some(true),
            ..FailoverCheck::default()
        };
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let observed =
        tusk_api::conditions::find_condition(&previous.conditions, failover::PRIMARY_AVAILABLE)
            .filter(|c| c.status == "False")
            .map(|c| c.last_transition_time.0);
    // When a failover or switchover made it the primary (the record's time
    // is the moment it was first seen serving).
    let primary_since = status::choice_of_target(previous).map(|record| record.time.0);
    let since =
        failover::unavailable_since(observed, pod.and_then(not_ready_since), primary_since, now);
    let waited = now.duration_since(since).as_secs_f64();
    let unavailable = FailoverCheck {
        primary_available: Some(false),
        ..FailoverCheck::default()
    };
    if let Some(left) = failover::delay_left(since, now, valid.failover.delay_seconds) {
        return FailoverCheck {
            delay_left: Some(left),
            ..unavailable
        };
    }
    let last = previous.instances.iter().find(|i| i.name == target);
    let synchronous = valid.synchronous.as_ref().map(|sync| failover::SyncSet {
        quorum: sync.mode == tusk_api::v1alpha1::SynchronousMode::Any,
        number: sync.number,
        members: previous
            .instances
            .iter()
            .filter(|i| matches!(i.sync_state.as_deref(), Some("sync" | "quorum")))
            .map(|i| i.name.clone())
            .collect(),
    });
    let last_known = failover::LastKnown {
        primary: &target,
        lsn: last.and_then(|i| i.lsn.as_deref()),
        timeline: last.and_then(|i| i.timeline),
        synchronous,
    };
    let pairs: Vec<(&str, &InstanceReport)> =
        reports.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let approval = cluster
        .annotations()
        .get(labels::APPROVE_DATA_LOSS)
        .cloned();
    let decision = failover::decide(
        &last_known,
        &pairs,
        valid.failover.data_durability,
        approval.is_some(),
    );
    match decision {
        Decision::Promote {
            instance,
            lsn_gap_bytes,
            recovery_point,
        } => {
            if let Some(approved) = approval.as_deref()
                && approved != "true"
                && approved != instance
            {
                // The approval names another instance: do not guess.
                return FailoverCheck {
                    blocked: Some((instance, lsn_gap_bytes)),
                    ..unavailable
                };
            }
            let reason = if approval.is_some() {
                APPROVED_FAILOVER
            } else {
                "Failover"
            };
            let note = format!(
                "primary {target} unavailable for {waited:.0} s: promoting {instance} (possible loss: {lsn_gap_bytes} bytes of WAL)"
            );
            tracing::warn!(%note, "failover");
            publish(cluster, ctx, EventType::Warning, reason, &note).await;
            plan.target_primary = InstanceName::recorded(&instance);
            FailoverCheck {
                record: Some(tusk_api::v1alpha1::FailoverRecord {
                    time: Time(now),
                    from: target,
                    to: instance,
                    reason: reason.to_owned(),
                    lsn_gap_bytes: i64::try_from(lsn_gap_bytes).unwrap_or(i64::MAX),
                    recovery_point: Some(recovery_point),
                    duration_seconds: Some(waited),
                }),
                ..unavailable
            }
        }
        Decision::Blocked {
            best,
            lsn_gap_bytes,
        } => FailoverCheck {
            blocked: Some((best, lsn_gap_bytes)),
            ..unavailable
        },
        Decision::NoCandidate => unavailable,
    }
}

/// Acts on a `tusk.dev/promote` request (see [`switchover`]): moves the
/// target primary when the cluster can switch over safely now, and says
/// why not otherwise.
async fn request_switchover(
    cluster: &PostgresCluster,
    ctx: &Context,
    requested: &str,
    reports: &BTreeMap<String, InstanceReport>,
    plan: &mut InstancePlan,
    failover: &mut FailoverCheck,
) {
    let primary = plan.target_primary.to_string();
    let serving = failover.primary_available == Some(true) && failover.record.is_none();
    match switchover::evaluate(requested, &primary, serving, reports) {
        Request::Start { to } => {
            let note = format!(
                "switchover requested: {primary} shuts down cleanly, then {to} is promoted"
            );
            tracing::info!(%note, "switchover");
            publish(cluster, ctx, EventType::Normal, "Switchover", &note).await;
            plan.target_primary = InstanceName::recorded(&to);
            failover.record = Some(tusk_api::v1alpha1::FailoverRecord {
                time: Time(k8s_openapi::jiff::Timestamp::now()),
                from: primary,
                to,
                reason: "Switchover".to_owned(),
                lsn_gap_bytes: 0,
                recovery_point: None,
                duration_seconds: None,
            });
        }
        Request::Done => {}
        Request::Refuse { reason } => {
            let note = format!("switchover to {requested} refused: {reason}");
            tracing::warn!(%note, "switchover");
            publish(cluster, ctx, EventType::Warning, "SwitchoverRefused", &note).await;
        }
    }
}

/// Removes the annotations `keys` from the cluster.
async fn clear_annotations(
    cluster: &PostgresCluster,
    ctx: &Context,
    keys: &[&str],
    version: Option<&str>,
) -> Result<(), Error> {
    let api: Api<PostgresCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let annotations: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .map(|key| ((*key).to_owned(), serde_json::Value::Null))
        .collect();
    let patch = json!({"metadata": {"annotations": annotations}});
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::kube("remove a request annotation"))?;
    ctx.freshness.replaced(&retry_key(cluster), version);
    Ok(())
}
