//! Wiring: the kube-runtime Controller for PostgresCluster, owning its
//! children, with bounded concurrency and graceful shutdown (R7, R10, R12).

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::runtime::Controller;
use kube::runtime::controller::Config;
use kube::runtime::watcher;
use tusk_api::labels;
use tusk_api::v1alpha1::PostgresCluster;

use crate::context::Context;
use crate::reconcile::{error_policy, reconcile};

/// Options of one controller run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconciles running at once (different clusters).
    pub concurrency: u16,
    /// Watch one namespace only (namespace-scoped mode, R17); all when `None`.
    pub namespace: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            concurrency: 4,
            namespace: None,
        }
    }
}

/// Runs the controller until `shutdown` completes; in-flight reconciles
/// finish first.
pub async fn run(
    ctx: Arc<Context>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let api = |client: kube::Client| -> Api<PostgresCluster> {
        match &options.namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    };
    let children = watcher::Config::default().labels(labels::CLUSTER);
    macro_rules! owned {
        ($kind:ty) => {
            match &options.namespace {
                Some(ns) => Api::<$kind>::namespaced(client.clone(), ns),
                None => Api::<$kind>::all(client.clone()),
            }
        };
    }
    Controller::new(
        api(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .with_config(Config::default().concurrency(options.concurrency))
    .owns(owned!(Pod), children.clone())
    .owns(owned!(PersistentVolumeClaim), children.clone())
    .owns(owned!(Service), children.clone())
    .owns(owned!(Secret), children.clone())
    .owns(owned!(ServiceAccount), children.clone())
    .owns(owned!(Role), children.clone())
    .owns(owned!(RoleBinding), children.clone())
    .owns(owned!(PodDisruptionBudget), children)
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::debug!(%error, "controller event");
        }
    })
    .await;
}
