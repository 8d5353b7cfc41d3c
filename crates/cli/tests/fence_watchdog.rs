//! The fence watchdog as the instance manager starts it (`tusk instance
//! watchdog`, fed through `tusk_instance::fence::Watchdog`), with a
//! stand-in for PostgreSQL: a process working in the data directory, run
//! as the PostgreSQL user like the watchdog. Renewed, it lives; disarmed,
//! it lives past any deadline; once renewals stop, it is killed at the
//! deadline, not before, even when the watchdog was sent SIGTERM.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;
use tusk_instance::fence::Watchdog;
use tusk_instance::process_user::ProcessUser;

/// How far ahead each renewal sets the deadline in this test.
const FENCE_AFTER: Duration = Duration::from_millis(300);

/// True when `child` is still running after `pause`.
async fn alive_after(child: &mut tokio::process::Child, pause: Duration) -> bool {
    tokio::time::sleep(pause).await;
    matches!(child.try_wait(), Ok(None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_kills_what_works_in_the_data_directory_once_renewals_stop() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("reachable by the PostgreSQL user");
    let pgdata = dir.path().join("pgdata");
    let user = ProcessUser::detect("postgres").expect("the PostgreSQL user");
    user.private_dir(&pgdata).expect("data directory");

    let mut watchdog = Watchdog::start(Path::new(env!("CARGO_BIN_EXE_tusk")), &pgdata, &user)
        .expect("the watchdog starts");
    let mut stand_in = user
        .command(Path::new("/bin/sleep"))
        .arg("60")
        .current_dir(&pgdata)
        .stdin(Stdio::null())
        .spawn()
        .expect("a process in the data directory");

    // Renewed every 100 ms for 1.5 s: well past one fence time.
    for _ in 0..15 {
        watchdog.arm(Instant::now() + FENCE_AFTER);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        alive_after(&mut stand_in, Duration::ZERO).await,
        "killed while renewed"
    );

    // Disarmed (the lease released): no deadline passes.
    watchdog.disarm();
    assert!(
        alive_after(&mut stand_in, FENCE_AFTER * 3).await,
        "killed while disarmed"
    );

    // A termination signal does not stop the watchdog.
    let pid = watchdog.pid().expect("the watchdog runs").to_string();
    signal("-TERM", &pid);

    // The last renewal: killed once its deadline passes.
    let renewed = Instant::now();
    watchdog.arm(renewed + FENCE_AFTER);
    let deadline = renewed + Duration::from_secs(5);
    let exited = loop {
        if let Ok(Some(_)) = stand_in.try_wait() {
            break Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "still alive 5 s after the deadline"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let after = exited - renewed;
    println!("killed {after:?} after the last renewal (deadline {FENCE_AFTER:?})");
    assert!(
        after >= FENCE_AFTER,
        "killed before the deadline: {after:?}"
    );
    assert!(
        after < FENCE_AFTER + Duration::from_millis(500),
        "killed late: {after:?}"
    );
    signal("-KILL", &pid);
}

/// Sends `signal` to process `pid` with kill(1).
fn signal(signal: &str, pid: &str) {
    let sent = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill {signal} {pid}");
}
