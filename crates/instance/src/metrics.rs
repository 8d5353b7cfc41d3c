//! `/metrics`: Prometheus text exposition of the instance, computed at
//! scrape time from a fresh observation.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tusk_api::instance::{ArchivingReport, InstanceReport, InstanceRole};

use crate::observe::DatabaseFigures;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: String,
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let metric = Gauge::<i64>::default();
    metric.set(value);
    registry.register(name, help, metric);
}

fn float_gauge(registry: &mut Registry, name: &str, help: &str, value: f64) {
    let metric = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    metric.set(value);
    registry.register(name, help, metric);
}

fn saturating(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The exposition text for `report` and `figures`.
pub fn render(report: &InstanceReport, figures: Option<&DatabaseFigures>) -> String {
    let mut registry = Registry::with_prefix("tusk_postgres");
    register_state(&mut registry, report);
    register_replication(&mut registry, report);
    if let Some(archiving) = &report.archiving {
        register_archiving(&mut registry, archiving);
    }
    if let Some(figures) = figures {
        register_database(&mut registry, figures);
    }
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

/// Whether PostgreSQL runs and serves, its role, crashes, pending restarts.
fn register_state(registry: &mut Registry, report: &InstanceReport) {
    let up = report.role != InstanceRole::Stopped;
    gauge(
        registry,
        "up",
        "1 when PostgreSQL runs and answers",
        i64::from(up),
    );
    gauge(
        registry,
        "ready",
        "1 when the instance is ready to serve",
        i64::from(report.ready),
    );

    let roles = Family::<RoleLabel, Gauge>::default();
    for role in ["primary", "replica", "stopped"] {
        let current = match report.role {
            InstanceRole::Primary => "primary",
            InstanceRole::Replica => "replica",
            InstanceRole::Stopped => "stopped",
        };
        roles
            .get_or_create(&RoleLabel { role: role.into() })
            .set(i64::from(role == current));
    }
    registry.register("role", "1 for the instance's current role", roles);

    gauge(
        registry,
        "crashes",
        "Unexpected PostgreSQL exits since the manager started",
        i64::from(report.crash_count),
    );
    gauge(
        registry,
        "pending_restart",
        "Settings waiting for a restart",
        saturating(report.pending_restart.len() as u64),
    );
}

/// Timeline, WAL position, lag and standbys.
fn register_replication(registry: &mut Registry, report: &InstanceReport) {
    if let Some(timeline) = report.timeline {
        gauge(
            registry,
            "timeline",
            "Current timeline",
            i64::from(timeline),
        );
    }
    let wal = report
        .current_lsn
        .as_deref()
        .or(report.replayed_lsn.as_deref())
        .and_then(|text| text.parse::<crate::postgres::lsn::Lsn>().ok());
    if let Some(lsn) = wal {
        gauge(
            registry,
            "wal_position_bytes",
            "Current (primary) or replayed (standby) WAL position",
            saturating(lsn.0),
        );
    }
    if let Some(lag) = report.lag_bytes {
        gauge(
            registry,
            "replication_lag_bytes",
            "Received but not replayed WAL",
            saturating(lag),
        );
    }
    if let Some(lag) = report.lag_seconds {
        float_gauge(
            registry,
            "replication_lag_seconds",
            "Age of the last replayed transaction when behind",
            lag,
        );
    }
    gauge(
        registry,
        "standbys",
        "Connected standbys",
        saturating(report.standbys.len() as u64),
    );
}

/// Continuous WAL archiving, on an instance of a cluster that archives:
/// whether it fails now, what it did since statistics were reset, and the
/// finished segments still waiting on the volume (a number that keeps
/// growing is the disk filling up).
fn register_archiving(registry: &mut Registry, archiving: &ArchivingReport) {
    gauge(
        registry,
        "archiving_failing",
        "1 when WAL archiving fails now (the stanza cannot be created, or the last attempt failed)",
        i64::from(archiving.failing),
    );
    gauge(
        registry,
        "archived_segments",
        "WAL segments archived since statistics were reset (pg_stat_archiver)",
        archiving.archived_count,
    );
    gauge(
        registry,
        "archive_failures",
        "Failed attempts to archive a WAL segment since statistics were reset",
        archiving.failed_count,
    );
    if let Some(pending) = archiving.pending_segments {
        gauge(
            registry,
            "archive_pending_segments",
            "Finished WAL segments waiting in pg_wal to be archived",
            pending,
        );
    }
}

/// What the database figures say: connections, size, transaction id age.
fn register_database(registry: &mut Registry, figures: &DatabaseFigures) {
    gauge(
        registry,
        "connections",
        "Client connections",
        figures.connections,
    );
    gauge(
        registry,
        "database_size_bytes",
        "Total size of all databases",
        figures.database_size_bytes,
    );
    gauge(
        registry,
        "transaction_id_age",
        "Age of the oldest unfrozen transaction id",
        figures.transaction_id_age,
    );
}

#[cfg(test)]
mod tests {
    use tusk_api::instance::InstancePhase;

    use super::*;

    #[test]
    fn a_replica_exposes_role_and_lag() {
        let report = InstanceReport {
            name: "db-2".into(),
            role: InstanceRole::Replica,
            phase: InstancePhase::Running,
            ready: true,
            fenced: false,
            target_primary: Some("db-1".into()),
            postgres_version: Some("15.8".into()),
            system_identifier: Some("1".into()),
            timeline: Some(3),
            current_lsn: None,
            received_lsn: Some("0/3000".into()),
            replayed_lsn: Some("0/2000".into()),
            lag_bytes: Some(4096),
            lag_seconds: Some(1.5),
            replayed_commit_time: None,
            streaming: Some(true),
            upstream: None,
            pending_restart: vec![],
            pending_restart_lowered: vec![],
            held_minimums: vec![],
            standbys: vec![],
            crash_count: 2,
            last_error: None,
            desired_state_errors: vec![],
            kept_copy: None,
            kept_wal: None,
            archiving: None,
            api_server_reachable: None,
            backup: None,
            backup_server: None,
            roles: None,
        };
        let figures = DatabaseFigures {
            connections: 3,
            database_size_bytes: 1000,
            transaction_id_age: 77,
        };
        let text = render(&report, Some(&figures));
        assert_lines(
            &text,
            &[
                "tusk_postgres_up 1",
                "tusk_postgres_role{role=\"replica\"} 1",
                "tusk_postgres_role{role=\"primary\"} 0",
                "tusk_postgres_replication_lag_bytes 4096",
                "tusk_postgres_replication_lag_seconds 1.5",
                "tusk_postgres_wal_position_bytes 8192",
                "tusk_postgres_timeline 3",
                "tusk_postgres_crashes 2",
                "tusk_postgres_connections 3",
                "tusk_postgres_transaction_id_age 77",
            ],
        );
    }

    /// Every one of `lines` is a whole line of `text`.
    fn assert_lines(text: &str, lines: &[&str]) {
        for line in lines {
            assert!(
                text.lines().any(|l| l == *line),
                "missing `{line}` in\n{text}"
            );
        }
    }

    #[test]
    fn archiving_figures_appear_only_where_the_cluster_archives() {
        let without: InstanceReport = serde_json::from_value(serde_json::json!({
            "name": "db-1", "role": "primary", "phase": "running", "ready": true,
            "fenced": false, "pendingRestart": [], "standbys": [], "crashCount": 0
        }))
        .expect("a report");
        assert!(
            !render(&without, None).contains("archiv"),
            "a cluster that does not archive has no archiving series"
        );
        let mut failing = without;
        failing.archiving = Some(ArchivingReport {
            stanza: "db".into(),
            stanza_created: true,
            failing: true,
            archived_count: 12,
            failed_count: 3,
            pending_segments: Some(5),
            ..ArchivingReport::default()
        });
        let text = render(&failing, None);
        assert_lines(
            &text,
            &[
                "tusk_postgres_archiving_failing 1",
                "tusk_postgres_archived_segments 12",
                "tusk_postgres_archive_failures 3",
                "tusk_postgres_archive_pending_segments 5",
            ],
        );
    }
}
