//! Orphans reparented to the manager (PID 1 in a container) are reaped.
//! This test binary makes itself a child subreaper, which gives it the
//! orphans PID 1 would get, so it runs apart from the others.

use std::time::{Duration, Instant};

use tusk_instance::reaper;
use tusk_instance::state::SharedState;

fn state_of(pid: i32) -> Option<char> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    reaper::parse_stat(&line).map(|stat| stat.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_zombies_are_reaped() {
    nix::sys::prctl::set_child_subreaper(true).expect("become a child subreaper");
    // The shell prints its background child's pid and exits: the child is
    // orphaned, reparented to this process, and becomes a zombie when done.
    let output = std::process::Command::new("sh")
        .args(["-c", "sleep 0.2 & echo $!"])
        .output()
        .expect("sh runs");
    let orphan: i32 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("the orphan's pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while state_of(orphan) != Some('Z') {
        assert!(
            Instant::now() < deadline,
            "the orphan never became a zombie of ours"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let reaper = tokio::spawn(reaper::run(
        Duration::from_millis(200),
        SharedState::default(),
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    while state_of(orphan).is_some() {
        assert!(Instant::now() < deadline, "the zombie was not reaped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reaper.abort();
}
