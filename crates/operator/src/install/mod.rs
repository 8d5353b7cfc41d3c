//! How the operator itself is installed: its namespace, ServiceAccount,
//! least-privilege RBAC, Deployment and metrics Service. Pure builders, like
//! the cluster's children; `tusk install --print` renders them (with the
//! CRDs) as `deploy/install.yaml`, which a test keeps in line.

mod deployment;
mod images;
mod rbac;

pub use deployment::{deployment, metrics_service, namespace};
pub use images::{
    OPERATOR_REPOSITORY, POSTGRES_REPOSITORY, operator_image, postgres_image_template,
};
pub use rbac::{
    Rule, cluster_role, cluster_role_binding, leader_role, leader_role_binding, leader_rules,
    operator_rules, service_account,
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
