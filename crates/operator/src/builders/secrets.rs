//! Credentials: one `kubernetes.io/basic-auth` Secret per database user.
//!
//! The password is an input: it is generated once, when the Secret does not
//! exist, and a later reconcile never regenerates it (the apply step only
//! creates missing Secrets).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

use super::child_meta;
use crate::validate::{Bootstrap, ValidatedCluster};

pub use tusk_api::contract::Credential;
use tusk_api::contract::{NamedCluster, PASSWORD_KEY, USERNAME_KEY};

impl NamedCluster for ValidatedCluster {
    fn cluster_name(&self) -> &str {
        self.name.as_str()
    }
}

/// The database user name of `credential`: the application owner is the
/// one `initdb` declares.
fn username(credential: Credential, cluster: &ValidatedCluster) -> String {
    match (credential.builtin_username(), &cluster.bootstrap) {
        (Some(builtin), _) => builtin.to_owned(),
        (None, Bootstrap::Initdb(initdb)) => initdb.owner.clone(),
        (None, Bootstrap::Recovery(_)) => tusk_postgres::roles::DEFAULT_APP.to_owned(),
    }
}

/// The Secret holding `credential` with `password`.
pub fn credentials_secret(
    cluster: &ValidatedCluster,
    credential: Credential,
    password: &str,
) -> Secret {
    Secret {
        metadata: child_meta(cluster, &credential.secret_name(cluster)),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        string_data: Some(BTreeMap::from([
            (USERNAME_KEY.to_owned(), username(credential, cluster)),
            (PASSWORD_KEY.to_owned(), password.to_owned()),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn each_user_gets_a_basic_auth_secret_owned_by_the_cluster() {
        let cluster = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
            "bootstrap": {"initdb": {"database": "shop", "owner": "shopkeeper"}}
        }));
        let secret = credentials_secret(&cluster, Credential::App, "pw");
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-app"));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/basic-auth"));
        let data = secret.string_data.expect("data");
        assert_eq!(data["username"], "shopkeeper");
        assert_eq!(data["password"], "pw");
        let owners = secret.metadata.owner_references.expect("owned");
        assert_eq!(owners[0].kind, "PostgresCluster");
        let names: Vec<String> = Credential::ALL
            .iter()
            .map(|c| c.secret_name(&cluster))
            .collect();
        assert_eq!(
            names,
            ["orders-superuser", "orders-app", "orders-replication"]
        );
        // The operator's names for its children agree with the contract's.
        assert_eq!(
            names,
            [
                cluster.name.superuser_secret(),
                cluster.name.app_secret(),
                cluster.name.replication_secret()
            ]
        );
    }
}
