//! Running an external command (kubectl, docker) from a test with a time
//! limit: a test must fail loudly, never hang.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `command` to completion within `limit`; panics (after killing it)
/// when it does not finish or cannot start.
pub fn run_within(command: &mut Command, limit: Duration) -> Output {
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    // Drained on their own threads so a chatty command never blocks on a
    // full pipe while we wait for it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{shown} did not finish within {limit:?}");
            }
            Err(e) => panic!("waiting for {shown}: {e}"),
        }
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Like [`run_within`], and panics with the command's output unless it
/// succeeded; returns its standard output.
pub fn succeed_within(command: &mut Command, limit: Duration) -> String {
    let shown = format!("{command:?}");
    succeeded(&shown, &run_within(command, limit))
}

/// The standard output of `shown`, which must have succeeded (else a panic
/// with everything it printed).
pub fn succeeded(shown: &str, output: &Output) -> String {
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
