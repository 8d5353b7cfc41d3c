//! What one declared role needs, from what PostgreSQL holds of it: pure,
//! and empty when the role is as declared (a converged cluster makes no
//! write). Only declared roles are ever looked at, so a role nobody
//! declared is never altered or dropped.

use std::collections::BTreeSet;

use tusk_api::v1alpha1::Ensure;

use super::scram;
use super::statement::{Attributes, Statement};
use super::{DeclaredRole, RolePassword};

/// A role as `pg_authid` and `pg_auth_members` hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub attributes: Attributes,
    /// Attributes a declared role never has.
    pub superuser: bool,
    pub replication: bool,
    pub bypassrls: bool,
    /// `rolpassword`: a verifier, never shown.
    pub verifier: Option<Verifier>,
    /// Carries Tusk's comment.
    pub marked: bool,
    /// The roles it is a member of.
    pub member_of: BTreeSet<String>,
}

/// A stored password verifier; `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier(pub String);

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(<redacted>)")
    }
}

/// What one pass does for one role.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RolePlan {
    pub statements: Vec<Statement>,
    /// Set the password read from the role's Secret.
    pub set_password: bool,
    /// Why the role cannot be brought fully to its declaration (its
    /// Secret cannot be read): the rest is still done.
    pub problem: Option<String>,
}

impl RolePlan {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty() && !self.set_password
    }
}

/// The declared attributes, or why they cannot be read.
pub fn declared_attributes(role: &DeclaredRole) -> Result<Attributes, String> {
    let spec = &role.spec;
    let valid_until = match &spec.valid_until {
        None => None,
        Some(text) => Some(
            text.parse::<jiff::Timestamp>()
                .map_err(|error| format!("validUntil {text:?}: {error}"))?
                .as_second(),
        ),
    };
    Ok(Attributes {
        login: spec.login,
        createdb: spec.createdb,
        createrole: spec.createrole,
        inherit: spec.inherit,
        connection_limit: spec.connection_limit,
        valid_until,
    })
}

/// The plan for `role`, which PostgreSQL holds as `observed` (`None`:
/// no such role).
pub fn decide(role: &DeclaredRole, observed: Option<&Observed>) -> RolePlan {
    let name = role.spec.name.clone();
    if role.spec.ensure == Ensure::Absent {
        return RolePlan {
            statements: observed
                .map(|_| Statement::Drop(name))
                .into_iter()
                .collect(),
            ..RolePlan::default()
        };
    }
    let attributes = match declared_attributes(role) {
        Ok(attributes) => attributes,
        Err(problem) => {
            return RolePlan {
                problem: Some(problem),
                ..RolePlan::default()
            };
        }
    };
    let mut plan = RolePlan::default();
    let held = BTreeSet::new();
    let member_of = match observed {
        None => {
            plan.statements
                .push(Statement::Create(name.clone(), attributes));
            plan.statements.push(Statement::Mark(name.clone()));
            &held
        }
        Some(observed) => {
            let exact = observed.attributes == attributes
                && !observed.superuser
                && !observed.replication
                && !observed.bypassrls;
            if !exact {
                plan.statements
                    .push(Statement::Alter(name.clone(), attributes));
            }
            if !observed.marked {
                plan.statements.push(Statement::Mark(name.clone()));
            }
            &observed.member_of
        }
    };
    let wanted: BTreeSet<&String> = role.spec.in_roles.iter().collect();
    for missing in wanted.iter().filter(|r| !member_of.contains(**r)) {
        plan.statements.push(Statement::Grant {
            role: name.clone(),
            member_of: (*missing).clone(),
        });
    }
    for extra in member_of.iter().filter(|r| !wanted.contains(r)) {
        plan.statements.push(Statement::Revoke {
            role: name.clone(),
            member_of: extra.clone(),
        });
    }
    match &role.password {
        RolePassword::None => {}
        RolePassword::Unreadable(problem) => plan.problem = Some(problem.clone()),
        RolePassword::Known(password) => {
            let stored = observed.and_then(|o| o.verifier.as_ref());
            plan.set_password = !stored.is_some_and(|v| scram::verifies(&v.0, password.expose()));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passwords::scram_verifier;
    use crate::settings::Password;
    use tusk_api::v1alpha1::RoleSpec;

    fn declared(password: RolePassword) -> DeclaredRole {
        DeclaredRole {
            spec: RoleSpec {
                login: true,
                connection_limit: 5,
                in_roles: vec!["readers".into()],
                ..RoleSpec::named("web")
            },
            password,
        }
    }

    fn as_declared(role: &DeclaredRole, verifier: &str) -> Observed {
        Observed {
            attributes: declared_attributes(role).expect("attributes"),
            superuser: false,
            replication: false,
            bypassrls: false,
            verifier: Some(Verifier(verifier.into())),
            marked: true,
            member_of: BTreeSet::from(["readers".to_owned()]),
        }
    }

    fn known(password: &str) -> RolePassword {
        RolePassword::Known(Password::new(password))
    }

    #[test]
    fn a_role_as_declared_needs_no_write() {
        let role = declared(known("pw"));
        let observed = as_declared(&role, &scram_verifier("pw"));
        let plan = decide(&role, Some(&observed));
        assert!(plan.is_empty(), "{plan:?}");
        assert_eq!(plan.problem, None);
    }

    #[test]
    fn a_missing_role_is_created_marked_granted_and_given_its_password() {
        let plan = decide(&declared(known("pw")), None);
        assert!(
            matches!(&plan.statements[0], Statement::Create(name, a) if name == "web" && a.login && a.connection_limit == 5)
        );
        assert_eq!(plan.statements[1], Statement::Mark("web".into()));
        assert_eq!(
            plan.statements[2],
            Statement::Grant {
                role: "web".into(),
                member_of: "readers".into()
            }
        );
        assert!(plan.set_password);
    }

    #[test]
    fn a_changed_password_or_attribute_is_written_and_nothing_else() {
        let role = declared(known("new"));
        let observed = as_declared(&role, &scram_verifier("old"));
        let plan = decide(&role, Some(&observed));
        assert!(plan.set_password);
        assert!(plan.statements.is_empty(), "{plan:?}");

        let observed = Observed {
            attributes: Attributes {
                createdb: true,
                ..observed.attributes.clone()
            },
            verifier: Some(Verifier(scram_verifier("new"))),
            ..observed
        };
        let plan = decide(&role, Some(&observed));
        assert!(!plan.set_password);
        assert!(matches!(&plan.statements[..], [Statement::Alter(_, a)] if !a.createdb));
    }

    #[test]
    fn a_superuser_by_hand_is_altered_back_and_memberships_follow_the_list() {
        let role = declared(RolePassword::None);
        let observed = Observed {
            superuser: true,
            marked: false,
            member_of: BTreeSet::from(["admins".to_owned()]),
            ..as_declared(&role, "")
        };
        let plan = decide(&role, Some(&observed));
        let sql: Vec<String> = plan.statements.iter().map(Statement::sql).collect();
        assert!(
            sql[0].starts_with("ALTER ROLE \"web\" WITH NOSUPERUSER"),
            "{sql:?}"
        );
        assert_eq!(
            sql[1..],
            [
                "COMMENT ON ROLE \"web\" IS 'managed by Tusk: spec.roles'",
                "GRANT \"readers\" TO \"web\"",
                "REVOKE \"admins\" FROM \"web\""
            ]
        );
        assert!(!plan.set_password);
    }

    #[test]
    fn an_absent_role_is_dropped_once() {
        let mut role = declared(known("pw"));
        role.spec.ensure = Ensure::Absent;
        let observed = as_declared(&role, "");
        assert_eq!(
            decide(&role, Some(&observed)).statements,
            [Statement::Drop("web".into())]
        );
        assert!(decide(&role, None).is_empty());
    }

    #[test]
    fn an_unreadable_secret_is_reported_and_the_rest_still_done() {
        let plan = decide(
            &declared(RolePassword::Unreadable("Secret web-pw not found".into())),
            None,
        );
        assert_eq!(plan.problem.as_deref(), Some("Secret web-pw not found"));
        assert!(!plan.set_password);
        assert_eq!(plan.statements.len(), 3);
    }

    #[test]
    fn verifiers_do_not_print() {
        assert_eq!(
            format!("{:?}", Verifier("SCRAM-SHA-256$secret".into())),
            "Verifier(<redacted>)"
        );
    }
}
