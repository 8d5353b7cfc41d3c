//! Declared roles on a real control plane: kube-up's kube-apiserver,
//! kube-controller-manager and kube-scheduler (v1.36, from the shared
//! Kubernetes folder) with the sandbox's node joined (Docker runtime) and
//! Tusk installed from `deploy/install.yaml`. What the sandbox could get
//! wrong is checked against the real thing: the CRD's `spec.roles`
//! schema is accepted; the installed operator, which holds `list` but not
//! `get` on Secrets, may grant its instances a Role that lists exactly
//! the declared password Secrets (kube-apiserver refuses a Role granting
//! more than its maker holds); and the primary's manager reads them with
//! a `metadata.name` field selector, which kube-apiserver authorises by
//! that name. A role logs in with the password Tusk generated.
//!
//! Where the shared folder is absent the test says so and returns.

mod common;
#[path = "referee/node.rs"]
mod node;
// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Api;
use kube::api::PostParams;
use node::Joined;
use serde_json::json;
use tusk_api::v1alpha1::{PostgresCluster, RoleState};
use tusk_sandbox::testing::wait_for;

const CLUSTER: &str = "roles";

#[tokio::test(flavor = "multi_thread")]
async fn declared_roles_on_kube_apiserver_log_in_with_generated_passwords() {
    let Some(joined) = Joined::start().await else {
        return;
    };
    let cluster: PostgresCluster = serde_json::from_value(json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": CLUSTER, "namespace": "default"},
        "spec": {"instances": 1,
                 "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                 "storage": {"size": "1Gi"},
                 "roles": [{"name": "readers"},
                           {"name": "web", "login": true, "inRoles": ["readers"]}]},
    }))
    .expect("a cluster");
    let clusters = Api::<PostgresCluster>::namespaced(joined.client.clone(), "default");
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .expect("kube-apiserver accepts spec.roles");
    joined
        .wait_ready(CLUSTER, 1, Duration::from_secs(300))
        .await;
    wait_for(
        "both roles Reconciled",
        Duration::from_secs(120),
        || async {
            let roles = clusters
                .get(CLUSTER)
                .await
                .ok()
                .and_then(|c| c.status)
                .map(|s| s.roles)
                .unwrap_or_default();
            roles.len() == 2 && roles.iter().all(|r| r.state == RoleState::Reconciled)
        },
    )
    .await;

    let secret = Api::<Secret>::namespaced(joined.client.clone(), "default")
        .get("roles-role-web")
        .await
        .expect("the generated Secret");
    let password = common::tls::text(&secret, "password");
    let ip = Api::<Service>::namespaced(joined.client.clone(), "default")
        .get("roles-rw")
        .await
        .expect("the -rw Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    let conninfo =
        format!("host={ip} port=5432 user=web password={password} dbname=app connect_timeout=5");
    let (web, connection) = tokio_postgres::connect(&conninfo, common::tls::encrypted())
        .await
        .expect("web logs in with its generated password");
    tokio::spawn(connection);
    let member: bool = web
        .query_one("SELECT pg_has_role('web', 'readers', 'MEMBER')", &[])
        .await
        .expect("membership")
        .get(0);
    assert!(member);
}
