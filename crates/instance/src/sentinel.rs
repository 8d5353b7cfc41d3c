//! The backup sentinel: a row the primary writes just before each base
//! backup starts, naming the PostgresBackup, in `tusk.backup_sentinel` of
//! the `postgres` database. A restore of that backup must have it (it was
//! committed before the backup began), so a rehearsal that finds it
//! proves the restored data is the cluster's as of that backup, not an
//! older or a foreign copy.

use tokio_postgres::Client;

/// Creates the table when missing and records `backup`.
const WRITE: &str = "CREATE SCHEMA IF NOT EXISTS tusk;
CREATE TABLE IF NOT EXISTS tusk.backup_sentinel (
    backup text PRIMARY KEY,
    written_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tusk.backup_sentinel IS
    'Written by the Tusk operator before each base backup; restore rehearsals check it.';";

/// Writes the sentinel of `backup` (again, if a retried backup wrote it
/// before). Durable locally is enough: the backup copies this server's
/// files, so it does not wait for synchronous standbys (a backup must not
/// hang on one that is down).
pub async fn write(client: &Client, backup: &str) -> Result<(), tokio_postgres::Error> {
    let name = crate::sql::quote_literal(backup);
    client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL synchronous_commit = local; {WRITE}
             INSERT INTO tusk.backup_sentinel (backup) VALUES ({name})
             ON CONFLICT (backup) DO UPDATE SET written_at = now();
             COMMIT;"
        ))
        .await
}

/// Whether the sentinel of `backup` is there; why not when it is not.
pub async fn check(client: &Client, backup: &str) -> Result<(), String> {
    let found = client
        .query_one(
            "SELECT count(*) FROM tusk.backup_sentinel WHERE backup = $1",
            &[&backup],
        )
        .await
        .map_err(|e| {
            let why = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            format!("cannot read tusk.backup_sentinel: {why}")
        })?;
    match found.get::<_, i64>(0) {
        0 => Err(format!(
            "tusk.backup_sentinel has no row for backup {backup}, written before it started"
        )),
        _ => Ok(()),
    }
}
