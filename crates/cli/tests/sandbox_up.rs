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
