//! Declared database roles (`spec.roles`) and what the cluster reports of
//! them (`status.roles`).
//!
//! The operator creates a password Secret for a login role that names
//! none; the primary's instance manager creates, alters and drops the
//! roles. The rules a declaration must meet are checked in Rust
//! ([`role_problems`]), by the operator, `tusk validate` and the webhook
//! alike, rather than as CEL rules (whose cost grows with every item of a
//! list); the schema carries only the cheap structural limits.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most roles a cluster declares.
pub const MAX_ROLES: usize = 64;

/// The key of a role's password in its Secret (the one Tusk generates and
/// one the user names alike).
pub const ROLE_PASSWORD_KEY: &str = "password";
/// The key of the role's name in the Secret Tusk generates.
pub const ROLE_USERNAME_KEY: &str = "username";
/// The key of a connection URI in the Secret Tusk generates.
pub const ROLE_URI_KEY: &str = "uri";

/// One database role the cluster keeps as declared.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RoleSpec {
    /// The role's name: lower-case letters, digits and `_`, starting with
    /// a letter. Not one of the cluster's own roles (`postgres`,
    /// `streaming_replica`, the `initdb` owner) and not `pg_*`.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z][a-z0-9_]*$"))]
    pub name: String,

    /// `present` (the default) keeps the role as declared; `absent` drops
    /// it (PostgreSQL refuses while the role owns objects or holds
    /// privileges: the reason is reported in `status.roles`).
    #[serde(default)]
    pub ensure: Ensure,

    /// The role may log in. Default false, as PostgreSQL's `CREATE ROLE`.
    #[serde(default)]
    pub login: bool,

    /// Always refused: a superuser could undo everything the operator
    /// keeps (replication, fencing, the other roles). Present so that
    /// `superuser: true` is refused by name rather than ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub superuser: bool,

    /// The role may create databases.
    #[serde(default)]
    pub createdb: bool,

    /// The role may create, alter and drop other roles.
    #[serde(default)]
    pub createrole: bool,

    /// The role uses the privileges of the roles it is a member of
    /// without `SET ROLE`. Default true, as PostgreSQL's.
    #[serde(default = "yes")]
    pub inherit: bool,

    /// The most concurrent connections the role may open; -1 (the
    /// default) for no limit.
    #[serde(default = "no_limit")]
    #[schemars(range(min = -1, max = 100000))]
    pub connection_limit: i32,

    /// When the role's password stops being valid, as an RFC 3339 time
    /// (`2027-01-01T00:00:00Z`). Absent: it never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub valid_until: Option<String>,

    /// The roles this role is a member of, and no others: a membership
    /// not listed here is revoked. Not `postgres`, `streaming_replica`,
    /// `pg_execute_server_program`, `pg_read_server_files` or
    /// `pg_write_server_files` (each as good as a superuser); the
    /// `initdb` owner is allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub in_roles: Vec<String>,

    /// A Secret in the cluster's namespace whose `password` key holds the
    /// role's password. Absent for a login role: Tusk generates one in
    /// `<cluster>-role-<name>` (with `_` written `-`), with `username`,
    /// `password` and `uri` keys an application can use. Absent for a role
    /// without login: the role has no password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret: Option<SecretName>,
}

/// A Secret named by a declaration.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretName {
    /// The Secret's name, in the cluster's namespace.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// Whether a declared role must exist.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum Ensure {
    #[default]
    Present,
    Absent,
}

fn yes() -> bool {
    true
}
fn no_limit() -> i32 {
    -1
}

impl RoleSpec {
    /// A role of `name` with PostgreSQL's defaults.
    pub fn named(name: &str) -> Self {
        RoleSpec {
            name: name.to_owned(),
            ensure: Ensure::Present,
            login: false,
            superuser: false,
            createdb: false,
            createrole: false,
            inherit: true,
            connection_limit: -1,
            valid_until: None,
            in_roles: Vec::new(),
            password_secret: None,
        }
    }

    /// Where the role's password is read from: the Secret named, or the
    /// one Tusk generates for a login role of `cluster`; `None` when the
    /// role has no password (no login, nothing named) or is absent.
    pub fn password_secret_name(&self, cluster: &str) -> Option<String> {
        if self.ensure == Ensure::Absent {
            return None;
        }
        match &self.password_secret {
            Some(secret) => Some(secret.name.clone()),
            None if self.login => Some(generated_secret_name(cluster, &self.name)),
            None => None,
        }
    }

    /// True when Tusk makes the role's password Secret.
    pub fn generates_password(&self) -> bool {
        self.ensure == Ensure::Present && self.login && self.password_secret.is_none()
    }
}

/// The Secret Tusk generates for role `role` of `cluster`.
pub fn generated_secret_name(cluster: &str, role: &str) -> String {
    format!("{cluster}-role-{}", role.replace('_', "-"))
}

/// Role memberships that are as good as a superuser: the server's files
/// and programs.
pub const PRIVILEGED_MEMBERSHIPS: [&str; 3] = [
    "pg_execute_server_program",
    "pg_read_server_files",
    "pg_write_server_files",
];

/// Names PostgreSQL reserves for roles, besides `pg_*`.
const RESERVED_WORDS: [&str; 5] = [
    "public",
    "none",
    "current_user",
    "session_user",
    "current_role",
];

/// A problem with `spec.roles`: the field and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleProblem {
    pub field: String,
    pub rule: String,
}

impl std::fmt::Display for RoleProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

/// Every problem with `roles`, given the roles the cluster keeps for
/// itself (`own`: the superuser, the replication role, the `initdb`
/// owner). Empty when the declaration can be acted on.
pub fn role_problems(roles: &[RoleSpec], own: &[&str]) -> Vec<RoleProblem> {
    let mut problems = Vec::new();
    if roles.len() > MAX_ROLES {
        problems.push(RoleProblem {
            field: "spec.roles".into(),
            rule: format!("at most {MAX_ROLES} roles"),
        });
    }
    let mut seen = BTreeSet::new();
    for (index, role) in roles.iter().enumerate() {
        let field = |leaf: &str| format!("spec.roles[{index}].{leaf}");
        let mut problem = |leaf: &str, rule: String| {
            problems.push(RoleProblem {
                field: field(leaf),
                rule,
            })
        };
        if let Some(rule) = name_rule(&role.name, own) {
            problem("name", rule);
        }
        if !seen.insert(role.name.as_str()) {
            problem("name", format!("role {:?} is declared twice", role.name));
        }
        if role.superuser {
            problem(
                "superuser",
                "a declared role cannot be a superuser: it could undo what the operator keeps"
                    .into(),
            );
        }
        if !(-1..=100_000).contains(&role.connection_limit) {
            problem("connectionLimit", "must be -1 (no limit) to 100000".into());
        }
        if let Some(time) = &role.valid_until
            && time.parse::<jiff::Timestamp>().is_err()
        {
            problem(
                "validUntil",
                format!("{time:?} is not an RFC 3339 time, such as 2027-01-01T00:00:00Z"),
            );
        }
        for (i, member_of) in role.in_roles.iter().enumerate() {
            if let Some(rule) = membership_rule(member_of, &role.name) {
                problem(&format!("inRoles[{i}]"), rule);
            }
        }
    }
    problems
}

/// Why `name` cannot be a declared role, if it cannot.
fn name_rule(name: &str, own: &[&str]) -> Option<String> {
    let shaped = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !shaped {
        return Some(
            "must be 1 to 63 lower-case letters, digits or '_', starting with a letter".into(),
        );
    }
    if name.starts_with("pg_") || RESERVED_WORDS.contains(&name) {
        return Some(format!("{name:?} is reserved by PostgreSQL"));
    }
    if own.contains(&name) {
        return Some(format!(
            "{name:?} is one of the cluster's own roles (the superuser, the replication role and the initdb owner are managed by the operator)"
        ));
    }
    None
}

/// Why `role` cannot be a member of `member_of`, if it cannot. Membership
/// in the application owner is allowed (it acts on the application's
/// objects); in the superuser or the replication role it is not.
fn membership_rule(member_of: &str, role: &str) -> Option<String> {
    if member_of.is_empty() || member_of.len() > 63 || member_of.contains('\0') {
        return Some("must be the name of a role: 1 to 63 bytes".into());
    }
    if member_of == role {
        return Some("a role cannot be a member of itself".into());
    }
    let operator_s = [
        tusk_postgres::roles::SUPERUSER,
        tusk_postgres::roles::REPLICATION,
    ];
    if operator_s.contains(&member_of) || PRIVILEGED_MEMBERSHIPS.contains(&member_of) {
        return Some(format!(
            "membership in {member_of:?} is not granted: it would give the role the operator's or the server's own powers"
        ));
    }
    None
}

/// What `status.roles` says of one declared role.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    /// The role's name.
    pub name: String,
    /// `Reconciled` or `Failed`. A role declared since the primary's last
    /// pass (every 10 seconds, and at each change) is not listed yet.
    pub state: RoleState,
    /// Why the role is not as declared, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a declared role stands on the primary.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleState {
    /// The role is as declared (or, declared absent, does not exist).
    Reconciled,
    /// The last attempt failed; `reason` says why. Retried.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: [&str; 3] = ["postgres", "streaming_replica", "app"];

    fn fields(roles: &[RoleSpec]) -> Vec<String> {
        role_problems(roles, &OWN)
            .into_iter()
            .map(|p| p.field)
            .collect()
    }

    #[test]
    fn reserved_and_own_names_are_refused_with_the_field_named() {
        for name in [
            "postgres",
            "streaming_replica",
            "app",
            "pg_monitor",
            "public",
        ] {
            let problems = role_problems(&[RoleSpec::named(name)], &OWN);
            assert_eq!(problems.len(), 1, "{name}: {problems:?}");
            assert_eq!(problems[0].field, "spec.roles[0].name");
        }
        let problems = role_problems(&[RoleSpec::named("Bad-Name")], &OWN);
        assert!(problems[0].rule.contains("lower-case"), "{problems:?}");
        assert!(fields(&[RoleSpec::named("reporting")]).is_empty());
    }

    #[test]
    fn a_superuser_is_refused() {
        let role = RoleSpec {
            superuser: true,
            ..RoleSpec::named("boss")
        };
        assert_eq!(fields(&[role]), ["spec.roles[0].superuser"]);
    }

    #[test]
    fn duplicates_bad_times_limits_and_memberships_are_named() {
        let role = RoleSpec {
            valid_until: Some("next tuesday".into()),
            connection_limit: -2,
            in_roles: vec![
                "pg_read_all_data".into(),
                "postgres".into(),
                "pg_execute_server_program".into(),
                "web".into(),
            ],
            ..RoleSpec::named("web")
        };
        assert_eq!(
            fields(&[RoleSpec::named("web"), role]),
            [
                "spec.roles[1].name",
                "spec.roles[1].connectionLimit",
                "spec.roles[1].validUntil",
                "spec.roles[1].inRoles[1]",
                "spec.roles[1].inRoles[2]",
                "spec.roles[1].inRoles[3]",
            ]
        );
        let fine = RoleSpec {
            valid_until: Some("2027-01-01T00:00:00Z".into()),
            in_roles: vec!["pg_read_all_data".into(), "app".into()],
            ..RoleSpec::named("reader")
        };
        assert!(fields(&[fine]).is_empty());
    }

    #[test]
    fn the_password_secret_is_named_or_generated_for_login_roles() {
        let login = RoleSpec {
            login: true,
            ..RoleSpec::named("web_app")
        };
        assert_eq!(
            login.password_secret_name("shop").as_deref(),
            Some("shop-role-web-app")
        );
        assert!(login.generates_password());
        let named = RoleSpec {
            password_secret: Some(SecretName {
                name: "mine".into(),
            }),
            ..login.clone()
        };
        assert_eq!(named.password_secret_name("shop").as_deref(), Some("mine"));
        assert!(!named.generates_password());
        assert_eq!(RoleSpec::named("group").password_secret_name("shop"), None);
        let absent = RoleSpec {
            ensure: Ensure::Absent,
            ..login
        };
        assert_eq!(absent.password_secret_name("shop"), None);
        assert!(!absent.generates_password());
    }

    #[test]
    fn defaults_are_postgresql_s() {
        let role: RoleSpec = serde_json::from_str(r#"{"name": "r"}"#).expect("a role");
        assert_eq!(role, RoleSpec::named("r"));
    }
}
