//! The monitoring files in `deploy/monitoring` against the code: every
//! alert and dashboard expression parses as PromQL and names only metrics
//! the operator and the instance manager export (read from their own
//! `# TYPE` lines), or one of the few documented metrics from elsewhere.

use std::collections::BTreeSet;
use std::path::PathBuf;

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr};
use serde_json::Value;

/// Metrics the alerts and the dashboard use that Tusk does not export,
/// each with where it comes from (docs/observability.md lists them too).
const EXTERNAL_METRICS: &[(&str, &str)] = &[
    ("up", "Prometheus, for every scrape target"),
    (
        "kubelet_volume_stats_available_bytes",
        "the kubelet, per mounted PVC",
    ),
    (
        "kubelet_volume_stats_capacity_bytes",
        "the kubelet, per mounted PVC",
    ),
];

fn repo_file(path: &str) -> String {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The series names a `# TYPE` line allows: a counter's `_total`, a
/// histogram's `_bucket`, `_sum` and `_count`.
fn names_of_type_lines(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            panic!("malformed TYPE line `{line}`");
        };
        match kind {
            "counter" => {
                let base = name.strip_suffix("_total").unwrap_or(name);
                names.insert(format!("{base}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// Every metric the code exports: the operator's registry and an instance
/// whose report has every optional figure set.
fn exported_metrics() -> BTreeSet<String> {
    // A family appears only once it has a series: give each one.
    let operator = tusk_operator::metrics::Metrics::default();
    operator.reconciled(std::time::Instant::now(), None);
    operator.reconciled(
        std::time::Instant::now(),
        Some(tusk_operator::error::ErrorCategory::Throttled),
    );
    let cluster: tusk_api::v1alpha1::PostgresCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
        "metadata": {"name": "db"},
        "spec": {"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"}},
        "status": {"phase": "Ready", "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
             "lastTransitionTime": "2026-12-02T10:00:00Z"}
        ]}
    }))
    .expect("a cluster");
    operator.count_clusters([&cluster].into_iter());
    let mut names = names_of_type_lines(&operator.encode());
    let report: tusk_api::instance::InstanceReport = serde_json::from_value(serde_json::json!({
        "name": "db-2", "role": "replica", "phase": "running", "ready": true,
        "fenced": false, "timeline": 2, "replayedLsn": "0/3000", "lagBytes": 10,
        "lagSeconds": 0.5, "pendingRestart": [], "standbys": [], "crashCount": 0,
        "archiving": {"stanza": "db", "stanzaCreated": true, "failing": false,
                      "archivedCount": 1, "failedCount": 0, "pendingSegments": 0}
    }))
    .expect("an instance report");
    let figures = tusk_instance::observe::DatabaseFigures {
        connections: 1,
        database_size_bytes: 1,
        transaction_id_age: 1,
    };
    names.extend(names_of_type_lines(&tusk_instance::metrics::render(
        &report,
        Some(&figures),
    )));
    names
}

fn allowed_metrics() -> BTreeSet<String> {
    let mut names = exported_metrics();
    names.extend(EXTERNAL_METRICS.iter().map(|(name, _)| (*name).to_owned()));
    names
}

/// The metric names an expression selects (by name or `__name__="..."`).
fn metric_names(expr: &Expr, out: &mut BTreeSet<String>) {
    let selector = |vs: &parser::VectorSelector, out: &mut BTreeSet<String>| {
        out.extend(vs.name.clone());
        for matcher in &vs.matchers.matchers {
            if matcher.name == "__name__" {
                assert!(
                    matches!(matcher.op, MatchOp::Equal),
                    "select metrics by exact name, not `{}`",
                    matcher.value
                );
                out.insert(matcher.value.clone());
            }
        }
    };
    match expr {
        Expr::VectorSelector(vs) => selector(vs, out),
        Expr::MatrixSelector(ms) => selector(&ms.vs, out),
        Expr::Aggregate(agg) => {
            metric_names(&agg.expr, out);
            if let Some(param) = &agg.param {
                metric_names(param, out);
            }
        }
        Expr::Unary(unary) => metric_names(&unary.expr, out),
        Expr::Binary(binary) => {
            metric_names(&binary.lhs, out);
            metric_names(&binary.rhs, out);
        }
        Expr::Paren(paren) => metric_names(&paren.expr, out),
        Expr::Subquery(sub) => metric_names(&sub.expr, out),
        Expr::Call(call) => {
            for arg in &call.args.args {
                metric_names(arg, out);
            }
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Parses `expr` and checks its metrics against `allowed`; returns the
/// problems found, naming `what`.
fn check_expression(what: &str, expr: &str, allowed: &BTreeSet<String>) -> Vec<String> {
    let parsed = match parser::parse(expr) {
        Ok(parsed) => parsed,
        Err(error) => return vec![format!("{what}: `{expr}` does not parse: {error}")],
    };
    let mut used = BTreeSet::new();
    metric_names(&parsed, &mut used);
    let mut problems = Vec::new();
    if used.is_empty() {
        problems.push(format!("{what}: `{expr}` selects no metric"));
    }
    for name in used.difference(allowed) {
        problems.push(format!(
            "{what}: metric `{name}` is exported neither by Tusk nor listed in EXTERNAL_METRICS"
        ));
    }
    problems
}

fn rules() -> Value {
    serde_yaml_ng::from_str(&repo_file("deploy/monitoring/prometheus-rule.yaml"))
        .expect("prometheus-rule.yaml is YAML")
}

fn dashboard() -> Value {
    serde_json::from_str(&repo_file("deploy/monitoring/grafana-dashboard.json"))
        .expect("grafana-dashboard.json is JSON")
}

fn alerts(rules: &Value) -> Vec<&Value> {
    rules["spec"]["groups"]
        .as_array()
        .expect("spec.groups is a list")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("each group has rules"))
        .collect()
}

#[test]
fn the_exporters_are_read() {
    // The allow-list is only as good as the names read from the code.
    let names = exported_metrics();
    for name in [
        "tusk_operator_reconciles_total",
        "tusk_operator_reconcile_duration_seconds_bucket",
        "tusk_operator_clusters_by_condition",
        "tusk_postgres_replication_lag_seconds",
        "tusk_postgres_transaction_id_age",
        "tusk_postgres_up",
    ] {
        assert!(names.contains(name), "`{name}` missing from {names:?}");
    }
    assert!(!names.contains("tusk_postgres_nonexistent"));
}

#[test]
fn an_unknown_metric_or_a_bad_expression_is_reported() {
    let allowed = allowed_metrics();
    assert!(check_expression("x", "rate(tusk_operator_reconciles_total[5m])", &allowed).is_empty());
    let unknown = check_expression("x", "tusk_postgres_backup_age_seconds > 1", &allowed);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    let bad = check_expression("x", "sum by (cluster (tusk_postgres_up)", &allowed);
    assert_eq!(bad.len(), 1, "{bad:?}");
}

#[test]
fn the_prometheus_rule_has_the_expected_shape() {
    let rules = rules();
    assert_eq!(rules["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rules["kind"], "PrometheusRule");
    assert!(rules["metadata"]["name"].is_string(), "metadata.name");
    let runbook = repo_file("docs/runbook.md");
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(github_anchor)
        .collect();
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for alert in alerts(&rules) {
        let name = alert["alert"].as_str().expect("every rule is an alert");
        assert!(names.insert(name), "alert {name} appears twice");
        for field in ["expr", "for"] {
            if !alert[field].is_string() {
                problems.push(format!("{name}: `{field}` missing"));
            }
        }
        let severity = alert["labels"]["severity"].as_str().unwrap_or_default();
        if !["critical", "warning", "info"].contains(&severity) {
            problems.push(format!("{name}: severity `{severity}`"));
        }
        for annotation in ["summary", "description", "runbook_url"] {
            if !alert["annotations"][annotation].is_string() {
                problems.push(format!("{name}: annotation `{annotation}` missing"));
            }
        }
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        match url.split_once("docs/runbook.md#") {
            Some((_, anchor)) if anchors.contains(anchor) => {}
            _ => problems.push(format!(
                "{name}: runbook_url `{url}` names no heading of docs/runbook.md"
            )),
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// to dashes.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_expression_parses_and_names_exported_metrics() {
    let allowed = allowed_metrics();
    let rules = rules();
    let mut problems = Vec::new();
    for alert in alerts(&rules) {
        let name = alert["alert"].as_str().unwrap_or("?");
        let expr = alert["expr"].as_str().unwrap_or_default();
        problems.extend(check_expression(name, expr, &allowed));
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn every_dashboard_panel_queries_exported_metrics() {
    let allowed = allowed_metrics();
    let dashboard = dashboard();
    assert!(dashboard["title"].is_string(), "title");
    let panels = dashboard["panels"].as_array().expect("panels is a list");
    let mut problems = Vec::new();
    let mut queried = 0;
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        let title = panel["title"].as_str().unwrap_or("?");
        if !panel["datasource"].is_object() {
            problems.push(format!("{title}: no datasource"));
        }
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("{title}: no targets"));
        }
        for target in targets {
            let expr = target["expr"].as_str().unwrap_or_default();
            problems.extend(check_expression(title, expr, &allowed));
            queried += 1;
        }
    }
    // Template variables query with Grafana's label_values(SELECTOR, LABEL).
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(query) = variable["query"]["query"].as_str() else {
            continue;
        };
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|rest| rest.rsplit_once(','))
            .map(|(selector, _)| selector);
        match inner {
            Some(selector) => problems.extend(check_expression(query, selector, &allowed)),
            None => problems.push(format!("variable query `{query}` is not label_values")),
        }
    }
    assert!(queried >= 10, "only {queried} queries");
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The instance managers serve `/metrics` over HTTPS (their probes and the
/// operator do too): a PodMonitor scraping them in plain HTTP would report
/// every instance down.
#[test]
fn the_instances_are_scraped_over_https() {
    use serde::Deserialize;
    let text = repo_file("deploy/monitoring/pod-monitors.yaml");
    let monitors: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .collect();
    let instances = monitors
        .iter()
        .find(|m| m["metadata"]["name"] == "tusk-postgres")
        .expect("the instances' PodMonitor");
    let endpoint = &instances["spec"]["podMetricsEndpoints"][0];
    assert_eq!(endpoint["port"], "http");
    assert_eq!(endpoint["scheme"], "https", "{endpoint}");
}
