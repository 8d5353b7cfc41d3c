//! A test harness for anything that talks to a sandbox: tests of this
//! crate, of the operator and of the CLI.
//!
//! [`TestSandbox::start`] runs an API server on a free loopback port with
//! its data in a temporary directory (removed when the value is dropped)
//! and connects a kube-rs client; [`install_tusk_crds`] installs Tusk's
//! CustomResourceDefinitions; [`eventually`] and [`wait_for`] wait for a
//! condition with a bound, so tests synchronise on what they observe and
//! never on sleeps. [`kube_up`] starts a real kube-apiserver (and, when
//! asked, kube-controller-manager and kube-scheduler) for the tests that
//! take it as the referee.
//!
//! It is compiled always (it costs nothing unless called) so other crates'
//! tests use it without a feature flag. Failures panic with a message that
//! says what was awaited: this module is for tests only.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tempfile::TempDir;

use crate::{Config, Sandbox};

pub mod kube_up;

/// How long the waits of most tests may take before they fail.
pub const WAIT: Duration = Duration::from_secs(20);

/// An API server for one test, a client for it, and its data directory.
pub struct TestSandbox {
    pub sandbox: Sandbox,
    pub client: Client,
    pub dir: TempDir,
}

impl TestSandbox {
    /// Starts an API server on a free port in a new temporary directory.
    pub async fn start() -> Self {
        Self::start_with(|config| config).await
    }

    /// As [`TestSandbox::start`], with `adjust` changing the configuration.
    pub async fn start_with(adjust: impl FnOnce(Config) -> Config) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory for the sandbox");
        let (sandbox, client) = serve(dir.path(), adjust).await;
        Self {
            sandbox,
            client,
            dir,
        }
    }

    /// As [`TestSandbox::start`], with Tusk's CRDs installed and served.
    pub async fn with_tusk_crds() -> Self {
        let sandbox = Self::start().await;
        install_tusk_crds(&sandbox.client).await;
        sandbox
    }
}

/// Starts an API server on a free port with its data in `dir`, and a
/// client for it. Data already in `dir` is kept, so a test can stop a
/// sandbox and start another on the same directory.
pub async fn serve(dir: &Path, adjust: impl FnOnce(Config) -> Config) -> (Sandbox, Client) {
    let sandbox = Sandbox::start(adjust(Config::new(dir)))
        .await
        .expect("the sandbox API server starts");
    let client = client_for(&sandbox).await;
    (sandbox, client)
}

/// A client for a running sandbox, from the kubeconfig it wrote.
pub async fn client_for(sandbox: &Sandbox) -> Client {
    crate::client::from_kubeconfig(sandbox.kubeconfig_path())
        .await
        .expect("a client for the sandbox builds")
}

/// How long the tokens of [`client_for_service_account`] last: longer
/// than any test.
const TEST_TOKEN_SECONDS: i64 = 24 * 3600;

/// A client for a running sandbox authenticated as the ServiceAccount
/// `namespace/name` (which must exist), with a token as TokenRequest
/// issues it: what a pod running as that ServiceAccount would use. Its
/// requests are authorized by RBAC, unlike the admin's.
pub async fn client_for_service_account(sandbox: &Sandbox, namespace: &str, name: &str) -> Client {
    let options = crate::apiserver::auth::TokenOptions {
        expiration_seconds: TEST_TOKEN_SECONDS,
        ..Default::default()
    };
    let issued = sandbox
        .issue_token(namespace, name, &options)
        .unwrap_or_else(|e| panic!("a token for the ServiceAccount {namespace}/{name}: {e}"));
    client_with_token(sandbox, &issued.token).await
}

/// A client for a running sandbox that sends `token` as its bearer token.
pub async fn client_with_token(sandbox: &Sandbox, token: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(sandbox.kubeconfig_path())
        .expect("the sandbox's kubeconfig reads");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("the sandbox's kubeconfig makes a client configuration");
    config.auth_info.token = Some(token.to_owned().into());
    Client::try_from(config).expect("a client for the sandbox builds")
}

/// Creates Tusk's CRDs and waits until they are established.
pub async fn install_tusk_crds(client: &Client) {
    install_crds(client, tusk_api::crds()).await;
}

/// Creates `crds` (for tests that change a CRD before installing it) and
/// waits until each is established.
pub async fn install_crds(
    client: &Client,
    crds: impl IntoIterator<Item = CustomResourceDefinition>,
) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let created = api
            .create(&PostParams::default(), &crd)
            .await
            .expect("the CRD is created");
        let name = created.name_any();
        wait_for(&format!("the CRD {name} to be established"), WAIT, || {
            let api = api.clone();
            let name = name.clone();
            async move { established(&api, &name).await }
        })
        .await;
    }
}

async fn established(api: &Api<CustomResourceDefinition>, name: &str) -> bool {
    let Ok(Some(crd)) = api.get_opt(name).await else {
        return false;
    };
    crd.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True")
}

/// The PostgreSQL majors [`Images::All`] builds images of: 15 from
/// Debian's packages, the others from the installations `scripts/setup`
/// makes.
pub const POSTGRES_MAJORS: &str = "15 16 17 18";

/// The Debian package version of the PostgreSQL 15 this machine runs
/// (`scripts/setup` installs it), which the tests' images carry too:
/// both runtimes then test the same server, and the newer majors'
/// builds can upgrade its data (docs/install.md, "PostgreSQL majors":
/// a newer minor release of 15 writes catalog entries they refuse).
pub fn host_postgres_package() -> String {
    let output = std::process::Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "postgresql-15"])
        .output()
        .unwrap_or_else(|e| panic!("dpkg-query cannot run: {e}"));
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        output.status.success() && !version.is_empty(),
        "postgresql-15 is not installed (scripts/setup installs it): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    version
}

/// The container images a test needs on the Docker engine.
#[derive(Clone, Debug)]
pub enum Images {
    /// The base image (pause containers, shell containers of tests).
    Base,
    /// The base, operator and PostgreSQL images of every major the CRD
    /// accepts ([`POSTGRES_MAJORS`]), the operator image made from
    /// `tusk_binary` (the binary under test).
    All { tusk_binary: std::path::PathBuf },
}

/// Builds `images` with `scripts/build-images`, which keeps images whose
/// inputs did not change (a second call takes seconds). Panics with the
/// script's output when it fails: a test that needs images never skips.
pub fn build_images(images: Images) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut command = std::process::Command::new(root.join("scripts/build-images"));
    command.current_dir(&root);
    match &images {
        Images::Base => {
            command.arg("--base-only");
        }
        Images::All { tusk_binary } => {
            command
                .env("TUSK_BINARY", tusk_binary)
                .env("TUSK_PG_MAJORS", POSTGRES_MAJORS)
                .env("TUSK_PG_PACKAGE_VERSION", host_postgres_package());
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("scripts/build-images cannot run: {e}"));
    assert!(
        output.status.success(),
        "scripts/build-images failed ({images:?}):\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits until `check` returns `Some`, and returns its value; fails the
/// test after `timeout`. Checks are spaced by a fortieth of a second to a
/// quarter of a second, longer for longer timeouts, so slow checks (a
/// psql connection) do not crowd a busy machine.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let interval = (timeout / 400).clamp(Duration::from_millis(25), Duration::from_millis(250));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(interval).await;
    }
}

/// Waits until `check` returns true; fails the test after `timeout`.
pub async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(what, timeout, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await;
}
