//! Base backups: the arguments of `pgbackrest backup`, and the reading of
//! `pgbackrest info`.

/// Annotation key pgBackRest stores with each backup: the PostgresBackup
/// it was taken for.
pub const BACKUP_ANNOTATION: &str = "tusk-backup";

/// The arguments of `pgbackrest backup` for the PostgresBackup `name`:
/// its type (`full`, `diff`, `incr`), an immediate checkpoint (the backup
/// was asked for now), and the annotation that finds it again.
pub fn backup_args(backup_type: &str, name: &str) -> Vec<String> {
    vec![
        "backup".to_owned(),
        format!("--type={backup_type}"),
        "--start-fast".to_owned(),
        format!("--annotation={BACKUP_ANNOTATION}={name}"),
    ]
}

/// One backup in the repository, as `pgbackrest info --output=json`
/// describes it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BackupInfo {
    /// pgBackRest's label (`20261204-101500F`), the backup's id.
    pub label: String,
    /// `full`, `diff` or `incr`.
    pub backup_type: String,
    /// Start and stop, in seconds since the epoch.
    pub started: i64,
    pub stopped: i64,
    pub begin_lsn: Option<String>,
    pub end_lsn: Option<String>,
    /// The first WAL segment the backup needs (its timeline is the first
    /// eight hexadecimal digits).
    pub begin_wal: Option<String>,
    /// Bytes stored in the repository for this backup.
    pub repository_bytes: Option<i64>,
    /// The PostgresBackup it was taken for ([`BACKUP_ANNOTATION`]).
    pub annotation: Option<String>,
    /// pgBackRest found page checksum errors while copying.
    pub error: bool,
}

impl BackupInfo {
    /// The timeline the backup started on.
    pub fn timeline(&self) -> Option<i64> {
        let wal = self.begin_wal.as_deref()?;
        i64::from_str_radix(wal.get(..8)?, 16).ok()
    }
}

/// What `pgbackrest info --output=json` says of `stanza`; `None` when it
/// does not list it.
pub(super) fn stanza_info(json: &str, stanza: &str) -> Result<Option<serde_json::Value>, String> {
    let stanzas: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("pgbackrest info is not JSON: {e}"))?;
    Ok(stanzas
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == stanza))
        .cloned())
}

/// The backups of `stanza` listed by `pgbackrest info --output=json`,
/// oldest first.
pub fn parse_info(json: &str, stanza: &str) -> Result<Vec<BackupInfo>, String> {
    let Some(entry) = stanza_info(json, stanza)? else {
        return Ok(Vec::new());
    };
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
    let backups = entry["backup"].as_array().cloned().unwrap_or_default();
    Ok(backups
        .iter()
        .filter_map(|b| {
            Some(BackupInfo {
                label: text(&b["label"])?,
                backup_type: text(&b["type"]).unwrap_or_default(),
                started: b["timestamp"]["start"].as_i64().unwrap_or_default(),
                stopped: b["timestamp"]["stop"].as_i64().unwrap_or_default(),
                begin_lsn: text(&b["lsn"]["start"]),
                end_lsn: text(&b["lsn"]["stop"]),
                begin_wal: text(&b["archive"]["start"]),
                repository_bytes: b["info"]["repository"]["delta"].as_i64(),
                annotation: text(&b["annotation"][BACKUP_ANNOTATION]),
                error: b["error"].as_bool().unwrap_or(false),
            })
        })
        .collect())
}
