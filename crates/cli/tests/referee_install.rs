//! Every install path, applied to a real kube-apiserver (v1.36, from the
//! shared Kubernetes folder): the CRDs of `deploy/crds/`, `tusk crds`,
//! `deploy/install.yaml`, the kustomize base and the Helm chart are each
//! accepted without a warning, with server-side apply as the install guide
//! says, and both CRDs become Established.
//!
//! The sandbox's API server compiles the CRDs' CEL rules but the real one
//! also estimates their cost and refuses a CRD over its budget: this test
//! is where that is decided. Where the shared folder is absent the tests
//! say so and return.

// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use process::run_within;
use referee::repo;
use tusk_sandbox::testing::kube_up::{Components, KubeUp};

const LIMIT: Duration = Duration::from_secs(120);
const CRDS: [&str; 2] = [
    "postgresclusters.postgres.tusk.dev",
    "postgresbackups.postgres.tusk.dev",
];

/// Runs `command`, fails the test with its output when it fails, and
/// returns its standard output and error.
fn succeed(up: &KubeUp, command: &mut Command) -> (String, String) {
    let shown = format!("{command:?}");
    let output = run_within(command.current_dir(repo()), LIMIT);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{shown} failed:\n{stdout}\n{stderr}\nkube-apiserver's log ends:\n{}",
        up.log_tail("kube-apiserver", 20)
    );
    (stdout, stderr)
}

/// Applies `file` server-side and asserts the server warned of nothing
/// (an unknown format, a deprecated field) and that both CRDs are
/// Established.
fn apply_and_establish(up: &KubeUp, what: &str, apply: &[&str]) {
    let (_, stderr) = succeed(
        up,
        up.kubectl()
            .args(["apply", "--server-side", "--field-manager=tusk-install"])
            .args(apply),
    );
    assert!(
        !stderr.contains("Warning"),
        "{what}: kube-apiserver warned:\n{stderr}"
    );
    succeed(
        up,
        up.kubectl()
            .args(["wait", "--for=condition=Established", "--timeout=60s"])
            .args(CRDS.map(|c| format!("crd/{c}"))),
    );
}

/// Deletes the CRDs so that the next path creates them afresh (an update
/// of an unchanged rule is not estimated again).
fn remove_crds(up: &KubeUp) {
    succeed(
        up,
        up.kubectl()
            .args(["delete", "--wait=true", "--timeout=60s"])
            .args(CRDS.map(|c| format!("crd/{c}"))),
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("a manifest is written");
    path.to_string_lossy().into_owned()
}

#[test]
fn every_install_path_is_accepted_by_kube_apiserver() {
    let Some(up) = KubeUp::start(Components::default()) else {
        return;
    };
    let scratch = tempfile::tempdir().expect("a scratch directory");

    apply_and_establish(&up, "deploy/crds/", &["-f", "deploy/crds/"]);
    remove_crds(&up);

    let crds = succeed(&up, Command::new(env!("CARGO_BIN_EXE_tusk")).arg("crds")).0;
    let crds = write(scratch.path(), "crds.yaml", &crds);
    apply_and_establish(&up, "tusk crds", &["-f", &crds]);
    remove_crds(&up);

    apply_and_establish(&up, "kustomize", &["-k", "deploy/kustomize"]);
    remove_crds(&up);

    let chart = succeed(
        &up,
        Command::new("helm")
            .env("HELM_CACHE_HOME", scratch.path().join("helm/cache"))
            .env("HELM_CONFIG_HOME", scratch.path().join("helm/config"))
            .env("HELM_DATA_HOME", scratch.path().join("helm/data"))
            .args(["template", "tusk", "deploy/helm/tusk"])
            .args(["--include-crds", "--namespace", "tusk-system"]),
    )
    .0;
    let chart = write(scratch.path(), "chart.yaml", &chart);
    // Helm's release namespace must exist (the chart does not make it);
    // the kustomize base made it already, so it is applied idempotently.
    let namespace = write(
        scratch.path(),
        "namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tusk-system\n",
    );
    succeed(
        &up,
        up.kubectl()
            .args(["apply", "--server-side", "-f", &namespace]),
    );
    apply_and_establish(&up, "helm template", &["-f", &chart]);
    remove_crds(&up);

    // Last, the one-file install: every object it declares exists.
    apply_and_establish(&up, "deploy/install.yaml", &["-f", "deploy/install.yaml"]);
    let (listed, _) = succeed(
        &up,
        up.kubectl()
            .args(["get", "-f", "deploy/install.yaml", "-o", "name"]),
    );
    for kind in [
        "namespace/tusk-system",
        "serviceaccount/tusk-operator",
        "clusterrole.rbac.authorization.k8s.io/tusk-operator",
        "deployment.apps/tusk-operator",
    ] {
        assert!(
            listed.contains(kind),
            "{kind} missing after install:\n{listed}"
        );
    }
}
