//! The one-command experience end to end: `tusk sandbox up --apply` with a
//! PostgresCluster runs real PostgreSQL through the operator (installed
//! from its install objects and running as its Deployment's pod), the
//! kubelet and the instance manager; psql reaches it through the
//! read-write Service; Ctrl-C stops every process; starting again brings
//! the data back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// A running `tusk sandbox up`, interrupted (then killed) when dropped so a
/// failing test leaves no processes behind.
struct Up {
    child: Child,
    lines: Receiver<String>,
}

impl Up {
    fn start(data_dir: &Path, apply: Option<&Path>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tusk"));
        command.args(["sandbox", "up", "--data-dir"]).arg(data_dir);
        if let Some(file) = apply {
            command.arg("--apply").arg(file);
        }
        let mut child = command
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("tusk starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// Waits for an output line containing `text`.
    fn wait_for_line(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                if line.contains(text) {
                    return line;
                }
                seen.push(line);
            }
        }
        panic!("no line with {text:?} within {timeout:?}; saw {seen:#?}");
    }

    /// Ctrl-C, then waits for a clean exit.
    fn interrupt(&mut self, timeout: Duration) -> bool {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) && !self.interrupt(Duration::from_secs(30)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn kubectl(data_dir: &Path, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", data_dir.join("kubeconfig"))
        .env("HOME", data_dir)
        .output()
        .expect("kubectl runs (scripts/setup installs it)");
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn psql(data_dir: &Path, sql: &str) -> Result<String, String> {
    let address = kubectl(
        data_dir,
        &[
            "get",
            "service",
            "small-rw",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let field = |name: &str| {
        kubectl(
            data_dir,
            &[
                "get",
                "secret",
                "small-app",
                "-o",
                &format!("go-template={{{{.data.{name} | base64decode}}}}"),
            ],
        )
    };
    let output = Command::new("psql")
        .args(["-h", &address, "-U", &field("username"), "-d", "app"])
        .args(["-X", "-q", "-A", "-t", "-c", sql])
        .env("PGPASSWORD", field("password"))
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .map_err(|e| format!("psql cannot run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn eventually_psql(data_dir: &Path, sql: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        match psql(data_dir, sql) {
            Ok(answer) => return answer,
            Err(error) if Instant::now() > deadline => panic!("psql never succeeded: {error}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Processes whose command line names the data directory (PostgreSQL runs
/// with `-D <data dir>/volumes/...`).
fn processes_under(data_dir: &Path) -> Vec<String> {
    let needle = data_dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let is_zombie = std::fs::read_to_string(entry.path().join("stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"));
        if cmdline.contains(&needle) && !cmdline.contains("sandbox up") && !is_zombie {
            found.push(cmdline);
        }
    }
    found
}

/// The operator's pods as `name serviceAccount ready` lines.
fn operator_pods(data_dir: &Path) -> Vec<String> {
    let template = "{range .items[*]}{.metadata.name} {.spec.serviceAccountName} \
                    {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}";
    let args = [
        "get",
        "pods",
        "-n",
        "tusk-system",
        "-l",
        "app.kubernetes.io/component=operator",
    ];
    let output = kubectl(
        data_dir,
        &[&args[..], &["-o", &format!("jsonpath={template}")]].concat(),
    );
    output.lines().map(str::to_owned).collect()
}

/// The operator runs as the two pods of its Deployment, under its own
/// ServiceAccount, both Ready (their readiness probe passes once they
/// serve the admission webhook), one of them leading.
fn assert_operator_runs_as_pods(data_dir: &Path) {
    let ready = |pods: &[String]| pods.len() == 2 && pods.iter().all(|p| p.ends_with(" True"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut pods = operator_pods(data_dir);
    while !ready(&pods) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        pods = operator_pods(data_dir);
    }
    assert_eq!(pods.len(), 2, "two operator pods: {pods:?}");
    let names: Vec<&str> = pods
        .iter()
        .map(|pod| {
            let fields: Vec<&str> = pod.split(' ').collect();
            assert!(fields[0].starts_with("tusk-operator-"), "{pods:?}");
            assert_eq!(fields[1..], ["tusk-operator", "True"], "{pods:?}");
            fields[0]
        })
        .collect();
    // One holds the leader Lease, taken under its leader-election Role.
    let holder = kubectl(
        data_dir,
        &[
            "get",
            "lease",
            "-n",
            "tusk-system",
            "tusk-operator-leader",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    assert!(
        names.contains(&holder.as_str()),
        "{holder} leads one of {names:?}"
    );
}

/// The admission webhook the operator serves refuses, through kubectl,
/// what the controller would refuse, naming the field.
fn assert_admission_refuses_what_the_controller_would(data_dir: &Path) {
    let bad = data_dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: postgres.tusk.dev/v1alpha1\nkind: PostgresCluster\nmetadata: {name: bad}\n\
         spec: {instances: 1, postgres: {version: 15, parameters: {transaction_timeout: 5s}}, storage: {size: 1Gi}}\n",
    )
    .expect("a manifest");
    let output = std::process::Command::new("kubectl")
        .env("KUBECONFIG", data_dir.join("kubeconfig"))
        .args(["apply", "--request-timeout=30s", "-f"])
        .arg(&bad)
        .output()
        .expect("kubectl runs");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "refused: {said}");
    assert!(
        said.contains("spec.postgres.parameters.transaction_timeout"),
        "the field is named: {said}"
    );
}

/// `tusk plan` of the converged cluster, with no `TUSK_*` setting in its
/// environment, has nothing to do: it planned with the operator
/// Deployment's settings (PostgreSQL's user and group are this machine's
/// there, not the defaults, and the defaults would roll every pod).
fn plans_with_the_deployments_settings(data_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut plan = Command::new(env!("CARGO_BIN_EXE_tusk"));
        plan.args(["plan", "small"])
            .env("KUBECONFIG", data_dir.join("kubeconfig"));
        for setting in tusk_operator::config::setting::ALL {
            plan.env_remove(setting);
        }
        let output = plan.output().expect("tusk plan runs");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !text.contains("Notes:"),
            "the Deployment's settings, all literal: {text}"
        );
        if text.contains("Nothing to do: the cluster is as declared.") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tusk plan of a converged cluster: {text}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/examples")
        .join(name)
}

/// Once the cluster is ready, `sandbox up` prints how to connect: the
/// plugin command and a psql line that runs as it is.
fn says_how_to_connect(up: &Up, data_dir: &Path) {
    up.wait_for_line("kubectl tusk psql small", Duration::from_secs(30));
    let line = up.wait_for_line("psql 'host=", Duration::from_secs(5));
    assert!(!line.contains(&secret_password(data_dir)), "{line}");
    let output = Command::new("sh")
        .args([
            "-c",
            &format!("{} -X -tAc 'select current_user'", line.trim()),
        ])
        .env("KUBECONFIG", data_dir.join("kubeconfig"))
        .env("HOME", data_dir)
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .expect("sh runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "app\n",
        "the printed line connects: {line}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn secret_password(data_dir: &Path) -> String {
    kubectl(
        data_dir,
        &[
            "get",
            "secret",
            "small-app",
            "-o",
            "go-template={{.data.password | base64decode}}",
        ],
    )
}

#[test]
fn a_cluster_applied_with_sandbox_up_serves_psql_and_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_dir = dir.path();
    let mut up = Up::start(data_dir, Some(&example("small.yaml")));
    up.wait_for_line("converged", Duration::from_secs(180));
    says_how_to_connect(&up, data_dir);
    assert_operator_runs_as_pods(data_dir);
    assert_admission_refuses_what_the_controller_would(data_dir);
    plans_with_the_deployments_settings(data_dir);
    let answer = eventually_psql(
        data_dir,
        "create table kept (x int); insert into kept values (7); select sum(x) from kept",
        Duration::from_secs(60),
    );
    assert_eq!(answer, "7");
    assert!(
        !processes_under(data_dir).is_empty(),
        "PostgreSQL runs from the claim directory"
    );
    assert!(
        up.interrupt(Duration::from_secs(90)),
        "Ctrl-C ends tusk sandbox up cleanly"
    );
    let left = processes_under(data_dir);
    assert!(left.is_empty(), "processes outlived the sandbox: {left:#?}");

    let again = Up::start(data_dir, None);
    again.wait_for_line("Ctrl-C stops", Duration::from_secs(60));
    let answer = eventually_psql(
        data_dir,
        "select sum(x) from kept",
        Duration::from_secs(120),
    );
    assert_eq!(answer, "7", "the claim's data survives a restart");
}
