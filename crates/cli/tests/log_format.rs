//! `--log-format json` / `TUSK_LOG_FORMAT=json`: the operator and the
//! instance manager, run as the real binary, write only JSON objects, one a
//! line, with the expected fields; `text` gives human-readable lines.

use std::io::BufRead;
use std::io::BufReader;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `tusk ARGS` with only `env` set, bounded by `TIMEOUT`.
fn tusk(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tusk starts");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            panic!("tusk {args:?} still running after {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// Every line of stdout and stderr, each parsed as a JSON object.
fn json_lines(output: &Output) -> Vec<Value> {
    let text = [output.stdout.as_slice(), output.stderr.as_slice()].concat();
    let text = String::from_utf8(text).expect("utf-8");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): `{line}`\nin\n{text}"));
            for field in ["timestamp", "level", "target", "message"] {
                assert!(value[field].is_string(), "no `{field}` in `{line}`");
            }
            value
        })
        .collect();
    assert!(!lines.is_empty(), "nothing logged");
    lines
}

#[test]
fn the_operator_logs_json_lines_when_the_environment_asks() {
    // No kubeconfig and no in-cluster environment: it logs its start, then
    // why it stops.
    let output = tusk(
        &[
            "operator",
            "--no-leader-election",
            "--http-address",
            "127.0.0.1:0",
        ],
        &[
            ("TUSK_LOG_FORMAT", "json"),
            ("KUBECONFIG", "/nonexistent/kubeconfig"),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    let lines = json_lines(&output);
    assert!(
        lines.iter().any(|l| l["message"] == "operator starting"
            && l["level"] == "INFO"
            && l["watch_namespace"] == "(all)"),
        "{lines:#?}"
    );
    let stop = lines.last().expect("a line");
    assert_eq!(stop["level"], "ERROR", "{lines:#?}");
    assert!(
        stop["error"]
            .as_str()
            .is_some_and(|e| e.contains("/nonexistent/kubeconfig")),
        "{lines:#?}"
    );
}

#[test]
fn the_instance_manager_names_its_cluster_namespace_and_instance_on_every_line() {
    let secrets = tempfile::tempdir().expect("temp dir");
    let secrets_dir = secrets.path().to_str().expect("utf-8 path");
    // No credential files: the manager stops after installing its logger.
    let output = tusk(
        &["instance", "run", "--log-format", "json"],
        &[
            ("POD_NAME", "orders-2"),
            ("POD_NAMESPACE", "shop"),
            ("CLUSTER_NAME", "orders"),
            ("POD_IP", "127.0.0.1"),
            ("PGDATA", "/nonexistent/pgdata"),
            ("PG_BIN_DIR", "/nonexistent/bin"),
            ("TUSK_SECRETS_DIR", secrets_dir),
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    for line in json_lines(&output) {
        assert_eq!(line["cluster"], "orders", "{line}");
        assert_eq!(line["namespace"], "shop", "{line}");
        assert_eq!(line["instance"], "orders-2", "{line}");
    }
}

#[test]
fn json_is_the_default_and_text_an_option() {
    let run = |env: &[(&str, &str)]| {
        let mut env = env.to_vec();
        env.push(("KUBECONFIG", "/nonexistent/kubeconfig"));
        let output = tusk(
            &[
                "operator",
                "--no-leader-election",
                "--http-address",
                "127.0.0.1:0",
            ],
            &env,
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let default = run(&[]);
    let first = default.lines().next().expect("a line");
    let line: Value = serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {default}"));
    assert_eq!(line["message"], "operator starting", "{default}");
    let text = run(&[("TUSK_LOG_FORMAT", "text")]);
    let first = text.lines().next().expect("a line");
    assert!(first.contains("operator starting"), "{text}");
    assert!(serde_json::from_str::<Value>(first).is_err(), "{text}");
}

/// Lines of a child's stream, read on a thread.
fn lines_of(stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `TIMEOUT` for a line of `rx` that `wanted` accepts,
/// returning every line read.
fn read_until(rx: &Receiver<String>, wanted: impl Fn(&str) -> bool) -> (Vec<String>, bool) {
    let deadline = Instant::now() + TIMEOUT;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            let found = wanted(&line);
            seen.push(line);
            if found {
                return (seen, true);
            }
        }
    }
    (seen, false)
}

/// Kills a child when dropped, so a failed assertion leaves nothing behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_operator_names_the_cluster_and_namespace_while_reconciling() {
    // A sandbox API server only: the operator's pods stay pending, but its
    // first reconcile already publishes events, logged in its span.
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sandbox = Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args([
            "sandbox",
            "up",
            "--no-kubelet",
            "--no-operator",
            "--port",
            "0",
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the sandbox starts");
    let sandbox_out = lines_of(sandbox.stdout.take().expect("stdout"));
    let sandbox = Killed(sandbox);
    let (_, ready) = read_until(&sandbox_out, |line| line.contains("ready"));
    assert!(ready, "the sandbox did not print its ready line");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut operator = Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args([
            "operator",
            "--no-leader-election",
            "--http-address",
            "127.0.0.1:0",
        ])
        .args(["--log-format", "json"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("TUSK_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the operator starts");
    let operator_err = lines_of(operator.stderr.take().expect("stderr"));
    let operator = Killed(operator);
    let manifest = Command::new("kubectl")
        .args(["apply", "-f"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/examples/small.yaml"
        ))
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", dir.path())
        .output()
        .expect("kubectl runs");
    assert!(
        manifest.status.success(),
        "{}",
        String::from_utf8_lossy(&manifest.stderr)
    );
    let (lines, found) = read_until(&operator_err, |line| {
        serde_json::from_str::<Value>(line)
            .is_ok_and(|v| v["cluster"] == "small" && v["namespace"] == "default")
    });
    drop(operator);
    drop(sandbox);
    assert!(found, "no line names the cluster:\n{}", lines.join("\n"));
    for line in &lines {
        let value: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): `{line}`"));
        assert!(value["message"].is_string(), "{line}");
    }
}
