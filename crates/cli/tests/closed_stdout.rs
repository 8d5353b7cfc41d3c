//! A closed standard output ends `tusk` quietly: `tusk crds | head -1`
//! exits 0 with nothing on stderr, as other Unix tools do, instead of
//! panicking with `failed printing to stdout: Broken pipe`.
//!
//! Each command runs with its stdout a pipe: either read for one line and
//! then closed (as `head -1` does), or closed before the command writes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tusk(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tusk"));
    command
        .args(args)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Runs `tusk args`, reads the first line it prints, then closes the pipe.
fn first_line_then_closed(args: &[&str]) -> (String, Output) {
    let mut child = tusk(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("tusk starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("a first line");
    let output = child.wait_with_output().expect("tusk ends");
    (line, output)
}

/// Runs `tusk args` with its stdout a pipe nobody reads: closed at once.
fn closed_from_the_start(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    tusk(args).stdout(writer).output().expect("tusk runs")
}

fn assert_quiet(shown: &str, output: &Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{shown}: {:?}, stderr: {stderr}",
        output.status
    );
    assert!(stderr.is_empty(), "{shown}: stderr: {stderr}");
}

#[test]
fn crds_piped_into_head_ends_quietly() {
    let (line, output) = first_line_then_closed(&["crds"]);
    assert!(!line.is_empty());
    assert_quiet("tusk crds | head -1", &output);
}

#[test]
fn the_installation_piped_into_head_ends_quietly() {
    let (line, output) = first_line_then_closed(&["install", "--print"]);
    assert!(!line.is_empty());
    assert_quiet("tusk install --print | head -1", &output);
}

#[test]
fn commands_that_print_end_quietly_when_stdout_is_already_closed() {
    for args in [
        &["crds"][..],
        &["crds", "--list"],
        &["install", "--print"],
        &["validate", "-f", "deploy/examples/orders.yaml"],
        &["--version"],
        &["--help"],
    ] {
        let output = closed_from_the_start(args);
        assert_quiet(&format!("tusk {}", args.join(" ")), &output);
    }
}

/// A command that finds the input refused still says so by its exit code
/// when nobody reads what it prints.
#[test]
fn a_refusal_keeps_its_exit_code_when_stdout_is_closed() {
    let output = closed_from_the_start(&[
        "validate",
        "-f",
        "crates/cli/tests/fixtures/invalid/zero-instances.yaml",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
