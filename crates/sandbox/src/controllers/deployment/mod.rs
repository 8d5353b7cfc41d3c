//! The Deployment controller: each Deployment gets a ReplicaSet per pod
//! template, named `<deployment>-<pod-template-hash>` and owned by it
//! (controller reference, so deleting the Deployment cascades), and moves
//! pods from the old ReplicaSets to the new one by its strategy:
//! `RollingUpdate` within `maxSurge`/`maxUnavailable`, or `Recreate` (old
//! pods gone before new ones start). Its status is what `kubectl rollout
//! status` reads.
//!
//! Like kube-controller-manager's, it writes ReplicaSets and the
//! Deployment's status and never touches pods; the [`super::replicaset`]
//! controller does. It recomputes every Deployment whenever a Deployment or
//! ReplicaSet or pod changes (Recreate waits for old pods to be gone), and
//! every second for progress deadlines.

mod hash;
mod rollout;
mod status;
mod sync;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};

use crate::informer::Informer;

pub use hash::{LABEL as POD_TEMPLATE_HASH, pod_template_hash};

#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    #[error("cannot write {what} for Deployment {namespace}/{name}: {source}")]
    Write {
        what: &'static str,
        namespace: String,
        name: String,
        source: kube::Error,
    },
    #[error("Deployment {namespace}/{name} is invalid: {message}")]
    Invalid {
        namespace: String,
        name: String,
        message: String,
    },
}

/// Runs the controller until the task is dropped.
pub async fn run(client: Client) {
    let deployments = Informer::start(Api::<Deployment>::all(client.clone()));
    let replica_sets = Informer::start(Api::<ReplicaSet>::all(client.clone()));
    let pods = Informer::start(Api::<Pod>::all(client.clone()));
    let mut changes = [
        deployments.changes.clone(),
        replica_sets.changes.clone(),
        pods.changes.clone(),
    ];
    if deployments.store.wait_until_ready().await.is_err()
        || replica_sets.store.wait_until_ready().await.is_err()
        || pods.store.wait_until_ready().await.is_err()
    {
        return;
    }
    loop {
        let sets = replica_sets.store.state();
        let all_pods = pods.store.state();
        for deployment in deployments.store.state() {
            if let Err(error) = sync::sync(&client, &deployment, &sets, &all_pods).await {
                tracing::debug!(%error, "cannot sync deployment; retrying");
            }
        }
        let [a, b, c] = &mut changes;
        tokio::select! {
            _ = a.changed() => {}
            _ = b.changed() => {}
            _ = c.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
