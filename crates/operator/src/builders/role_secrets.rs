//! The password Secret Tusk generates for a declared login role that names
//! none (`<cluster>-role-<name>`): `username`, `password` and a `uri` an
//! application can use as it is. Created once, like the cluster's own
//! credentials: a later reconcile never regenerates the password.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use tusk_api::v1alpha1::{
    ROLE_PASSWORD_KEY, ROLE_URI_KEY, ROLE_USERNAME_KEY, RoleSpec, generated_secret_name,
};

use super::child_meta;
use crate::validate::{Bootstrap, ValidatedCluster};

/// The declared roles whose password Secret Tusk generates.
pub fn generated_roles(cluster: &ValidatedCluster) -> impl Iterator<Item = &RoleSpec> {
    cluster.roles.iter().filter(|r| r.generates_password())
}

/// The Secret of `role` with `password` (letters and digits, so the URI
/// needs no escaping).
pub fn role_secret(cluster: &ValidatedCluster, role: &RoleSpec, password: &str) -> Secret {
    let database = match &cluster.bootstrap {
        Bootstrap::Initdb(initdb) => initdb.database.as_str(),
        Bootstrap::Recovery(_) => tusk_postgres::roles::DEFAULT_APP,
    };
    let uri = format!(
        "postgresql://{}:{password}@{}.{}.svc:5432/{database}",
        role.name,
        cluster.name.rw_service(),
        cluster.namespace
    );
    Secret {
        metadata: child_meta(
            cluster,
            &generated_secret_name(cluster.name.as_str(), &role.name),
        ),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        string_data: Some(BTreeMap::from([
            (ROLE_USERNAME_KEY.to_owned(), role.name.clone()),
            (ROLE_PASSWORD_KEY.to_owned(), password.to_owned()),
            (ROLE_URI_KEY.to_owned(), uri),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::validated;

    #[test]
    fn a_login_role_without_a_secret_gets_one_with_a_connection_uri() {
        let cluster = validated(serde_json::json!({
            "instances": 1, "postgres": {"version": 16}, "storage": {"size": "1Gi"},
            "bootstrap": {"initdb": {"database": "shop", "owner": "shopkeeper"}},
            "roles": [
                {"name": "web_app", "login": true},
                {"name": "mine", "login": true, "passwordSecret": {"name": "my-secret"}},
                {"name": "readers"},
                {"name": "gone", "login": true, "ensure": "absent"}
            ]
        }));
        let generated: Vec<&str> = generated_roles(&cluster).map(|r| r.name.as_str()).collect();
        assert_eq!(generated, ["web_app"]);
        let secret = role_secret(&cluster, &cluster.roles[0], "pw123");
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-role-web-app"));
        let data = secret.string_data.expect("data");
        assert_eq!(data["username"], "web_app");
        assert_eq!(data["password"], "pw123");
        assert_eq!(
            data["uri"],
            "postgresql://web_app:pw123@orders-rw.shop.svc:5432/shop"
        );
        assert_eq!(
            secret.metadata.owner_references.expect("owned")[0].kind,
            "PostgresCluster"
        );
    }
}
