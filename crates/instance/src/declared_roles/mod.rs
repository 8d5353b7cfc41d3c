//! Declared roles (`spec.roles`), kept by the primary's manager beside its
//! loop: each pass reads the declared roles from `pg_authid` and
//! `pg_auth_members`, decides what each one needs ([`decide`]) and writes
//! only that, so a converged cluster makes no write; it runs when the
//! declaration (or a password Secret) changes and every [`RECHECK`], which
//! also undoes a hand-made change to a declared role.
//!
//! Only declared roles are read or written: a role nobody declared is
//! never altered or dropped. Every write commits with
//! `synchronous_commit = local`, as the manager's own passwords do (a
//! commit waiting for a synchronous standby that cannot come would hold
//! the pass for ever). Passwords are set as SCRAM verifiers through
//! [`crate::passwords`] (no statement or bind parameter logged), and a
//! failed password write is reported by its SQLSTATE only, never by a
//! message that could quote it. What each role came to is reported on
//! `/status` (`roles`), which the operator copies to `status.roles`.

pub mod decide;
pub mod scram;
pub mod statement;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_postgres::Client;
use tusk_api::v1alpha1::{RoleSpec, RoleState, RoleStatus};

use crate::context::InstanceContext;
use crate::desired::DesiredState;
use crate::settings::Password;
use crate::sql::{self, SqlError};
use crate::state::SharedState;
use crate::task::take_finished;
use decide::{Observed, RolePlan, Verifier, decide};
use statement::{Attributes, MANAGED_COMMENT, Statement};

/// How often the roles are read again when nothing changed.
pub const RECHECK: Duration = Duration::from_secs(10);

/// A declared role with its password as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredRole {
    pub spec: RoleSpec,
    pub password: RolePassword,
}

/// A declared role's password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolePassword {
    /// The role has none declared (no login and no Secret named), or this
    /// instance does not read it (not the target primary).
    None,
    /// Read from the role's Secret. `Debug` does not show it.
    Known(Password),
    /// The Secret cannot be read: why (no password is shown).
    Unreadable(String),
}

/// The pass under way and the last one done.
#[derive(Default)]
pub struct DeclaredRoles {
    running: Option<(Vec<DeclaredRole>, JoinHandle<Vec<RoleStatus>>)>,
    done: Option<(Vec<DeclaredRole>, Instant)>,
}

impl DeclaredRoles {
    /// One look, from the convergence loop: on a running primary, starts a
    /// pass when the declaration changed or [`RECHECK`] went by; records
    /// a finished pass's outcome for `/status`. Never waits.
    pub fn converge(
        &mut self,
        ctx: &InstanceContext,
        desired: &DesiredState,
        state: &SharedState,
        running_primary: bool,
    ) {
        if let Some((roles, outcome)) = take_finished(&mut self.running, "roles") {
            let statuses = outcome.unwrap_or_else(|error| failed_all(&roles, &error));
            state.lock().roles = Some(statuses);
            self.done = Some((roles, Instant::now()));
        }
        if !running_primary {
            self.done = None;
            state.lock().roles = None;
            return;
        }
        if self.running.is_some() {
            return;
        }
        let due = match &self.done {
            Some((roles, at)) => *roles != desired.roles || at.elapsed() >= RECHECK,
            None => true,
        };
        if !due {
            return;
        }
        if desired.roles.is_empty() {
            state.lock().roles = Some(Vec::new());
            self.done = Some((Vec::new(), Instant::now()));
            return;
        }
        let ctx = ctx.clone();
        let roles = desired.roles.clone();
        let task = tokio::spawn({
            let roles = roles.clone();
            async move { pass(&ctx, &roles).await }
        });
        self.running = Some((roles, task));
    }
}

fn failed_all(roles: &[DeclaredRole], reason: &str) -> Vec<RoleStatus> {
    roles
        .iter()
        .map(|role| RoleStatus {
            name: role.spec.name.clone(),
            state: RoleState::Failed,
            reason: Some(reason.to_owned()),
        })
        .collect()
}

/// One pass over every declared role.
async fn pass(ctx: &InstanceContext, roles: &[DeclaredRole]) -> Vec<RoleStatus> {
    let client = match sql::connect(&ctx.local_target(), "postgres").await {
        Ok(client) => client,
        Err(error) => return failed_all(roles, &error.to_string()),
    };
    let names: Vec<String> = roles.iter().map(|r| r.spec.name.clone()).collect();
    let observed = match observe(&client, &names).await {
        Ok(observed) => observed,
        Err(error) => return failed_all(roles, &error.to_string()),
    };
    let mut statuses = Vec::with_capacity(roles.len());
    for role in roles {
        let plan = decide(role, observed.get(&role.spec.name));
        let written = if plan.is_empty() {
            Ok(())
        } else {
            write(&client, role, &plan).await
        };
        let reason = written.err().or(plan.problem);
        if let Some(reason) = &reason {
            tracing::warn!(role = %role.spec.name, %reason, "a declared role is not as declared");
        }
        statuses.push(RoleStatus {
            name: role.spec.name.clone(),
            state: if reason.is_some() {
                RoleState::Failed
            } else {
                RoleState::Reconciled
            },
            reason,
        });
    }
    statuses
}

const OBSERVE: &str = "
SELECT a.rolname::text, a.rolsuper, a.rolinherit, a.rolcreaterole, a.rolcreatedb,
       a.rolcanlogin, a.rolreplication, a.rolbypassrls, a.rolconnlimit,
       CASE WHEN a.rolvaliduntil IS NULL OR NOT isfinite(a.rolvaliduntil) THEN NULL
            ELSE floor(extract(epoch FROM a.rolvaliduntil))::bigint END,
       a.rolpassword,
       coalesce(shobj_description(a.oid, 'pg_authid') = $2, false),
       ARRAY(SELECT DISTINCT g.rolname::text FROM pg_auth_members m
             JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = a.oid)
FROM pg_authid a WHERE a.rolname::text = ANY($1)";

/// The roles named, as PostgreSQL holds them (a read, never a write).
async fn observe(
    client: &Client,
    names: &[String],
) -> Result<BTreeMap<String, Observed>, SqlError> {
    let rows = client.query(OBSERVE, &[&names, &MANAGED_COMMENT]).await?;
    let mut observed = BTreeMap::new();
    for row in rows {
        let member_of: Vec<String> = row.try_get(12)?;
        observed.insert(
            row.try_get::<_, String>(0)?,
            Observed {
                attributes: Attributes {
                    login: row.try_get(5)?,
                    createdb: row.try_get(4)?,
                    createrole: row.try_get(3)?,
                    inherit: row.try_get(2)?,
                    connection_limit: row.try_get(8)?,
                    valid_until: row.try_get(9)?,
                },
                superuser: row.try_get(1)?,
                replication: row.try_get(6)?,
                bypassrls: row.try_get(7)?,
                verifier: row.try_get::<_, Option<String>>(10)?.map(Verifier),
                marked: row.try_get(11)?,
                member_of: member_of.into_iter().collect(),
            },
        );
    }
    Ok(observed)
}

/// Carries `plan` out: the statements in one transaction, then the
/// password. The error names what failed, never a password.
async fn write(client: &Client, role: &DeclaredRole, plan: &RolePlan) -> Result<(), String> {
    let name = &role.spec.name;
    if !plan.statements.is_empty() {
        let sql: Vec<String> = plan.statements.iter().map(Statement::sql).collect();
        let done = async {
            client
                .batch_execute("BEGIN; SET LOCAL synchronous_commit = local")
                .await?;
            for statement in &sql {
                client.batch_execute(statement).await?;
            }
            client.batch_execute("COMMIT").await
        }
        .await;
        if let Err(error) = done {
            // The session is reused; leave it outside any transaction.
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(database_reason(&error));
        }
        tracing::info!(role = %name, statements = ?sql, "declared role written");
    }
    if plan.set_password
        && let RolePassword::Known(password) = &role.password
    {
        crate::passwords::set_password(client, name, password.expose())
            .await
            .map_err(|error| {
                let code = match &error {
                    SqlError::Query(e) => e.code().map(|c| c.code().to_owned()),
                    _ => None,
                };
                format!(
                    "setting the password failed (SQLSTATE {})",
                    code.as_deref().unwrap_or("unknown")
                )
            })?;
        tracing::info!(role = %name, "declared role's password set from its Secret");
    }
    Ok(())
}

/// PostgreSQL's message for a failed statement (role statements carry no
/// password).
fn database_reason(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => error.to_string(),
    }
}
