//! Database passwords follow the mounted Secrets: set at bootstrap, again
//! on the primary each time the manager starts, and whenever a mounted
//! password changes (`convergence::rotation`), without a restart.
//!
//! Passwords are sent only as SCRAM verifiers computed here, and only as
//! bind parameters of a function call: neither the plain password nor its
//! verifier appears in any statement text, so neither PostgreSQL's
//! statement log nor the client library's debug log can show them.
//! PostgreSQL can still log a statement's bind parameters (`log_statement`,
//! `log_min_duration_statement`, sampling, which users may set), so the
//! call runs in a transaction that turns all of that off for itself
//! ([`QUIET_TRANSACTION`]).

use std::error::Error;
use std::fmt;

use bytes::BytesMut;
use tokio_postgres::Client;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::settings::Credentials;
use crate::sql::SqlError;

/// The SCRAM-SHA-256 verifier of `password` (with a fresh salt).
pub fn scram_verifier(password: &str) -> String {
    postgres_protocol::password::scram_sha_256(password.as_bytes())
}

/// A session-local function that sets a role's password from parameters;
/// the `ALTER ROLE` it runs is not a top-level statement, so
/// `log_statement` does not log it. When it fails, PostgreSQL would name
/// it, verifier included, in the error's CONTEXT (logged, and sent to the
/// client): the error is raised again with its code and message alone,
/// whose context names the function, not the statement.
const SET_PASSWORD_FUNCTION: &str = "
CREATE OR REPLACE FUNCTION pg_temp.tusk_set_password(role_name text, verifier text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER ROLE %I PASSWORD %L', role_name, verifier);
EXCEPTION WHEN OTHERS THEN
    RAISE EXCEPTION USING ERRCODE = SQLSTATE, MESSAGE = SQLERRM;
END
$$";

/// A text parameter whose `Debug` form (which the client library logs at
/// debug level together with the statement) hides its value.
#[derive(Clone, Copy)]
struct Redacted<'a>(&'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl ToSql for Redacted<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <&str as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// Opens a transaction in which PostgreSQL logs no statement and no bind
/// parameter, whatever the server's logging parameters say: statement and
/// duration logging off, and parameters left out of any line still logged
/// (a transaction sampled by `log_transaction_sample_rate` at its start
/// is logged in full), and an error's CONTEXT left out of the log
/// (`log_error_verbosity = terse`). `auto_explain`, if loaded, logs
/// nothing either.
/// These are superuser settings; the manager is the superuser. The commit
/// waits for no synchronous standby: under a synchronous setting no
/// standby can meet yet (`ANY 2` while the second standby is still being
/// created), a commit that waited would hold the manager's convergence
/// loop, the one thing that widens the setting, for ever. A password set
/// on a primary that then fails is set again by the next primary's
/// manager.
const QUIET_TRANSACTION: &str = "BEGIN;
SET LOCAL synchronous_commit = local;
SET LOCAL log_statement = 'none';
SET LOCAL log_min_duration_statement = -1;
SET LOCAL log_min_duration_sample = -1;
SET LOCAL log_parameter_max_length = 0;
SET LOCAL log_parameter_max_length_on_error = 0;
SET LOCAL log_error_verbosity = terse;
SET LOCAL auto_explain.log_min_duration = -1";

/// Sets the password of `role` to `password`.
pub async fn set_password(client: &Client, role: &str, password: &str) -> Result<(), SqlError> {
    client.batch_execute(QUIET_TRANSACTION).await?;
    let set = async {
        client.batch_execute(SET_PASSWORD_FUNCTION).await?;
        client
            .execute(
                "SELECT pg_temp.tusk_set_password($1, $2)",
                &[&role, &Redacted(&scram_verifier(password))],
            )
            .await
    }
    .await;
    match set {
        Ok(_) => client.batch_execute("COMMIT").await?,
        Err(error) => {
            // The session is reused; leave it outside any transaction.
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(error.into());
        }
    }
    Ok(())
}

/// Sets the password of every credential whose role exists.
pub async fn converge(client: &Client, credentials: &Credentials) -> Result<(), SqlError> {
    for secret in [
        &credentials.superuser,
        &credentials.replication,
        &credentials.app_owner,
    ] {
        let exists = client
            .query_opt(
                "SELECT 1 FROM pg_roles WHERE rolname = $1",
                &[&secret.username],
            )
            .await?
            .is_some();
        if exists {
            set_password(client, &secret.username, secret.password.expose()).await?;
        }
    }
    tracing::info!("database passwords match the mounted credentials");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiers_are_salted_scram_and_hide_the_password() {
        let first = scram_verifier("plain-text-password");
        let second = scram_verifier("plain-text-password");
        assert!(first.starts_with("SCRAM-SHA-256$4096:"), "{first}");
        assert!(!first.contains("plain-text-password"));
        assert_ne!(first, second, "a fresh salt each time");
    }

    #[test]
    fn redacted_parameters_do_not_print_their_value() {
        assert_eq!(format!("{:?}", Redacted("SCRAM-SHA-256$x")), "<redacted>");
    }
}
