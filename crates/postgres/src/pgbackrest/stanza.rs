//! A stanza that records another database than the one archiving to it,
//! and whether that database is the same one after a major upgrade.
//!
//! `pg_upgrade` gives the new cluster a new version and a new system
//! identifier, so `stanza-create` refuses the stanza the old cluster
//! made; `stanza-upgrade` records the new database in the stanza's
//! history. It would record any database the same way, though, so it
//! runs only for the upgrade of the recorded one: a database of an older
//! major now of this data's major. A stanza recording this major or a
//! newer one belongs to another database (the repository of another
//! cluster, or a newer cluster's) and is left as it is.

/// What pgBackRest (2.45 to 2.55) says, with error code 028, when the stanza's
/// info files record another database than the one it connects to.
pub const DATABASE_MISMATCH: &str =
    "backup and archive info files exist but do not match the database";

/// True when `error` (a failed `stanza-create`) is pgBackRest's refusal
/// of a stanza that records another database.
pub fn is_database_mismatch(error: &str) -> bool {
    error.contains(DATABASE_MISMATCH)
}

/// The database a stanza records now (the newest of its history), as
/// `pgbackrest info --output=json` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedDatabase {
    /// The major version (`9` for `9.6`).
    pub major: u32,
    pub system_id: Option<u64>,
}

/// The database `stanza` records now, from `pgbackrest info
/// --output=json`; `None` when the stanza is not listed or records none.
pub fn recorded_database(json: &str, stanza: &str) -> Result<Option<RecordedDatabase>, String> {
    let Some(entry) = super::backup::stanza_info(json, stanza)? else {
        return Ok(None);
    };
    let newest = entry["db"]
        .as_array()
        .and_then(|history| history.iter().max_by_key(|db| db["id"].as_i64()));
    let Some(db) = newest else {
        return Ok(None);
    };
    let version = db["version"].as_str().unwrap_or_default();
    let major = version
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .ok_or_else(|| format!("pgbackrest info records database version `{version}`"))?;
    Ok(Some(RecordedDatabase {
        major,
        system_id: db["system-id"].as_u64(),
    }))
}

/// What a stanza recording another database is to this data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StanzaMismatch {
    /// The stanza records an older major: this data was upgraded from it,
    /// and `stanza-upgrade` records it.
    Upgraded { from: u32, to: u32 },
    /// The stanza records this major or a newer one: another database's
    /// stanza, never taken over.
    Other { recorded: u32, data: u32 },
    /// The stanza lists no database to compare with.
    Unknown,
}

impl StanzaMismatch {
    /// Judges the stanza's `recorded` database against the data's major.
    pub fn of(recorded: Option<&RecordedDatabase>, data_major: u32) -> Self {
        match recorded {
            None => StanzaMismatch::Unknown,
            Some(db) if db.major < data_major => StanzaMismatch::Upgraded {
                from: db.major,
                to: data_major,
            },
            Some(db) => StanzaMismatch::Other {
                recorded: db.major,
                data: data_major,
            },
        }
    }

    /// Why the stanza is left as it is, for the error that reports it.
    pub fn kept_because(&self) -> String {
        match self {
            StanzaMismatch::Upgraded { from, to } => {
                format!("the stanza records PostgreSQL {from}, upgraded to {to}")
            }
            StanzaMismatch::Other { recorded, data } => format!(
                "the stanza records another PostgreSQL {recorded} database, not an older major \
                 this PostgreSQL {data} data was upgraded from; it is left as it is"
            ),
            StanzaMismatch::Unknown => {
                "pgbackrest info lists no database for the stanza; it is left as it is".to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pgbackrest info --output=json` (2.45) after a stanza of PostgreSQL
    /// 15 recorded a second database.
    const TWO_DATABASES: &str = r#"[{"archive":[{"database":{"id":2,"repo-key":1},"id":"15-2","max":null,"min":null}],"backup":[],"cipher":"none","db":[{"id":1,"repo-key":1,"system-id":7715888478774609094,"version":"15"},{"id":2,"repo-key":1,"system-id":7715888487948010786,"version":"15"}],"name":"s","repo":[{"cipher":"none","key":1,"status":{"code":2,"message":"no valid backups"}}],"status":{"code":2,"lock":{"backup":{"held":false}},"message":"no valid backups"}}]"#;

    #[test]
    fn the_newest_database_of_the_history_is_the_recorded_one() {
        assert_eq!(
            recorded_database(TWO_DATABASES, "s"),
            Ok(Some(RecordedDatabase {
                major: 15,
                system_id: Some(7715888487948010786),
            }))
        );
        let old = r#"[{"name":"s","db":[{"id":3,"version":"9.6","system-id":1}]}]"#;
        assert_eq!(
            recorded_database(old, "s").map(|db| db.map(|db| db.major)),
            Ok(Some(9))
        );
    }

    #[test]
    fn a_stanza_not_listed_or_without_databases_records_none() {
        assert_eq!(recorded_database(TWO_DATABASES, "other"), Ok(None));
        assert_eq!(recorded_database(r#"[{"name":"s"}]"#, "s"), Ok(None));
        assert!(recorded_database("not json", "s").is_err());
        assert!(recorded_database(r#"[{"name":"s","db":[{"id":1,"version":"x"}]}]"#, "s").is_err());
    }

    #[test]
    fn only_a_stanza_of_an_older_major_is_upgraded() {
        let recorded = |major| RecordedDatabase {
            major,
            system_id: Some(1),
        };
        assert_eq!(
            StanzaMismatch::of(Some(&recorded(15)), 16),
            StanzaMismatch::Upgraded { from: 15, to: 16 }
        );
        assert_eq!(
            StanzaMismatch::of(Some(&recorded(15)), 18),
            StanzaMismatch::Upgraded { from: 15, to: 18 }
        );
        // Another cluster of the same major (another system identifier).
        assert_eq!(
            StanzaMismatch::of(Some(&recorded(16)), 16),
            StanzaMismatch::Other {
                recorded: 16,
                data: 16
            }
        );
        // A newer cluster's stanza: never downgraded into.
        assert_eq!(
            StanzaMismatch::of(Some(&recorded(17)), 16),
            StanzaMismatch::Other {
                recorded: 17,
                data: 16
            }
        );
        assert_eq!(StanzaMismatch::of(None, 16), StanzaMismatch::Unknown);
    }

    #[test]
    fn the_refusal_of_another_database_is_told_from_other_failures() {
        assert!(is_database_mismatch(
            "ERROR: [028]: backup and archive info files exist but do not match the database"
        ));
        assert!(!is_database_mismatch(
            "ERROR: [056]: unable to find primary cluster - cannot proceed"
        ));
    }
}
