//! A kube-rs `Controller` with a finalizer, end to end: create ->
//! reconcile -> delete -> cleanup -> gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tusk_api::v1alpha1::PostgresCluster;

use crate::common::{TestSandbox, WAIT, eventually, install_tusk_crds};

const FINALIZER: &str = "test.tusk.dev/cleanup";

struct Context {
    client: Client,
    cleanups: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

async fn reconcile(
    cluster: Arc<PostgresCluster>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = cluster.namespace().unwrap_or_default();
    let clusters: Api<PostgresCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let ctx2 = ctx.clone();
    let status_api = clusters.clone();
    finalizer(&clusters, FINALIZER, cluster, |event| async move {
        match event {
            Event::Apply(cluster) => {
                let owner = cluster.controller_owner_ref(&()).expect("owner reference");
                let child = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{}-config", cluster.name_any()), "ownerReferences": [owner]},
                    "data": {"instances": cluster.spec.instances.to_string()}
                });
                let maps: Api<ConfigMap> = Api::namespaced(ctx2.client.clone(), &namespace);
                maps.patch(
                    &format!("{}-config", cluster.name_any()),
                    &PatchParams::apply("test-controller").force(),
                    &Patch::Apply(child),
                )
                .await?;
                let status = json!({"status": {"phase": "Ready"}});
                status_api
                    .patch_status(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(status))
                    .await?;
                Ok(Action::await_change())
            }
            Event::Cleanup(_) => {
                ctx2.cleanups.fetch_add(1, Ordering::SeqCst);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

fn error_policy(_: Arc<PostgresCluster>, _: &ReconcileError, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn a_controller_with_a_finalizer_runs_end_to_end() {
    let t = TestSandbox::start().await;
    install_tusk_crds(&t.client).await;
    let clusters: Api<PostgresCluster> = Api::default_namespaced(t.client.clone());
    let maps: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    let ctx = Arc::new(Context {
        client: t.client.clone(),
        cleanups: AtomicUsize::new(0),
    });
    let controller = tokio::spawn(
        Controller::new(clusters.clone(), watcher::Config::default())
            .owns(maps.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": "e2e"},
        "spec": {"instances": 2, "postgres": {"version": 16}, "storage": {"size": "1Gi"}}
    }))
    .expect("valid cluster");
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("created");
    let c = clusters.clone();
    eventually("the finalizer, the child and the status", WAIT, || {
        let c = c.clone();
        let maps = maps.clone();
        async move {
            let cluster = c.get("e2e").await.ok()?;
            let ready = cluster
                .status
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok())?["phase"]
                == "Ready";
            let child = maps.get_opt("e2e-config").await.ok()??;
            (cluster.finalizers().contains(&FINALIZER.to_owned())
                && ready
                && child.owner_references().len() == 1)
                .then_some(())
        }
    })
    .await;
    let writes_before = t.sandbox.faults().writes();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        t.sandbox.faults().writes(),
        writes_before,
        "a converged controller makes no writes"
    );
    clusters
        .delete("e2e", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let c = clusters.clone();
    eventually("the cluster to be gone", WAIT, || {
        let c = c.clone();
        async move { c.get_opt("e2e").await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert_eq!(ctx.cleanups.load(Ordering::SeqCst), 1, "cleanup ran once");
    let m = maps.clone();
    eventually("the child to be garbage collected", WAIT, || {
        let m = m.clone();
        async move { m.get_opt("e2e-config").await.ok()?.is_none().then_some(()) }
    })
    .await;
    controller.abort();
}
