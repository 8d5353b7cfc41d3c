//! `spec.roles`: the declared database roles' rules
//! ([`tusk_api::v1alpha1::role_problems`], shared with the instance
//! manager), checked here so that the controller, `tusk validate` and the
//! admission webhook refuse the same declarations, naming the field.

use tusk_api::v1alpha1::{PostgresClusterSpec, role_problems};
use tusk_postgres::roles::{DEFAULT_APP, REPLICATION, SUPERUSER};

use super::Bootstrap;
use crate::error::SpecError;

/// The first problem of `spec.roles`, if any: the cluster's own roles
/// (the superuser, the replication role, the application owner) and
/// PostgreSQL's reserved names cannot be declared, nor a superuser.
pub fn check(spec: &PostgresClusterSpec, bootstrap: &Bootstrap) -> Result<(), SpecError> {
    let owner = match bootstrap {
        Bootstrap::Initdb(initdb) => initdb.owner.as_str(),
        Bootstrap::Recovery(_) => DEFAULT_APP,
    };
    match role_problems(&spec.roles, &[SUPERUSER, REPLICATION, owner]).first() {
        Some(problem) => Err(SpecError {
            field: problem.field.clone(),
            rule: problem.rule.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::OperatorConfig;
    use crate::validate::tests::cluster;
    use crate::validate::validate;

    fn refusal(roles: serde_json::Value) -> Option<(String, String)> {
        let spec = serde_json::json!({
            "instances": 1, "postgres": {"version": 16}, "storage": {"size": "1Gi"},
            "bootstrap": {"initdb": {"database": "shop", "owner": "shopkeeper"}},
            "roles": roles,
        });
        validate(&cluster(spec), &OperatorConfig::default())
            .err()
            .map(|e| (e.field, e.rule))
    }

    #[test]
    fn the_cluster_s_own_and_reserved_roles_are_refused_by_field() {
        for name in [
            "postgres",
            "streaming_replica",
            "shopkeeper",
            "pg_signal_backend",
        ] {
            let (field, _) = refusal(serde_json::json!([{"name": "web"}, {"name": name}]))
                .unwrap_or_else(|| panic!("{name} accepted"));
            assert_eq!(field, "spec.roles[1].name");
        }
    }

    #[test]
    fn a_superuser_is_refused_and_an_application_role_accepted() {
        let (field, rule) =
            refusal(serde_json::json!([{"name": "boss", "superuser": true}])).expect("refused");
        assert_eq!(field, "spec.roles[0].superuser");
        assert!(rule.contains("superuser"), "{rule}");
        assert_eq!(
            refusal(serde_json::json!([{"name": "web", "login": true,
                "inRoles": ["pg_read_all_data"], "validUntil": "2030-01-01T00:00:00Z"}])),
            None
        );
    }
}
