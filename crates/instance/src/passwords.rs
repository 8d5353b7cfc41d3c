//! Database passwords follow the mounted Secrets: set at bootstrap and set
//! again on the primary each time the manager starts, so a rotated Secret
//! takes effect with the next pod restart.
//!
//! Passwords are sent only as SCRAM verifiers computed here: the plain
//! passwords never reach PostgreSQL, its statement log or its catalogs.

use tokio_postgres::Client;

use crate::settings::{Credentials, UserSecret};
use crate::sql::{SqlError, quote_identifier, quote_literal};

/// The SCRAM-SHA-256 verifier of `password` (with a fresh salt).
pub fn scram_verifier(password: &str) -> String {
    postgres_protocol::password::scram_sha_256(password.as_bytes())
}

/// `ALTER ROLE ... PASSWORD` with the verifier of `secret`'s password.
pub fn set_password_statement(secret: &UserSecret) -> String {
    format!(
        "ALTER ROLE {} PASSWORD {}",
        quote_identifier(&secret.username),
        quote_literal(&scram_verifier(secret.password.expose()))
    )
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
            client
                .batch_execute(&set_password_statement(secret))
                .await?;
        }
    }
    tracing::info!("database passwords match the mounted credentials");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Password;

    #[test]
    fn password_statements_carry_a_verifier_not_the_password() {
        let secret = UserSecret {
            username: "app".into(),
            password: Password::new("plain-text-password"),
        };
        let statement = set_password_statement(&secret);
        assert!(statement.starts_with("ALTER ROLE \"app\" PASSWORD 'SCRAM-SHA-256$4096:"));
        assert!(!statement.contains("plain-text-password"));
    }
}
