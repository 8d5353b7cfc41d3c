//! The manager's own connection to its PostgreSQL: over the unix socket,
//! as the superuser, with peer authentication (no password on the wire).

use std::path::Path;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(tokio_postgres::Error),
    #[error("PostgreSQL did not accept connections within {0:?}")]
    NotReady(Duration),
    #[error("query failed: {0}")]
    Query(#[from] tokio_postgres::Error),
}

/// Where and as whom the manager connects locally.
#[derive(Clone, Debug)]
pub struct LocalTarget<'a> {
    pub socket_dir: &'a Path,
    pub port: u16,
    pub superuser: &'a str,
}

/// Connects to `dbname` on the local socket.
pub async fn connect(target: &LocalTarget<'_>, dbname: &str) -> Result<Client, SqlError> {
    let mut config = tokio_postgres::Config::new();
    config
        .host_path(target.socket_dir)
        .port(target.port)
        .user(target.superuser)
        .dbname(dbname)
        .application_name("tusk-instance-manager")
        .connect_timeout(Duration::from_secs(3));
    let (client, connection) = config.connect(NoTls).await.map_err(SqlError::Connect)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "local connection closed");
        }
    });
    Ok(client)
}

/// Waits until PostgreSQL accepts connections (a standby once it reached a
/// consistent state), at most `timeout`.
pub async fn wait_ready(target: &LocalTarget<'_>, timeout: Duration) -> Result<Client, SqlError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match connect(target, "postgres").await {
            Ok(client) => return Ok(client),
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => return Err(SqlError::NotReady(timeout)),
        }
    }
}

/// Quotes an SQL identifier.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes an SQL string literal.
pub fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Waits until this standby's WAL receiver no longer streams, at most
/// `bound`: true when it stopped, false when it still streams.
pub async fn wait_wal_receiver_stopped(client: &Client, bound: Duration) -> Result<bool, SqlError> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let streaming: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')",
                &[],
            )
            .await?
            .try_get(0)?;
        if !streaming {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_literals_are_quoted() {
        assert_eq!(quote_identifier("app"), "\"app\"");
        assert_eq!(quote_identifier("we\"ird"), "\"we\"\"ird\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }
}
