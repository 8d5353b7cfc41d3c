use super::*;

fn shell(script: &str, dir: &Path) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![("GREETING".into(), "hello".into())],
        working_dir: dir.to_owned(),
        user: None,
        log: dir.join("logs/main/0.log"),
        token_dir: None,
        root: false,
    }
}

#[tokio::test]
async fn output_env_and_working_dir_reach_the_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = shell("echo $GREETING; pwd; echo oops >&2; exit 3", dir.path());
    let mut process = Process::spawn(&spec).expect("spawn");
    let exit = tokio::time::timeout(Duration::from_secs(10), process.wait())
        .await
        .expect("exits in time");
    assert_eq!(
        exit,
        Exit {
            code: 3,
            signal: None,
            oom_killed: false,
        }
    );
    let log = std::fs::read(&spec.log).expect("log");
    let (entries, _) = super::super::logs::read::parse_entries(&log);
    let lines: Vec<(Stream, String)> = entries
        .iter()
        .map(|e| (e.stream, String::from_utf8_lossy(&e.content).into_owned()))
        .collect();
    let canonical = dir.path().canonicalize().expect("canonical");
    let stdout: Vec<&str> = lines
        .iter()
        .filter(|(s, _)| *s == Stream::Stdout)
        .map(|(_, l)| l.as_str())
        .collect();
    assert_eq!(stdout, vec!["hello", &*canonical.display().to_string()]);
    assert!(lines.contains(&(Stream::Stderr, "oops".to_owned())));
}

#[tokio::test]
async fn graceful_stop_lets_a_trapping_process_finish() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = shell(
        "trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.1; done",
        dir.path(),
    );
    let mut process = Process::spawn(&spec).expect("spawn");
    wait_for_log(&spec.log, "up").await;
    let exit = process.stop(Duration::from_secs(10)).await;
    assert_eq!(exit.code, 0);
    assert!(
        std::fs::read_to_string(&spec.log)
            .expect("log")
            .contains("bye")
    );
}

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = shell(
        "trap '' TERM; echo up; while :; do sleep 0.1; done",
        dir.path(),
    );
    let mut process = Process::spawn(&spec).expect("spawn");
    wait_for_log(&spec.log, "up").await;
    let started = Instant::now();
    let exit = process.stop(Duration::from_millis(500)).await;
    assert_eq!(exit.signal, Some(9));
    assert_eq!(exit.code, 137);
    assert!(started.elapsed() >= Duration::from_millis(500));
}

#[tokio::test]
async fn stopping_a_container_kills_a_descendant_that_left_its_group_and_outlives_the_leader() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("detached.pid");
    // A child in a session of its own that ignores SIGTERM: the leader
    // dies of the SIGTERM, the child is handed to init, and neither the
    // leader's group nor its tree reaches it any more.
    let spec = shell(
        &format!(
            "setsid sh -c 'trap \"\" TERM; exec sleep 60' & echo $! > {}; echo up; wait",
            pid_file.display()
        ),
        dir.path(),
    );
    let mut process = Process::spawn(&spec).expect("spawn");
    wait_for_log(&spec.log, "up").await;
    let detached: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    process.stop(Duration::from_secs(5)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{detached}")).exists() && !is_zombie(detached) {
        assert!(
            Instant::now() < deadline,
            "{detached}, of a session of its own, outlived its stopped container"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn dropping_a_process_kills_its_whole_group() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("child.pid");
    let spec = shell(
        &format!("sleep 60 & echo $! > {}; echo up; wait", pid_file.display()),
        dir.path(),
    );
    let process = Process::spawn(&spec).expect("spawn");
    wait_for_log(&spec.log, "up").await;
    let child: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    drop(process);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{child}")).exists() && !is_zombie(child) {
        assert!(
            Instant::now() < deadline,
            "child {child} outlived its container"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn only_the_chosen_processes_of_a_container_are_signalled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pids = dir.path().join("pids");
    let spec = shell(
        &format!(
            "sleep 61 & echo $! > {0}; sleep 62 & echo $! >> {0}; echo up; wait",
            pids.display()
        ),
        dir.path(),
    );
    let process = Process::spawn(&spec).expect("spawn");
    wait_for_log(&spec.log, "up").await;
    let children: Vec<i32> = std::fs::read_to_string(&pids)
        .expect("pid file")
        .lines()
        .map(|l| l.trim().parse().expect("pid"))
        .collect();
    let state = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        stat[stat.rfind(')').expect("name") + 2..]
            .chars()
            .next()
            .expect("state")
    };
    let stopped = signal_chosen(process.pid(), Signal::SIGSTOP, |line| {
        line.ends_with("sleep 61")
    });
    assert_eq!(stopped, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(children[0]) != 'T' {
        assert!(Instant::now() < deadline, "sleep 61 never stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_ne!(state(children[1]), 'T', "sleep 62 runs on");
    assert_ne!(state(process.pid()), 'T', "the shell runs on");
    signal_tree(process.pid(), Signal::SIGCONT);
}

#[tokio::test]
async fn a_recorded_process_left_by_a_killed_sandbox_is_stopped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let spec = shell("echo up; exec sleep 60", dir.path());
    let process = Process::spawn(&spec).expect("spawn");
    let pid = process.pid();
    let record_file = dir.path().join("pid");
    record(&record_file, pid);
    // As if the sandbox died: nothing stops the process.
    std::mem::forget(process);
    assert!(!is_zombie(pid), "the process runs");
    kill_recorded(&record_file).await;
    assert!(
        is_zombie(pid) || start_ticks(pid).is_none(),
        "the leftover process is gone"
    );
    assert!(!record_file.exists());
    // A record naming a process that no longer exists is only removed.
    std::fs::write(&record_file, format!("{pid} 1\n")).expect("write");
    kill_recorded(&record_file).await;
    assert!(!record_file.exists());
}

/// Runs `script` with `dir/token` shown at the token path; its output.
async fn run_isolated(dir: &Path, user: Option<(u32, u32)>, root: bool, script: &str) -> String {
    let volume = dir.join("volume");
    std::fs::create_dir_all(&volume).expect("volume");
    std::fs::write(volume.join("token"), "t0ken").expect("token");
    let mut spec = shell(script, dir);
    spec.token_dir = Some(volume);
    spec.user = user;
    spec.root = root;
    let mut process = Process::spawn(&spec).expect("spawn");
    let exit = tokio::time::timeout(Duration::from_secs(10), process.wait())
        .await
        .expect("exits in time");
    let log = std::fs::read_to_string(&spec.log).expect("log");
    assert!(exit.success(), "{exit:?}: {log}");
    let text = |line: &str| line.splitn(4, ' ').nth(3).map(|t| format!("{t}\n")); // CRI
    log.lines().filter_map(text).collect()
}

const READ_TOKEN: &str = "cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; \
    if echo x > /var/run/secrets/kubernetes.io/serviceaccount/token; then echo writable; else echo read-only; fi 2>/dev/null; \
    id -u";

fn host_sees_the_mount() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .contains("kubernetes.io/serviceaccount")
}

#[tokio::test]
async fn a_process_sees_its_token_at_the_fixed_path_and_the_host_does_not() {
    if !nix::unistd::geteuid().is_root() {
        // Covered by the user namespace test below.
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let nobody = nix::unistd::User::from_name("nobody")
        .ok()
        .flatten()
        .map_or(65534, |u| u.uid.as_raw());
    let log = run_isolated(dir.path(), Some((nobody, nobody)), true, READ_TOKEN).await;
    assert_eq!(log, format!("t0ken\nread-only\n{nobody}\n"));
    assert!(!host_sees_the_mount());
    assert!(
        !Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists(),
        "nothing is left on the host's path"
    );
}

#[tokio::test]
async fn without_root_a_user_namespace_gives_the_same_view() {
    if !Path::new("/var/run/secrets").is_dir() {
        // Only root can create it; as root, the other test does.
        let _ = std::fs::create_dir_all("/var/run/secrets");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let me = nix::unistd::geteuid().as_raw();
    match TokenMount::new(&dir.path().join("volume"), None, false) {
        Err(IsolationError::NoSecretsDir) => return,
        Err(error) => panic!("{error}"),
        Ok(_) => {}
    }
    let log = run_isolated(dir.path(), None, false, READ_TOKEN).await;
    assert!(log.starts_with("t0ken\n"), "{log}");
    assert!(log.ends_with(&format!("{me}\n")), "the same user: {log}");
    assert!(!host_sees_the_mount());
}

async fn wait_for_log(path: &Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if std::fs::read_to_string(path).is_ok_and(|log| log.contains(text)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{text:?} never appeared in {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
