//! The container images, built here by scripts/build-images from Debian's
//! packages (no registry), run as docs/install.md promises: the operator
//! image as a non-root user, the PostgreSQL image initialising and serving
//! a database as its non-root user, and the `tusk` binary that PostgreSQL
//! pods get from the operator image running inside the PostgreSQL image.
//!
//! Docker is required: without it these tests fail, they never skip. The
//! images are built with this test's own `tusk` binary and reused when
//! their inputs did not change; a fresh build (debootstrap included) takes
//! minutes, see docs/install.md. Every container started here runs with
//! `--network none` and is removed afterwards.

mod process;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use process::{run_within, succeed_within, succeeded};

const BUILD_LIMIT: Duration = Duration::from_secs(40 * 60);
const RUN_LIMIT: Duration = Duration::from_secs(60);
const POSTGRES_MAJOR: u32 = 15;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn docker() -> Command {
    Command::new("docker")
}

/// The images' names, as the install manifest runs them.
struct Images {
    operator: String,
    postgres: String,
}

/// Builds the images once for all tests of this file.
fn images() -> &'static Images {
    static IMAGES: OnceLock<Images> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let info = run_within(docker().arg("info"), RUN_LIMIT);
        assert!(
            info.status.success(),
            "these tests need a Docker engine (docker info failed): {}",
            String::from_utf8_lossy(&info.stderr)
        );
        let started = Instant::now();
        succeed_within(
            Command::new(repository().join("scripts/build-images"))
                .env("TUSK_BINARY", env!("CARGO_BIN_EXE_tusk"))
                .env("TUSK_PG_MAJORS", POSTGRES_MAJOR.to_string())
                .env(
                    "TUSK_PG_PACKAGE_VERSION",
                    tusk_sandbox::testing::host_postgres_package(),
                ),
            BUILD_LIMIT,
        );
        eprintln!("images built or reused in {:?}", started.elapsed());
        let operator = tusk_operator::install::operator_image();
        let postgres = tusk_operator::config::OperatorConfig {
            default_postgres_image: tusk_operator::install::postgres_image_template(),
            ..tusk_operator::config::OperatorConfig::default()
        }
        .postgres_image(POSTGRES_MAJOR);
        Images { operator, postgres }
    })
}

/// A container removed when the test ends, however it ends.
struct Container(String);

impl Container {
    fn name(test: &str) -> Self {
        Self(format!("tusk-image-test-{test}-{}", std::process::id()))
    }

    fn exec(&self, command: &[&str]) -> Output {
        run_within(docker().args(["exec", &self.0]).args(command), RUN_LIMIT)
    }

    fn psql(&self, sql: &str) -> Output {
        self.exec(&["psql", "-At", "-U", "postgres", "-c", sql])
    }
}

/// What the pods' securityContext imposes (read-only root, no
/// capabilities, no privilege escalation), and no network.
const RESTRICTED: [&str; 7] = [
    "--network",
    "none",
    "--read-only",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
];

impl Drop for Container {
    fn drop(&mut self) {
        let _ = run_within(
            docker().args(["rm", "--force", "--volumes", &self.0]),
            RUN_LIMIT,
        );
    }
}

/// `docker run --rm`, [`RESTRICTED`].
fn run_restricted(container: &Container, image: &str, args: &[&str], extra: &[String]) -> Output {
    run_within(
        docker()
            .args(["run", "--rm", "--name", &container.0])
            .args(RESTRICTED)
            .args(extra)
            .arg(image)
            .args(args),
        RUN_LIMIT,
    )
}

fn stdout(output: &Output) -> String {
    succeeded("docker", output).trim().to_owned()
}

fn image_user(image: &str) -> String {
    succeed_within(
        docker().args(["image", "inspect", "--format", "{{.Config.User}}", image]),
        RUN_LIMIT,
    )
    .trim()
    .to_owned()
}

#[test]
fn the_operator_image_runs_tusk_as_a_non_root_user() {
    let images = images();
    assert_eq!(image_user(&images.operator), "65532:65532");
    let container = Container::name("operator-version");
    let version = stdout(&run_restricted(
        &container,
        &images.operator,
        &["--version"],
        &[],
    ));
    assert_eq!(version, format!("tusk {}", env!("CARGO_PKG_VERSION")));
    let container = Container::name("operator-help");
    let help = stdout(&run_restricted(
        &container,
        &images.operator,
        &["operator", "--help"],
        &[],
    ));
    assert!(help.contains("--http-address"), "{help}");
}

/// The PostgreSQL pod's init container: `tusk install-manager` from the
/// operator image into a shared directory (an emptyDir in a pod).
fn inject_manager(test: &str, images: &Images) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let shared = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777))
        .expect("emptyDir permissions");
    let container = Container::name(&format!("{test}-init"));
    let mount = format!("{}:/controller", shared.path().display());
    // The init container's command names `tusk` through the image's PATH.
    let command = ["--entrypoint".to_owned(), "tusk".to_owned()];
    stdout(&run_restricted(
        &container,
        &images.operator,
        &["install-manager", "/controller/tusk"],
        &[&command[..], &["--volume".to_owned(), mount]].concat(),
    ));
    shared
}

#[test]
fn the_injected_instance_manager_runs_in_the_postgres_image() {
    let images = images();
    let shared = inject_manager("inject", images);
    let mount = format!("{}:/controller:ro", shared.path().display());
    let container = Container::name("inject-run");
    let extra = [
        "--volume".to_owned(),
        mount,
        "--entrypoint".to_owned(),
        "/controller/tusk".to_owned(),
    ];
    let version = stdout(&run_restricted(
        &container,
        &images.postgres,
        &["--version"],
        &extra,
    ));
    assert_eq!(version, format!("tusk {}", env!("CARGO_PKG_VERSION")));
    let container = Container::name("inject-help");
    let help = stdout(&run_restricted(
        &container,
        &images.postgres,
        &["instance", "--help"],
        &extra,
    ));
    assert!(help.contains("run"), "{help}");
}

#[test]
fn the_postgres_image_initialises_and_serves_a_database_as_a_non_root_user() {
    let images = images();
    assert_eq!(image_user(&images.postgres), "999:999");
    let container = Container::name("postgres");
    let data = "/var/lib/postgresql/data";
    // What the pod mounts writable (its volume, /run, /tmp) is writable
    // here too; the root filesystem is read-only, as in the pod.
    let script = format!(
        "initdb --auth=trust --username=postgres --locale=C --encoding=UTF8 -D {data}/pgdata >/dev/null \
         && exec postgres -D {data}/pgdata -c listen_addresses=''"
    );
    let started = run_within(
        docker()
            .args(["run", "--detach", "--name", &container.0])
            .args(RESTRICTED)
            .args([
                "--tmpfs",
                "/tmp",
                "--tmpfs",
                "/var/run/postgresql:uid=999,gid=999,mode=2775",
            ])
            .args(["--tmpfs", &format!("{data}:uid=999,gid=999,mode=0700")])
            .arg(&images.postgres)
            .args(["sh", "-c", &script]),
        RUN_LIMIT,
    );
    stdout(&started);
    let deadline = Instant::now() + Duration::from_secs(90);
    let answer = loop {
        let query = container.psql("SELECT 1");
        if query.status.success() {
            break String::from_utf8_lossy(&query.stdout).trim().to_owned();
        }
        if Instant::now() > deadline {
            let logs = run_within(docker().args(["logs", &container.0]), RUN_LIMIT);
            panic!(
                "PostgreSQL did not answer within 90 s: {}\nlogs:\n{}{}",
                String::from_utf8_lossy(&query.stderr),
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(answer, "1");
    let version = stdout(&container.psql("SHOW server_version_num"));
    assert!(
        version.starts_with(&POSTGRES_MAJOR.to_string()),
        "{version}"
    );
    let uid = stdout(&container.exec(&["id", "-u"]));
    assert_eq!(uid, "999");
    let backrest = stdout(&container.exec(&["pgbackrest", "version"]));
    assert!(backrest.starts_with("pgBackRest"), "{backrest}");
}
