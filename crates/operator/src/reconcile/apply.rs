//! Apply: carries a [`Plan`] out, in a fixed order (credentials,
//! certificates and identity, then Services and budgets, then volume resizes and owner
//! references ([`claims`]), then the instance step, then role labels), with server-side apply under the one
//! field manager `tusk-operator`, from the pure builders. A paused cluster
//! is left as it is.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Resource, ResourceExt};
use rand::distr::{Alphanumeric, SampleString};
use serde_json::json;
use tusk_api::labels;
use tusk_api::v1alpha1::{DeletionPolicy, PostgresCluster};

use super::Plan;
use super::claims;
use super::secrets::{cached_soon, foreign_secret, made_for};
use crate::apply::{Applied, FIELD_MANAGER, apply as apply_one, create_once};
use crate::builders::{self, Credential};
use crate::children::{Children, named};
use crate::cleanup;
use crate::context::Context;
use crate::error::Error;
use crate::freshness::cluster_key;
use crate::plan::InstanceStep;
use crate::validate::ValidatedCluster;

pub async fn apply(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    plan: &Plan<'_>,
) -> Result<(), Error> {
    if valid.paused {
        return Ok(());
    }
    let ns = valid.namespace.as_str();
    credentials(ctx, valid, children).await?;
    super::role_secrets::ensure(ctx, valid, children).await?;
    super::certificates::ensure(ctx, valid, children, &plan.certificates).await?;
    identity(ctx, valid, children).await?;
    services(ctx, valid, children).await?;
    budgets(ctx, valid, children).await?;
    network_policy(ctx, valid, children).await?;
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns);
    claims::resize(&volumes, valid, children, &plan.resizes).await?;
    claims::set_owners(&volumes, valid, &plan.owners).await?;
    instance_step(ctx, valid, children, plan).await?;
    label_roles(ctx, ns, plan).await
}

/// Secrets are created once: generated passwords are never regenerated.
/// Credentials Tusk did not create for this cluster are never used.
async fn credentials(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for credential in Credential::ALL {
        let name = credential.secret_name(valid);
        match named(&children.secrets, &name) {
            Some(live) if made_for(live, valid) => {}
            Some(_) => return Err(foreign_secret(valid, &name, "carries the cluster's label")),
            None => {
                let password = Alphanumeric.sample_string(&mut rand::rng(), 32);
                let desired = builders::credentials_secret(valid, credential, &password);
                if create_once(&secrets, None, &desired).await? == Applied::Existing
                    && !cached_soon(ctx, valid, &name).await
                {
                    return Err(foreign_secret(valid, &name, "exists"));
                }
            }
        }
    }
    Ok(())
}

/// The instances' ServiceAccount, Role and RoleBinding.
async fn identity(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let client = &ctx.client;
    let ns = valid.namespace.as_str();
    let account = valid.name.instance_account();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let desired = builders::instance_service_account(valid);
    apply_one(
        &accounts,
        named(&children.service_accounts, &account),
        &desired,
    )
    .await?;
    let roles: Api<Role> = Api::namespaced(client.clone(), ns);
    let desired = builders::instance_role(valid);
    apply_one(&roles, named(&children.roles, &account), &desired).await?;
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let desired = builders::instance_role_binding(valid);
    apply_one(
        &bindings,
        named(&children.role_bindings, &account),
        &desired,
    )
    .await?;
    Ok(())
}

async fn services(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    for service in [
        builders::rw_service(valid),
        builders::ro_service(valid),
        builders::r_service(valid),
    ] {
        let live = named(&children.services, &service.name_any());
        apply_one(&services, live, &service).await?;
    }
    Ok(())
}

/// The primary's disruption budget, and the replicas' while there are any.
async fn budgets(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let primary = builders::primary_pdb(valid);
    apply_one(&pdbs, named(&children.pdbs, &primary.name_any()), &primary).await?;
    match builders::replicas_pdb(valid) {
        Some(pdb) => {
            apply_one(&pdbs, named(&children.pdbs, &pdb.name_any()), &pdb).await?;
        }
        None => {
            if named(&children.pdbs, &valid.name.replicas_pdb()).is_some() {
                delete(&pdbs, &valid.name.replicas_pdb()).await?;
            }
        }
    }
    Ok(())
}

/// The NetworkPolicy `spec.networkPolicy` declares; the one made for the
/// cluster is deleted once the declaration is removed (never one the
/// cluster does not own).
async fn network_policy(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
) -> Result<(), Error> {
    let policies: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let live = named(&children.network_policies, valid.name.as_str());
    match builders::network_policy(valid) {
        Some(policy) => apply_one(&policies, live, &policy).await.map(|_| ()),
        None => match live {
            Some(live) if owned(valid, live) => delete(&policies, valid.name.as_str()).await,
            _ => Ok(()),
        },
    }
}

/// Whether `object` names the cluster as its owner.
fn owned(valid: &ValidatedCluster, object: &impl Resource) -> bool {
    object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == valid.owner.uid)
}

async fn instance_step(
    ctx: &Context,
    valid: &ValidatedCluster,
    children: &Children,
    plan: &Plan<'_>,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    let volumes: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    match &plan.instances.step {
        InstanceStep::Steady | InstanceStep::WaitForReady(_) => Ok(()),
        InstanceStep::Create(instance) | InstanceStep::RecreatePod(instance) => {
            claims::create(&volumes, valid, children, instance).await?;
            let pod = builders::instance_pod(valid, &ctx.config, instance, plan.new_pod_role);
            apply_one(&pods, None, &pod).await?;
            Ok(())
        }
        InstanceStep::ReplacePod(instance) => {
            delete_own(&pods, &children.pods, instance.as_str()).await
        }
        InstanceStep::Remove(instance) => {
            delete_own(&pods, &children.pods, instance.as_str()).await?;
            // The cluster's own claim only (made for its uid, not retained):
            // a claim of that name that is not is left alone.
            let Some(claim) = named(&children.volumes, instance.as_str()) else {
                return Ok(());
            };
            if valid.deletion_policy == DeletionPolicy::Delete {
                delete_own(&volumes, &children.volumes, instance.as_str()).await
            } else {
                cleanup::retain_volume(&volumes, claim, &valid.owner.uid).await
            }
        }
    }
}

/// Deletes `name` if it is among `own` (the cluster's children as
/// fetched), on the precondition that it is still that very object (its
/// uid): an object made again under that name meanwhile is not deleted.
async fn delete_own<K>(api: &Api<K>, own: &[K], name: &str) -> Result<(), Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let Some(object) = named(own, name) else {
        return Ok(());
    };
    let params = DeleteParams {
        preconditions: object.meta().uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Gone, or another object now has the name.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!("delete {} {name}", K::kind(&K::DynamicType::default())),
            source,
        }),
    }
}

/// Role labels are patched, not applied: applying a partial pod would
/// give up the operator's ownership of the rest of it.
async fn label_roles(ctx: &Context, namespace: &str, plan: &Plan<'_>) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    for change in &plan.roles {
        let patch = json!({"metadata": {"labels": {labels::ROLE: change.role}}});
        api.patch(&change.pod, &update_params(), &Patch::Merge(&patch))
            .await
            .map_err(Error::kube(format!("label pod {}", change.pod)))?;
    }
    Ok(())
}

/// Removes the request annotations `keys` from the cluster, once the
/// status (at resourceVersion `version`) records what they asked for.
pub async fn clear_requests(
    cluster: &PostgresCluster,
    ctx: &Context,
    keys: &[&str],
    version: Option<&str>,
) -> Result<(), Error> {
    if keys.is_empty() {
        return Ok(());
    }
    let api: Api<PostgresCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let annotations: serde_json::Map<String, serde_json::Value> = keys
        .iter()
        .map(|key| ((*key).to_owned(), serde_json::Value::Null))
        .collect();
    let patch = json!({"metadata": {"annotations": annotations}});
    let written = api
        .patch(&cluster.name_any(), &update_params(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube("remove a request annotation"))?;
    ctx.freshness.replaced(
        &cluster_key(cluster),
        version,
        written.resource_version().as_deref(),
    );
    Ok(())
}

/// A patch under the operator's field manager.
fn update_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
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
