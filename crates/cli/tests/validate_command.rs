//! `tusk validate` end to end: the shipped examples pass, every invalid
//! fixture is refused with a message naming the field and the rule, and
//! the command's own failures are told apart from refused input.
//!
//! Fixtures live in `tests/fixtures/invalid/`. Each starts with one or more
//! `# expect: TEXT` lines that must all appear in the output; a sibling
//! `NAME.old.yaml` makes the check an update of that earlier object.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tusk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("tusk runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_examples_are_valid() {
    let examples: Vec<PathBuf> = std::fs::read_dir(repo_root().join("deploy/examples"))
        .expect("deploy/examples exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    assert!(
        examples.len() >= 2,
        "expected the orders and small examples"
    );
    for example in examples {
        let path = example.to_string_lossy().into_owned();
        let output = tusk(&["validate", "-f", &path]);
        assert!(output.status.success(), "{path}: {}", stdout(&output));
        assert!(stdout(&output).contains(": valid"), "{}", stdout(&output));
    }
}

#[test]
fn every_invalid_fixture_is_refused_with_its_message() {
    refuses_every_fixture_in("crates/cli/tests/fixtures/invalid", 20);
}

/// What the CRD's rules accept but the operator refuses (a parameter's
/// value under its major's rules, a parameter of another major, resource
/// quantities), which its admission webhook refuses, is refused by `tusk
/// validate` too, so no one learns it from a cluster's `InvalidSpec`
/// condition after apply.
#[test]
fn what_only_the_operator_refuses_is_refused_with_its_message() {
    refuses_every_fixture_in("crates/cli/tests/fixtures/operator-refuses", 4);
}

/// Each fixture in `dir` (at least `at_least`) is refused with exit 1 and
/// the messages its `# expect:` lines give.
fn refuses_every_fixture_in(dir: &str, at_least: usize) {
    let dir = repo_root().join(dir);
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures exist")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|p| {
            p.to_string_lossy().ends_with(".yaml") && !p.to_string_lossy().ends_with(".old.yaml")
        })
        .collect();
    fixtures.sort();
    assert!(
        fixtures.len() >= at_least,
        "found only {} fixtures",
        fixtures.len()
    );
    let mut failures = Vec::new();
    for fixture in fixtures {
        let text = std::fs::read_to_string(&fixture).expect("fixture is readable");
        let expected: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# expect: "))
            .collect();
        assert!(
            !expected.is_empty(),
            "{} has no '# expect:' line",
            fixture.display()
        );
        let path = fixture.to_string_lossy().into_owned();
        let old = path.replace(".yaml", ".old.yaml");
        let mut args = vec!["validate", "-f", path.as_str()];
        if Path::new(&old).exists() {
            args.extend(["--old", old.as_str()]);
        }
        let output = tusk(&args);
        let out = stdout(&output);
        if output.status.code() != Some(1) {
            failures.push(format!(
                "{path}: exit {:?}, output {out}",
                output.status.code()
            ));
        }
        for text in expected {
            if !out.contains(text) {
                failures.push(format!("{path}: missing {text:?} in {out}"));
            }
        }
        // One line per violation, each naming the file and the object.
        for line in out.lines() {
            if !line.starts_with(&path) {
                failures.push(format!("{path}: line without the file name: {line}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_valid_update_passes_with_old() {
    let dir = "crates/cli/tests/fixtures/invalid";
    // Growing storage is an update the shrink fixture's old object allows.
    let scratch = tempfile::tempdir().expect("temp dir");
    let grown = scratch.path().join("grown.yaml");
    let old = std::fs::read_to_string(repo_root().join(dir).join("storage-shrink.old.yaml"))
        .expect("fixture");
    std::fs::write(&grown, old.replace("500Gi", "800Gi")).expect("temp file");
    let output = tusk(&[
        "validate",
        "-f",
        &grown.to_string_lossy(),
        "--old",
        &format!("{dir}/storage-shrink.old.yaml"),
    ]);
    assert!(output.status.success(), "{}", stdout(&output));
    assert!(stdout(&output).contains("valid update"));
}

/// A cluster with one parameter and one pod annotation, each written as
/// given (`off` unquoted, `"off"` quoted).
fn cluster_with(jit: &str, backup: &str) -> String {
    format!(
        "apiVersion: postgres.tusk.dev/v1alpha1
kind: PostgresCluster
metadata:
  name: jit
spec:
  instances: 1
  postgres:
    version: 16
    parameters:
      jit: {jit}
  podTemplate:
    annotations:
      example.com/backup: {backup}
  storage:
    size: 1Gi
"
    )
}

fn validate_text(text: &str) -> Output {
    let scratch = tempfile::tempdir().expect("temp dir");
    let path = scratch.path().join("cluster.yaml");
    std::fs::write(&path, text).expect("temp file");
    tusk(&["validate", "-f", &path.to_string_lossy()])
}

/// kubectl reads YAML 1.1, where an unquoted `off` or `yes` is a boolean,
/// and the API server refuses a boolean in a string field: so does
/// `tusk validate`, naming the field and saying to quote it.
#[test]
fn an_unquoted_yaml_1_1_boolean_in_a_string_field_is_refused_with_a_hint_to_quote_it() {
    let output = validate_text(&cluster_with("off", "yes"));
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    for expected in [
        r#"PostgresCluster/jit: spec.postgres.parameters.jit: must be a string (YAML 1.1 reads an unquoted off as a boolean: quote it, "off")"#,
        r#"PostgresCluster/jit: spec.podTemplate.annotations.example.com/backup: must be a string (YAML 1.1 reads an unquoted yes as a boolean: quote it, "yes")"#,
    ] {
        assert!(out.contains(expected), "missing {expected:?} in {out}");
    }
}

#[test]
fn a_quoted_off_is_a_string_and_valid() {
    for quoted in [r#""off""#, "'off'"] {
        let output = validate_text(&cluster_with(quoted, r#""yes""#));
        let out = stdout(&output);
        assert!(output.status.success(), "{quoted}: {out}");
        assert!(out.contains("PostgresCluster/jit: valid"), "{out}");
    }
}

#[test]
fn a_label_read_as_a_boolean_is_refused_whatever_the_kind() {
    let text = cluster_with(r#""off""#, r#""yes""#)
        .replace("  name: jit\n", "  name: jit\n  labels:\n    backup: on\n");
    let output = validate_text(&text);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains(r#"metadata.labels.backup: must be a string (YAML 1.1 reads an unquoted on as a boolean: quote it, "on")"#),
        "{out}"
    );
}

#[test]
fn a_missing_file_is_an_error_not_a_verdict() {
    let output = tusk(&["validate", "-f", "no/such/file.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read no/such/file.yaml"), "{stderr}");
}

#[test]
fn broken_yaml_is_reported_with_the_file() {
    let scratch = tempfile::tempdir().expect("temp dir");
    let broken = scratch.path().join("broken.yaml");
    std::fs::write(&broken, "kind: [unclosed\n").expect("temp file");
    let output = tusk(&["validate", "-f", &broken.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not valid YAML"), "{stderr}");
}

#[test]
fn validate_requires_a_file() {
    let output = tusk(&["validate"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "clap reports usage errors with exit 2"
    );
}
