//! Every parameter value admission accepts renders to a `postgresql.conf`
//! that real PostgreSQL parses and reads back unchanged: quotes, doubled
//! quotes, backslashes (before a quote, a letter, a digit), comment and
//! assignment characters, spaces at either end, non-ASCII text.

mod common;

use std::time::Duration;

use common::{TestCluster, desired};
use tusk_postgres::parameters::parameter_problem;

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
