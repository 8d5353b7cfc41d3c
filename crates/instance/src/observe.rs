//! What PostgreSQL itself says about the instance: role, timeline, WAL
//! positions, lag, standbys, settings waiting for a restart.

use tokio_postgres::Client;
use tusk_api::instance::StandbyReport;

use crate::postgres::lsn::Lsn;
use crate::sql::SqlError;

/// One observation of a running PostgreSQL.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    pub in_recovery: bool,
    pub version: String,
    pub system_identifier: String,
    pub timeline: Option<u32>,
    pub current_lsn: Option<Lsn>,
    pub received_lsn: Option<Lsn>,
    pub replayed_lsn: Option<Lsn>,
    pub lag_seconds: Option<f64>,
    pub replayed_commit_time: Option<String>,
    pub streaming: bool,
    pub upstream: Option<String>,
    pub pending_restart: Vec<String>,
    /// Of `pending_restart`, the standby minimums the change lowers.
    pub pending_restart_lowered: Vec<String>,
    pub standbys: Vec<StandbyReport>,
    /// PostgreSQL's archiver (a primary's; `None` on a standby).
    pub archiver: Option<ArchiverStats>,
}

/// `pg_stat_archiver`, with the segments still waiting to be archived.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArchiverStats {
    pub archived_count: i64,
    pub last_archived_wal: Option<String>,
    pub last_archived_time: Option<String>,
    pub failed_count: i64,
    pub last_failed_wal: Option<String>,
    pub last_failed_time: Option<String>,
    /// The last attempt failed (no success since the last failure).
    pub failing: bool,
    pub pending_segments: i64,
}

impl Observation {
    /// Received but not yet replayed WAL on a standby.
    pub fn lag_bytes(&self) -> Option<u64> {
        Some(self.received_lsn?.bytes_since(self.replayed_lsn?))
    }
}

const STATE_QUERY: &str = "
SELECT pg_is_in_recovery(),
       current_setting('server_version'),
       (SELECT system_identifier::text FROM pg_control_system()),
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END,
       pg_last_wal_receive_lsn()::text,
       pg_last_wal_replay_lsn()::text,
       CASE WHEN pg_is_in_recovery()
            THEN COALESCE((SELECT received_tli FROM pg_stat_wal_receiver),
                          (SELECT timeline_id FROM pg_control_checkpoint()))::text
            ELSE (('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int)::text
       END,
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN '0'
            ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0)::text
       END,
       (SELECT status FROM pg_stat_wal_receiver),
       (SELECT sender_host FROM pg_stat_wal_receiver),
       ARRAY(SELECT name FROM pg_settings WHERE pending_restart ORDER BY name),
       to_char(pg_last_xact_replay_timestamp() AT TIME ZONE 'UTC',
               'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
       ARRAY(SELECT s.name FROM pg_settings s
             WHERE s.pending_restart AND s.name = ANY($1)
               AND COALESCE(
                     (SELECT CASE WHEN f.setting ~ '^[0-9]+$' THEN f.setting::bigint END
                      FROM pg_file_settings f WHERE f.name = s.name
                      ORDER BY f.seqno DESC LIMIT 1),
                     CASE WHEN s.boot_val ~ '^[0-9]+$' THEN s.boot_val::bigint END
                   ) < s.setting::bigint
             ORDER BY s.name)";

const ARCHIVER_QUERY: &str = "
SELECT archived_count, last_archived_wal,
       to_char(last_archived_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
       failed_count, last_failed_wal,
       to_char(last_failed_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),
       last_failed_time IS NOT NULL
         AND (last_archived_time IS NULL OR last_failed_time > last_archived_time),
       (SELECT count(*) FROM pg_ls_archive_statusdir() WHERE name LIKE '%.ready')
FROM pg_stat_archiver";

const STANDBYS_QUERY: &str = "
SELECT application_name, client_addr::text, state, sync_state,
       sent_lsn::text, flush_lsn::text, replay_lsn::text,
       pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint
FROM pg_stat_replication ORDER BY application_name";

fn lsn(text: Option<String>) -> Option<Lsn> {
    text.and_then(|t| t.parse().ok())
}

/// Observes PostgreSQL through `client`.
pub async fn observe(client: &Client) -> Result<Observation, SqlError> {
    let minimums: Vec<&str> = tusk_api::instance::STANDBY_MINIMUMS.to_vec();
    let row = client.query_one(STATE_QUERY, &[&minimums]).await?;
    let in_recovery: bool = row.try_get(0)?;
    let timeline: Option<String> = row.try_get(6)?;
    let lag_seconds: Option<String> = row.try_get(7)?;
    let receiver_status: Option<String> = row.try_get(8)?;
    let mut observation = Observation {
        in_recovery,
        version: row.try_get(1)?,
        system_identifier: row.try_get(2)?,
        timeline: timeline.and_then(|t| t.parse().ok()),
        current_lsn: lsn(row.try_get(3)?),
        received_lsn: lsn(row.try_get(4)?),
        replayed_lsn: lsn(row.try_get(5)?),
        lag_seconds: lag_seconds.and_then(|t| t.parse().ok()),
        replayed_commit_time: row.try_get(11)?,
        streaming: receiver_status.as_deref() == Some("streaming"),
        upstream: row.try_get(9)?,
        pending_restart: row.try_get(10)?,
        pending_restart_lowered: row.try_get(12)?,
        standbys: Vec::new(),
        archiver: None,
    };
    if !in_recovery {
        let row = client.query_one(ARCHIVER_QUERY, &[]).await?;
        observation.archiver = Some(ArchiverStats {
            archived_count: row.try_get(0)?,
            last_archived_wal: row.try_get(1)?,
            last_archived_time: row.try_get(2)?,
            failed_count: row.try_get(3)?,
            last_failed_wal: row.try_get(4)?,
            last_failed_time: row.try_get(5)?,
            failing: row.try_get(6)?,
            pending_segments: row.try_get(7)?,
        });
        for row in client.query(STANDBYS_QUERY, &[]).await? {
            let lag: Option<i64> = row.try_get(7)?;
            observation.standbys.push(StandbyReport {
                name: row.try_get(0)?,
                client_address: row.try_get(1)?,
                state: row.try_get(2)?,
                sync_state: row.try_get(3)?,
                sent_lsn: row.try_get(4)?,
                flush_lsn: row.try_get(5)?,
                replay_lsn: row.try_get(6)?,
                replay_lag_bytes: lag.and_then(|l| u64::try_from(l).ok()),
            });
        }
    }
    Ok(observation)
}

/// Figures only the metrics endpoint needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DatabaseFigures {
    pub connections: i64,
    pub database_size_bytes: i64,
    pub transaction_id_age: i64,
}

pub async fn database_figures(client: &Client) -> Result<DatabaseFigures, SqlError> {
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
                    (SELECT COALESCE(sum(pg_database_size(oid)), 0)::bigint FROM pg_database WHERE datallowconn),
                    (SELECT COALESCE(max(age(datfrozenxid)), 0)::bigint FROM pg_database)",
            &[],
        )
        .await?;
    Ok(DatabaseFigures {
        connections: row.try_get(0)?,
        database_size_bytes: row.try_get(1)?,
        transaction_id_age: row.try_get(2)?,
    })
}
