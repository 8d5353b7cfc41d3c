//! How the operator itself is installed: its namespace, ServiceAccount,
//! least-privilege RBAC, Deployment and metrics Service, and the admission
//! webhook's Service, configuration and disruption budget. Pure builders, like
//! the cluster's children; `tusk install --print` renders them (with the
//! CRDs) as `deploy/install.yaml`, which a test keeps in line.

mod deployment;
mod images;
mod rbac;
mod webhook;

pub use deployment::{deployment, metrics_service, namespace};
pub use images::{
    OPERATOR_REPOSITORY, POSTGRES_REPOSITORY, operator_image, postgres_image_template,
};
pub use rbac::{
    Rule, cluster_role, cluster_role_binding, leader_role, leader_role_binding, leader_rules,
    operator_rules, service_account,
};
pub use webhook::{
    TIMEOUT_SECONDS as WEBHOOK_TIMEOUT_SECONDS, pod_disruption_budget,
    validating_webhook_configuration, webhook_service,
};

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The namespace the operator runs in.
pub const NAMESPACE: &str = "tusk-system";
/// Name of the operator's Deployment, ServiceAccount, ClusterRole and their
/// bindings.
pub const NAME: &str = "tusk-operator";
/// Port of `/metrics`, `/healthz` and `/readyz` (`tusk operator --http-address`).
pub const HTTP_PORT: i32 = 8080;

/// Labels of every installed object; the Deployment's pods are selected by
/// the first two.
pub fn install_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "tusk".to_owned()),
        (
            "app.kubernetes.io/component".to_owned(),
            "operator".to_owned(),
        ),
        (
            "app.kubernetes.io/version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ),
    ])
}

/// The labels the Deployment selects its pods by: fixed across versions,
/// since a Deployment's selector cannot change.
pub fn selector_labels() -> BTreeMap<String, String> {
    install_labels()
        .into_iter()
        .filter(|(key, _)| key != "app.kubernetes.io/version")
        .collect()
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(install_labels()),
        ..ObjectMeta::default()
    }
}

/// The objects that give the operator its identity and permissions, in the
/// order to apply them: namespace, ServiceAccount, ClusterRole and
/// binding, leader-election Role and binding (what deploy/install.yaml
/// holds besides the CRDs and the Deployment).
pub fn identity_manifests() -> Result<Vec<serde_json::Value>, serde_json::Error> {
    Ok(vec![
        serde_json::to_value(namespace())?,
        serde_json::to_value(service_account())?,
        serde_json::to_value(cluster_role())?,
        serde_json::to_value(cluster_role_binding())?,
        serde_json::to_value(leader_role())?,
        serde_json::to_value(leader_role_binding())?,
    ])
}

/// Every installed object but the CRDs, in the order to apply them: the
/// identity, then the Deployment and its metrics Service, then the
/// webhook's Service, budget and configuration (last: it sends
/// PostgresCluster writes to replicas that exist by then).
pub fn manifests() -> Result<Vec<serde_json::Value>, serde_json::Error> {
    let mut all = identity_manifests()?;
    all.push(serde_json::to_value(deployment())?);
    all.push(serde_json::to_value(metrics_service())?);
    all.extend(webhook_manifests()?);
    Ok(all)
}

/// The webhook's Service, PodDisruptionBudget and
/// ValidatingWebhookConfiguration.
pub fn webhook_manifests() -> Result<Vec<serde_json::Value>, serde_json::Error> {
    Ok(vec![
        serde_json::to_value(webhook_service())?,
        serde_json::to_value(pod_disruption_budget())?,
        serde_json::to_value(validating_webhook_configuration())?,
    ])
}

#[cfg(test)]
mod manifest_tests {
    #[test]
    fn manifests_carry_their_kinds_in_apply_order() {
        let kinds: Vec<String> = super::manifests()
            .expect("manifests")
            .iter()
            .map(|m| m["kind"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Deployment",
                "Service",
                "Service",
                "PodDisruptionBudget",
                "ValidatingWebhookConfiguration"
            ]
        );
    }
}
