//! `tusk sandbox up` end to end: it prints `ready` and writes a kubeconfig
//! that kubectl uses as it is.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sandbox_up_serves_kubectl_with_the_written_kubeconfig() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tusk"))
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
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tusk starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut ready = None;
    while ready.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            ready = line.contains("ready").then_some(line);
        }
    }
    let result = ready.map(|_| {
        Command::new("kubectl")
            .args(["get", "namespaces"])
            .env("KUBECONFIG", dir.path().join("kubeconfig"))
            .env("HOME", dir.path())
            .output()
            .expect("kubectl runs")
    });
    let _ = child.kill();
    let _ = child.wait();
    let output = result.expect("the sandbox printed a ready line");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("default") && text.contains("Active"),
        "{text}"
    );
}

/// Starts `tusk sandbox up` with `args` on `dir` and waits for its ready
/// line.
fn sandbox_up(dir: &std::path::Path, args: &[&str]) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(["sandbox", "up", "--port", "0", "--data-dir"])
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tusk starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200))
            && line.contains("running; Ctrl-C")
        {
            return child;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the sandbox did not start in time");
}

fn kubectl(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("HOME", dir)
        .output()
        .expect("kubectl runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn fault(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tusk"))
        .args(["sandbox", "fault"])
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .output()
        .expect("tusk runs")
}

/// Polls `check` every 200 ms for 30 s at most.
fn within_30s(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn sandbox_fault_loses_and_restores_the_node() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut child = sandbox_up(
        dir.path(),
        &["--no-operator", "--node-monitor-grace-period", "2s"],
    );
    let ready = || {
        kubectl(
            dir.path(),
            &[
                "get",
                "node",
                "sandbox",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ],
        )
    };
    let taints = || {
        kubectl(
            dir.path(),
            &[
                "get",
                "node",
                "sandbox",
                "-o",
                "jsonpath={.spec.taints[*].key}",
            ],
        )
    };
    let outcome = std::panic::catch_unwind(|| {
        within_30s("the node to be Ready", || ready() == "True");
        let lost = fault(dir.path(), &["lose-node", "--processes", "freeze"]);
        assert!(
            lost.status.success(),
            "{}",
            String::from_utf8_lossy(&lost.stderr)
        );
        within_30s("the node to turn Unknown", || ready() == "Unknown");
        within_30s("the unreachable taint", || {
            taints().contains("node.kubernetes.io/unreachable")
        });
        let restored = fault(dir.path(), &["restore-node"]);
        assert!(
            restored.status.success(),
            "{}",
            String::from_utf8_lossy(&restored.stderr)
        );
        within_30s("the node to be Ready again", || {
            ready() == "True" && taints().is_empty()
        });
        let missing = fault(dir.path(), &["cut-api", "--namespace", "default", "ghost"]);
        assert!(!missing.status.success());
        let message = String::from_utf8_lossy(&missing.stderr);
        assert!(
            message.contains("ghost") && message.contains("not found"),
            "{message}"
        );
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
