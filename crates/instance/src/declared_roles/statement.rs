//! The SQL statements that bring a role to its declaration, as values
//! (compared in tests, listed in logs) rendered with every name quoted.
//! No statement carries a password: passwords are set apart, as SCRAM
//! verifiers in bind parameters ([`crate::passwords`]).

use crate::sql::{quote_identifier, quote_literal};

/// The marker Tusk leaves on the roles it keeps (`COMMENT ON ROLE`), so a
/// person listing roles (`\du+`) sees which ones follow `spec.roles`.
pub const MANAGED_COMMENT: &str = "managed by Tusk: spec.roles";

/// A role's attributes as `CREATE ROLE` and `ALTER ROLE` take them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    pub login: bool,
    pub createdb: bool,
    pub createrole: bool,
    pub inherit: bool,
    pub connection_limit: i32,
    /// Seconds since the epoch; `None` never expires.
    pub valid_until: Option<i64>,
}

/// One statement about one role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statement {
    Create(String, Attributes),
    Alter(String, Attributes),
    Mark(String),
    Grant { role: String, member_of: String },
    Revoke { role: String, member_of: String },
    Drop(String),
}

impl Statement {
    /// The statement's text.
    pub fn sql(&self) -> String {
        match self {
            Statement::Create(role, attributes) => {
                format!(
                    "CREATE ROLE {} WITH {}",
                    quote_identifier(role),
                    attributes.sql()
                )
            }
            Statement::Alter(role, attributes) => {
                format!(
                    "ALTER ROLE {} WITH {}",
                    quote_identifier(role),
                    attributes.sql()
                )
            }
            Statement::Mark(role) => format!(
                "COMMENT ON ROLE {} IS {}",
                quote_identifier(role),
                quote_literal(MANAGED_COMMENT)
            ),
            Statement::Grant { role, member_of } => format!(
                "GRANT {} TO {}",
                quote_identifier(member_of),
                quote_identifier(role)
            ),
            Statement::Revoke { role, member_of } => format!(
                "REVOKE {} FROM {}",
                quote_identifier(member_of),
                quote_identifier(role)
            ),
            Statement::Drop(role) => format!("DROP ROLE {}", quote_identifier(role)),
        }
    }
}

impl Attributes {
    fn sql(&self) -> String {
        let flag = |on: bool, name: &str| {
            if on {
                name.to_owned()
            } else {
                format!("NO{name}")
            }
        };
        let valid_until = match self.valid_until {
            Some(seconds) => jiff::Timestamp::from_second(seconds)
                .map(|t| quote_literal(&t.to_string()))
                .unwrap_or_else(|_| quote_literal("infinity")),
            None => quote_literal("infinity"),
        };
        format!(
            "NOSUPERUSER {} {} {} {} NOREPLICATION NOBYPASSRLS CONNECTION LIMIT {} VALID UNTIL {}",
            flag(self.login, "LOGIN"),
            flag(self.createdb, "CREATEDB"),
            flag(self.createrole, "CREATEROLE"),
            flag(self.inherit, "INHERIT"),
            self.connection_limit,
            valid_until
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attributes() -> Attributes {
        Attributes {
            login: true,
            createdb: false,
            createrole: true,
            inherit: true,
            connection_limit: 10,
            valid_until: Some(1_798_761_600),
        }
    }

    #[test]
    fn attributes_are_all_stated_and_a_superuser_never_made() {
        assert_eq!(
            Statement::Create("web".into(), attributes()).sql(),
            "CREATE ROLE \"web\" WITH NOSUPERUSER LOGIN NOCREATEDB CREATEROLE INHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 10 VALID UNTIL '2027-01-01T00:00:00Z'"
        );
        let forever = Attributes {
            valid_until: None,
            login: false,
            ..attributes()
        };
        assert_eq!(
            Statement::Alter("web".into(), forever).sql(),
            "ALTER ROLE \"web\" WITH NOSUPERUSER NOLOGIN NOCREATEDB CREATEROLE INHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 10 VALID UNTIL 'infinity'"
        );
    }

    #[test]
    fn names_are_quoted_whatever_they_hold() {
        let hostile = "x\"; DROP ROLE postgres; --";
        assert_eq!(
            Statement::Grant {
                role: "web".into(),
                member_of: hostile.into()
            }
            .sql(),
            "GRANT \"x\"\"; DROP ROLE postgres; --\" TO \"web\""
        );
        assert_eq!(
            Statement::Revoke {
                role: "we\"b".into(),
                member_of: "pg_read_all_data".into()
            }
            .sql(),
            "REVOKE \"pg_read_all_data\" FROM \"we\"\"b\""
        );
        assert_eq!(Statement::Drop("a b".into()).sql(), "DROP ROLE \"a b\"");
        assert_eq!(
            Statement::Mark("web".into()).sql(),
            "COMMENT ON ROLE \"web\" IS 'managed by Tusk: spec.roles'"
        );
    }
}
