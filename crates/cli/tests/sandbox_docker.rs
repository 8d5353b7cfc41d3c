//! End to end on the Docker runtime: `tusk sandbox up --runtime docker`
//! installs the operator exactly as `deploy/install.yaml` has it, as
//! containers of the operator image (its two replicas), and a
//! three-instance PostgresCluster becomes containers of the PostgreSQL
//! image that replicate: a row
//! written on the primary is read on a replica. The images are built from
//! this binary with scripts/build-images (kept when unchanged); the test
//! fails, never skips, without a Docker engine.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use tusk_sandbox::kubelet::docker::sandbox_id;
use tusk_sandbox::testing::{Images, build_images};

/// A running `tusk sandbox up --runtime docker`, interrupted (then
/// killed) when dropped, and its containers and network removed.
struct Up {
    child: Child,
    lines: Receiver<String>,
    data_dir: std::path::PathBuf,
}

impl Up {
    fn start(data_dir: &Path, apply: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tusk"))
            .args(["sandbox", "up", "--runtime", "docker", "--data-dir"])
            .arg(data_dir)
            .arg("--apply")
            .arg(apply)
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
        Self {
            child,
            lines,
            data_dir: data_dir.to_owned(),
        }
    }

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
        let pods = kubectl_output(&self.data_dir, &["get", "pods", "-A", "-o", "wide"]);
        panic!("no line with {text:?} within {timeout:?}; saw {seen:#?}\npods:\n{pods}");
    }

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
        if matches!(self.child.try_wait(), Ok(None)) && !self.interrupt(Duration::from_secs(60)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Whatever a failed run left: this sandbox's containers and network.
        let id = sandbox_id(&self.data_dir);
        let script = format!(
            "docker ps -aq --filter label=dev.tusk.sandbox={id} | xargs -r docker rm -f; \
             docker network rm tusk-{id}; true"
        );
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn kubectl_output(data_dir: &Path, args: &[&str]) -> String {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", data_dir.join("kubeconfig"))
        .env("HOME", data_dir)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
        })
        .unwrap_or_else(|e| format!("kubectl cannot run: {e}"))
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

/// Runs `sql` with psql on the host against `service` of cluster `trio`.
fn psql(data_dir: &Path, service: &str, sql: &str) -> Result<String, String> {
    let address = kubectl(
        data_dir,
        &[
            "get",
            "service",
            service,
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
                "trio-app",
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

fn eventually_psql(data_dir: &Path, service: &str, sql: &str, want: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let answer = psql(data_dir, service, sql);
        match &answer {
            Ok(text) if want.is_none_or(|w| w == text) => return text.clone(),
            _ if Instant::now() > deadline => panic!("{sql} on {service}: {answer:?}"),
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The containers Docker runs for the sandbox in `data_dir`, as `image
/// name` lines.
fn sandbox_containers(data_dir: &Path) -> Vec<String> {
    let label = format!("label=dev.tusk.sandbox={}", sandbox_id(data_dir));
    let output = Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            &label,
            "--format",
            "{{.Image}} {{.Names}}",
        ])
        .output()
        .expect("docker runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

const CLUSTER: &str = "apiVersion: postgres.tusk.dev/v1alpha1
kind: PostgresCluster
metadata:
  name: trio
spec:
  instances: 3
  postgres:
    version: 15
    parameters:
      shared_buffers: 16MB
  storage:
    size: 1Gi
";

#[test]
fn a_three_instance_cluster_replicates_on_the_docker_runtime() {
    build_images(Images::All {
        tusk_binary: env!("CARGO_BIN_EXE_tusk").into(),
    });
    // Short: PostgreSQL's socket path in an emptyDir must fit 107 bytes.
    let dir = tempfile::Builder::new()
        .prefix("tusk-e2e")
        .tempdir_in("/var/tmp")
        .expect("temporary directory");
    let data_dir = dir.path();
    let manifest = data_dir.join("trio.yaml");
    std::fs::write(&manifest, CLUSTER).expect("manifest");
    let mut up = Up::start(data_dir, &manifest);
    up.wait_for_line("converged", Duration::from_secs(300));

    let containers = sandbox_containers(data_dir);
    let running = |image: &str| containers.iter().filter(|c| c.starts_with(image)).count();
    // deploy/install.yaml runs two operator replicas (one leads, both
    // serve the admission webhook).
    assert_eq!(running("ghcr.io/tusk-dev/tusk:"), 2, "{containers:#?}");
    assert_eq!(
        running("ghcr.io/tusk-dev/postgres:15"),
        3,
        "{containers:#?}"
    );

    let written = eventually_psql(
        data_dir,
        "trio-rw",
        "create table orders (id int); insert into orders select generate_series(1, 100); \
         select count(*) from orders",
        None,
    );
    assert_eq!(written, "100");
    assert_eq!(
        eventually_psql(data_dir, "trio-rw", "select pg_is_in_recovery()", None),
        "f"
    );
    eventually_psql(
        data_dir,
        "trio-ro",
        "select count(*) from orders",
        Some("100"),
    );
    assert_eq!(
        eventually_psql(data_dir, "trio-ro", "select pg_is_in_recovery()", None),
        "t",
        "-ro reaches a replica"
    );
    assert!(
        up.interrupt(Duration::from_secs(120)),
        "Ctrl-C ends tusk sandbox up cleanly"
    );
    let left = sandbox_containers(data_dir);
    assert!(
        left.is_empty(),
        "containers outlived the sandbox: {left:#?}"
    );
}
