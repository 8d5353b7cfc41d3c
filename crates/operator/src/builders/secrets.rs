//! Credentials: one `kubernetes.io/basic-auth` Secret per database user.
//!
//! The password is an input: it is generated once, when the Secret does not
//! exist, and a later reconcile never regenerates it (the apply step only
//! creates missing Secrets).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;

use super::child_meta;
use crate::validate::{Bootstrap, ValidatedCluster};

/// The database users a cluster has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential {
    /// `postgres`, for the instance manager's own work.
    Superuser,
    /// The application database's owner.
    App,
    /// `streaming_replica`, for replicas and pg_rewind.
    Replication,
}

impl Credential {
    pub const ALL: [Credential; 3] = [Self::Superuser, Self::App, Self::Replication];

    /// The Secret's name.
    pub fn secret_name(self, cluster: &ValidatedCluster) -> String {
        match self {
            Self::Superuser => cluster.name.superuser_secret(),
            Self::App => cluster.name.app_secret(),
            Self::Replication => cluster.name.replication_secret(),
        }
    }

    /// The database user name.
    pub fn username(self, cluster: &ValidatedCluster) -> String {
        match self {
            Self::Superuser => "postgres".to_owned(),
            Self::App => match &cluster.bootstrap {
                Bootstrap::Initdb(initdb) => initdb.owner.clone(),
                Bootstrap::Recovery(_) => "app".to_owned(),
            },
            Self::Replication => "streaming_replica".to_owned(),
        }
    }

    /// Directory name under the pod's secrets mount.
    pub fn mount_name(self) -> &'static str {
        match self {
            Self::Superuser => "superuser",
            Self::App => "app",
            Self::Replication => "replication",
        }
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
            ("username".to_owned(), credential.username(cluster)),
            ("password".to_owned(), password.to_owned()),
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
    }
}
