//! What the referee tests (`referee_*.rs`, Tusk on a real kube-apiserver
//! from kube-up) share: the repository's root, the installed operator's
//! identity, and kubectl against the control plane.
// Each test binary uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use tusk_sandbox::testing::kube_up::KubeUp;

use crate::process::run_within;

/// The operator of `deploy/install.yaml`, as kube-apiserver names it.
pub const OPERATOR: &str = "system:serviceaccount:tusk-system:tusk-operator";

/// The repository's root, where the manifests are.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs kubectl with `args` against `up` from the repository's root within
/// `limit`; fails the test with kubectl's error when it fails, and returns
/// what it printed.
pub fn kubectl(up: &KubeUp, args: &[&str], limit: Duration) -> String {
    let output = run_within(up.kubectl().args(args).current_dir(repo()), limit);
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Applies `deploy/install.yaml` server-side to `up` and waits until the
/// PostgresCluster CRD is Established.
pub fn install(up: &KubeUp, limit: Duration) {
    kubectl(
        up,
        &["apply", "--server-side", "-f", "deploy/install.yaml"],
        limit,
    );
    kubectl(
        up,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/postgresclusters.postgres.tusk.dev",
        ],
        limit,
    );
}
