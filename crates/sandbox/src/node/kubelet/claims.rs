//! Local volumes for PersistentVolumeClaims: the node's provisioner.
//!
//! Every claim gets a PersistentVolume `pvc-<claim uid>` backed by the
//! directory `<data dir>/volumes/pvc-<claim uid>`, bound both ways (claim
//! `spec.volumeName`, phase `Bound` on both). The directory is named after
//! the claim's uid, not the pod's, so it outlives pod re-creation and
//! sandbox restarts, and a new claim with an old name never sees old data.
//! Growing a claim's request updates its `status.capacity` (there is no
//! real quota to grow). Deleting a claim releases, then deletes its volume
//! and directory, as the `Delete` reclaim policy of dynamic provisioning
//! does.
//!
//! A bound claim carries the annotations kube-controller-manager's binder
//! writes (`pv.kubernetes.io/bind-completed`, `bound-by-controller`):
//! kube-scheduler counts a claim as bound only with them, and where this
//! provisioner runs against a real control plane, kube-up's
//! kube-controller-manager runs no binder of its own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::informer::Informer;

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("cannot prepare or remove the volume directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Api(#[from] kube::Error),
}

fn dir_error(path: &Path) -> impl FnOnce(std::io::Error) -> ClaimError {
    let path = path.to_owned();
    move |source| ClaimError::Dir { path, source }
}

const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

fn bind_completed(claim: &PersistentVolumeClaim) -> bool {
    claim.annotations().contains_key(BIND_COMPLETED)
}

/// The host directory of a sandbox volume.
pub fn volume_dir(data_dir: &Path, volume: &str) -> PathBuf {
    data_dir.join("volumes").join(volume)
}

fn request(claim: &PersistentVolumeClaim) -> Option<String> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

fn capacity(claim: &PersistentVolumeClaim) -> Option<String> {
    claim
        .status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .map(|q| q.0.clone())
}

async fn bind(
    client: &Client,
    data_dir: &Path,
    claim: &PersistentVolumeClaim,
) -> Result<(), ClaimError> {
    let namespace = claim.namespace().unwrap_or_default();
    let uid = claim.uid().unwrap_or_default();
    let name = claim.name_any();
    let volume = format!("pvc-{uid}");
    let size = request(claim).unwrap_or_else(|| "1Gi".into());
    let spec = claim.spec.clone().unwrap_or_default();
    let access_modes = spec
        .access_modes
        .clone()
        .unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
    let dir = volume_dir(data_dir, &volume);
    std::fs::create_dir_all(&dir).map_err(dir_error(&dir))?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    if volumes.get_opt(&volume).await?.is_none() {
        let pv: PersistentVolume = serde_json::from_value(json!({
            "metadata": {
                "name": volume,
                "annotations": {"pv.kubernetes.io/provisioned-by": "sandbox.tusk.dev/local"},
            },
            "spec": {
                "capacity": {"storage": size},
                "accessModes": access_modes,
                "hostPath": {"path": dir.to_string_lossy(), "type": "DirectoryOrCreate"},
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": spec.storage_class_name.clone().unwrap_or_default(),
                "volumeMode": "Filesystem",
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": namespace,
                    "name": name,
                    "uid": uid,
                },
            }
        }))
        .map_err(kube::Error::SerdeError)?;
        match volumes.create(&PostParams::default(), &pv).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    volumes
        .patch_status(
            &volume,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    if spec.volume_name.as_deref() != Some(volume.as_str()) || !bind_completed(claim) {
        let binding = json!({
            "metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"volumeName": volume},
        });
        claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(binding))
            .await?;
    }
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": "Bound",
                "accessModes": access_modes,
                "capacity": {"storage": size},
            }})),
        )
        .await?;
    Ok(())
}

async fn grow(
    client: &Client,
    claim: &PersistentVolumeClaim,
    size: &str,
) -> Result<(), ClaimError> {
    let namespace = claim.namespace().unwrap_or_default();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    if let Some(volume) = claim.spec.as_ref().and_then(|s| s.volume_name.clone()) {
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        volumes
            .patch(
                &volume,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"capacity": {"storage": size}}})),
            )
            .await?;
    }
    claims
        .patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": {"storage": size}}})),
        )
        .await?;
    Ok(())
}

async fn reclaim(
    client: &Client,
    data_dir: &Path,
    volume: &PersistentVolume,
) -> Result<(), ClaimError> {
    let name = volume.name_any();
    let dir = volume_dir(data_dir, &name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(dir_error(&dir))?;
    }
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    // Released first, as the binder marks a volume whose claim is gone:
    // kube-controller-manager's pv-protection keeps a Bound volume's
    // finalizer, and the deletion would wait for ever.
    let released = Patch::Merge(json!({"status": {"phase": "Released"}}));
    match volumes
        .patch_status(&name, &PatchParams::default(), &released)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    match volumes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile(
    client: &Client,
    data_dir: &Path,
    claims: &Informer<PersistentVolumeClaim>,
    volumes: &Informer<PersistentVolume>,
) -> Result<(), ClaimError> {
    let mut live = BTreeSet::new();
    for claim in claims.store.state() {
        live.insert(claim.uid().unwrap_or_default());
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
            && bind_completed(&claim)
            && claim
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_ref())
                .is_some();
        if !bound {
            bind(client, data_dir, &claim).await?;
        } else if let Some(size) = request(&claim)
            && capacity(&claim).as_deref() != Some(size.as_str())
        {
            grow(client, &claim, &size).await?;
        }
    }
    for volume in volumes.store.state() {
        let ours = volume
            .annotations()
            .get("pv.kubernetes.io/provisioned-by")
            .is_some_and(|p| p == "sandbox.tusk.dev/local");
        let claim_uid = volume
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|r| r.uid.clone());
        if ours && claim_uid.is_some_and(|uid| !live.contains(&uid)) {
            reclaim(client, data_dir, &volume).await?;
        }
    }
    Ok(())
}

/// Binds, grows and reclaims claims until the task is dropped.
pub async fn run(client: Client, data_dir: PathBuf) {
    let claims = Informer::start(Api::<PersistentVolumeClaim>::all(client.clone()));
    let volumes = Informer::start(Api::<PersistentVolume>::all(client.clone()));
    let (mut claim_changes, mut volume_changes) = (claims.changes.clone(), volumes.changes.clone());
    if claims.store.wait_until_ready().await.is_err()
        || volumes.store.wait_until_ready().await.is_err()
    {
        return;
    }
    loop {
        if let Err(error) = reconcile(&client, &data_dir, &claims, &volumes).await {
            tracing::warn!(%error, "cannot reconcile volume claims; retrying");
        }
        tokio::select! {
            _ = claim_changes.changed() => {}
            _ = volume_changes.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}
