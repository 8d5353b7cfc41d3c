//! Every parameter value admission accepts renders to a `postgresql.conf`
//! that real PostgreSQL parses and reads back unchanged: quotes, doubled
//! quotes, backslashes (before a quote, a letter, a digit), comment and
//! assignment characters, spaces at either end, non-ASCII text. And the
//! value rules Tusk holds declared parameters to
//! (`tusk_postgres::parameters::settings`) agree with the servers: each
//! value is judged as PostgreSQL 15 judges it (`ALTER SYSTEM` as the
//! judge), and each major's table is what its server says.

mod common;

use std::time::Duration;

use common::{TestCluster, desired};
use tusk_instance::process_user::ProcessUser;
use tusk_postgres::parameters::{parameter_problem, settings};

/// Custom parameters (`tusk_test.<name>`) holding awkward values.
const VALUES: &[(&str, &str)] = &[
    ("quote", "it's"),
    ("quotes", "'' and '"),
    ("double_quotes", "\"$user\", public"),
    ("backslash_quote", "a\\'b"),
    ("backslash_letters", "C:\\dir\\new\\table"),
    ("backslash_octal", "\\101\\0"),
    ("backslashes", "\\\\ two"),
    ("comment", "a # not a comment"),
    ("assignment", "x = 'y'"),
    ("spaces", "  padded  "),
    ("empty", ""),
    ("unicode", "gr\u{fc}\u{df}e \u{1f418}"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_values_read_back_unchanged_from_postgresql() {
    common::init_logs();
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    let mut on_db = desired("db-1", db.address);
    for (name, value) in VALUES {
        let name = format!("tusk_test.{name}");
        assert_eq!(parameter_problem(&name, value), None, "{name} is accepted");
        on_db.parameters.insert(name, (*value).to_owned());
    }
    on_db
        .parameters
        .insert("search_path".into(), "\"$user\", public".into());
    db.start(on_db);
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    let client = db.superuser().await;
    for (name, value) in VALUES {
        let row = client
            .query_one(
                "SELECT current_setting($1)",
                &[&format!("tusk_test.{name}")],
            )
            .await
            .expect("the setting is read");
        let read: String = row.get(0);
        assert_eq!(read, *value, "tusk_test.{name}");
    }
    let row = client
        .query_one(
            "SELECT setting FROM pg_settings WHERE name = 'search_path'",
            &[],
        )
        .await
        .expect("search_path");
    assert_eq!(row.get::<_, String>(0), "\"$user\", public");
    db.stop(Duration::from_secs(30)).await;
}

/// (parameter, value): accepted and refused alike, every kind of setting.
const JUDGED: &[(&str, &str)] = &[
    ("shared_buffers", "128MB"),
    ("shared_buffers", "1.5GB"),
    ("shared_buffers", "Retain"),
    ("shared_buffers", "64kB"),
    ("shared_buffers", "128mb"),
    ("shared_buffers", "128 MB"),
    ("shared_buffers", "10ms"),
    ("shared_buffers", " 256MB "),
    ("max_connections", ""),
    ("max_connections", "-1Gi"),
    ("max_connections", "0x40"),
    ("max_connections", "010"),
    ("max_connections", "100MB"),
    ("max_connections", "262144"),
    ("max_connections", "1e2"),
    ("max_connections", "2.5"),
    ("work_mem", "64kB"),
    ("work_mem", "63kB"),
    ("work_mem", "1TB"),
    ("work_mem", "4GB"),
    ("log_min_duration_statement", "-1"),
    ("log_min_duration_statement", "250ms"),
    ("log_min_duration_statement", "1h"),
    ("log_min_duration_statement", "1.5s"),
    ("log_min_duration_statement", "1500us"),
    ("statement_timeout", "1d"),
    ("statement_timeout", "30 s"),
    ("checkpoint_completion_target", "0.9"),
    ("checkpoint_completion_target", "1.5"),
    ("checkpoint_completion_target", "-0"),
    ("vacuum_cost_delay", "2ms"),
    ("vacuum_cost_delay", "2MB"),
    ("vacuum_cost_delay", "0.5"),
    ("synchronous_commit", "remote_apply"),
    ("synchronous_commit", "TRUE"),
    ("synchronous_commit", "sometimes"),
    ("wal_compression", "lz4"),
    ("password_encryption", "true"),
    ("log_statement", "DDL"),
    ("jit", "of"),
    ("jit", "o"),
    ("jit", "t"),
    ("jit", "Yes"),
    ("jit", "maybe"),
    ("jit", "10"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_judged_as_postgresql_judges_them() {
    common::init_logs();
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    db.start(desired("db-1", db.address));
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    let client = db.superuser().await;
    let mut disagreements = Vec::new();
    for (name, value) in JUDGED {
        let quoted = value.replace('\'', "''");
        let postgres = client
            .batch_execute(&format!("ALTER SYSTEM SET {name} = '{quoted}'"))
            .await;
        let tusk = settings::value_rule(15, name, value);
        if postgres.is_ok() != tusk.is_none() {
            disagreements.push(format!(
                "{name} = {value:?}: PostgreSQL {}, Tusk {tusk:?}",
                postgres.map_or_else(|e| format!("refuses ({e:?})"), |()| "accepts".into())
            ));
        }
    }
    client
        .batch_execute("ALTER SYSTEM RESET ALL")
        .await
        .expect("reset");

    // The table is what the server says of every parameter it has.
    let rows = client
        .query(
            "SELECT name, vartype, coalesce(unit, ''), coalesce(min_val, ''), \
             coalesce(max_val, ''), coalesce(array_to_string(enumvals, ','), '') \
             FROM pg_settings ORDER BY name",
            &[],
        )
        .await
        .expect("pg_settings");
    let live: Vec<String> = rows
        .iter()
        .map(|row| {
            (0..6)
                .map(|i| row.get::<_, String>(i))
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect();
    db.stop(Duration::from_secs(30)).await;
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    assert_eq!(table_without_hidden_spellings(15), live);
}

/// `settings/<major>.tsv` without its comment and the hidden spellings
/// (found by probing, which pg_settings does not list).
fn table_without_hidden_spellings(major: u32) -> Vec<String> {
    let path = format!(
        "{}/../postgres/src/parameters/settings/{major}.tsv",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .expect("the table")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('|').next().unwrap_or(l).to_owned())
        .collect()
}

/// Every major's table lists what its server describes, with the same
/// types and ranges (`postgres --describe-config`, no server needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_majors_table_matches_its_server() {
    let user = ProcessUser::detect("postgres").expect("the postgres user");
    for major in tusk_postgres::version::SUPPORTED_MAJORS {
        let bin = tusk_postgres::version::local_bin_dir(major);
        let output = user
            .command(&bin.join("postgres"))
            .arg("--describe-config")
            .output()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL {major} in {} (scripts/setup): {e}",
                    bin.display()
                )
            });
        let described: Vec<(String, String, String, String)> =
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split('\t').collect();
                    // name, context, group, type, default, min, max, ...
                    Some((
                        fields.first()?.to_string(),
                        fields.get(3)?.to_lowercase().replace("boolean", "bool"),
                        fields.get(5)?.to_string(),
                        fields.get(6)?.to_string(),
                    ))
                })
                .collect();
        let table = table_without_hidden_spellings(major);
        for (name, kind, min, max) in &described {
            let row = table
                .iter()
                .find(|l| l.split('\t').next() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("{major}: {name} is missing from the table"));
            let fields: Vec<&str> = row.split('\t').collect();
            assert_eq!(fields[1], kind, "{major}: {name}'s type");
            if kind == "integer" || kind == "real" {
                assert_eq!(
                    (fields[3], fields[4]),
                    (min.as_str(), max.as_str()),
                    "{major}: {name}'s range"
                );
            }
        }
        assert!(
            described.len() > 300,
            "{major}: {} described",
            described.len()
        );
    }
}

/// A value the major refuses never reaches `postgresql.conf`: not at the
/// first bootstrap (the instance waits, saying which parameter and why,
/// instead of creating a cluster that cannot start), and not on a running
/// server (it keeps serving with what it has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_the_major_refuses_is_reported_and_never_written() {
    common::init_logs();
    let mut cluster = TestCluster::new();
    let mut db = cluster.instance("db-1");
    let mut refused = desired("db-1", db.address);
    refused
        .parameters
        .insert("shared_buffers".into(), "Retain".into());
    db.start(refused.clone());
    let report = db
        .wait_refusal("shared_buffers", Duration::from_secs(30))
        .await;
    assert!(!report.ready, "{report:?}");
    assert!(
        db.state.snapshot().postmaster_pid.is_none(),
        "nothing started"
    );

    let good = desired("db-1", db.address);
    db.set_desired(good.clone());
    db.wait_status("a ready primary", Duration::from_secs(60), |r| r.ready)
        .await;
    let mut bad_later = good.clone();
    bad_later
        .parameters
        .insert("max_connections".into(), "-1Gi".into());
    db.set_desired(bad_later);
    let report = db
        .wait_refusal("max_connections", Duration::from_secs(10))
        .await;
    assert!(report.ready, "still serving: {report:?}");
    let client = db.superuser().await;
    let max: String = client
        .query_one("SHOW max_connections", &[])
        .await
        .expect("max_connections")
        .get(0);
    assert_eq!(max, "30", "the test setting stands");
    db.stop(Duration::from_secs(30)).await;
}
