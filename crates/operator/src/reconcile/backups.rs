//! Apply, for base backups: each PostgresBackup's new status (merge patch
//! on the status subresource), and the PostgresBackup the schedule asks
//! for (created once under its slot's name, owned by the cluster so that
//! deleting the cluster deletes these objects, never repository data).

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tusk_api::v1alpha1::{BackupTarget, PostgresBackup, PostgresBackupSpec};

use super::Plan;
use crate::context::Context;
use crate::error::Error;
use crate::validate::ValidatedCluster;

pub async fn apply(ctx: &Context, valid: &ValidatedCluster, plan: &Plan<'_>) -> Result<(), Error> {
    let api: Api<PostgresBackup> = Api::namespaced(ctx.client.clone(), &valid.namespace);
    if let Some(due) = &plan.backups.scheduled {
        let mut backup = PostgresBackup::new(
            &due.name,
            PostgresBackupSpec {
                cluster: valid.name.to_string(),
                target: BackupTarget::default(),
                backup_type: Default::default(),
            },
        );
        backup.metadata.namespace = Some(valid.namespace.clone());
        backup.metadata.owner_references = Some(vec![valid.owner.clone()]);
        backup.metadata.labels =
            Some([(tusk_api::labels::CLUSTER.to_owned(), valid.name.to_string())].into());
        match api.create(&PostParams::default(), &backup).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => {
                return Err(Error::Kube {
                    action: format!("create the scheduled PostgresBackup {}", due.name),
                    source,
                });
            }
        }
    }
    for (name, status) in plan.backups.decided.iter().flat_map(|b| &b.records) {
        let patch = json!({"status": status});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Deleted meanwhile: nothing to record it in.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(Error::Kube {
                    action: format!("record the status of PostgresBackup {name}"),
                    source,
                });
            }
        }
    }
    Ok(())
}
