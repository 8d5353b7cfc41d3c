//! The operator under its own ClusterRole (deploy/install.yaml's),
//! authenticated as `tusk-system/tusk-operator`: a permission the
//! reconcile needs, taken away, is reported on the cluster (a `Forbidden`
//! condition and Warning event with the API server's message) instead of a
//! silent hang, and the cluster converges once it is given back.

use k8s_openapi::api::rbac::v1::ClusterRole;
use tusk_operator::install;

use crate::support::*;

/// Applies the operator's namespace, ServiceAccount and RBAC as
/// deploy/install.yaml has them, and returns a client authenticated as
/// the operator's ServiceAccount.
pub async fn operator_identity(t: &TestSandbox) -> Client {
    let documents = install::identity_manifests().expect("install objects");
    tusk_sandbox::converge::apply(&t.client, &documents)
        .await
        .expect("the install objects apply");
    testing::client_for_service_account(&t.sandbox, install::NAMESPACE, install::NAME).await
}

/// The ClusterRole without `create` and `patch` on Services: the
/// operator can still watch Services but not server-side apply them.
fn without_service_writes() -> ClusterRole {
    let mut role = install::cluster_role();
    for rule in role.rules.iter_mut().flatten() {
        if rule
            .resources
            .as_ref()
            .is_some_and(|r| r.iter().any(|r| r == "services"))
        {
            rule.verbs.retain(|v| v != "create" && v != "patch");
        }
    }
    role
}

async fn put_role(client: &Client, role: &ClusterRole) {
    let api: Api<ClusterRole> = Api::all(client.clone());
    let mut role = role.clone();
    role.metadata.managed_fields = None;
    api.patch(
        install::NAME,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&role),
    )
    .await
    .expect("the ClusterRole is written");
}

#[tokio::test]
async fn a_missing_permission_is_reported_as_forbidden_and_recovers() {
    let t = sandbox(true).await;
    let operator_client = operator_identity(&t).await;
    put_role(&t.client, &without_service_writes()).await;
    let operator = Operator::start(&operator_client, None);
    create(&t.client, "orders", small()).await;
    let (status, _, message) = testing::eventually("a Forbidden condition", WAIT, || async {
        condition(&t.client, "orders", "Degraded")
            .await
            .filter(|(_, reason, _)| reason == "Forbidden")
    })
    .await;
    assert_eq!(status, "True");
    assert!(
        message.contains("system:serviceaccount:tusk-system:tusk-operator")
            && message.contains("services")
            && message.contains("forbidden"),
        "the API server's message names who may not do what: {message}"
    );
    let (ready, ready_reason, _) = condition(&t.client, "orders", "Ready")
        .await
        .expect("Ready");
    assert_eq!(
        (ready.as_str(), ready_reason.as_str()),
        ("False", "Forbidden")
    );
    testing::wait_for("a Forbidden Warning event", WAIT, || async {
        events_of(&t.client, "orders")
            .await
            .iter()
            .any(|(reason, note)| reason == "Forbidden" && note.contains("services"))
    })
    .await;
    put_role(&t.client, &install::cluster_role()).await;
    // Back-off may have grown to a few seconds by now.
    testing::wait_for(
        "the Services once allowed",
        Duration::from_secs(60),
        || async {
            get::<Service>(&t.client, "orders-rw").await.is_some()
                && condition(&t.client, "orders", "Degraded")
                    .await
                    .is_some_and(|(status, _, _)| status == "False")
        },
    )
    .await;
    operator.stop().await;
}
