//! The machine's kubectl against the sandbox, with the written kubeconfig
//! as it is: server-side apply of the project's CRDs and examples, get with
//! printer columns, describe, get -w, delete, and the invalid fixtures
//! refused with their messages.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::common::{TestSandbox, WAIT, config_map, wait_for};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn kubectl_command(t: &TestSandbox, args: &[&str]) -> Command {
    let mut command = Command::new("kubectl");
    command
        .args(args)
        .current_dir(repo_root())
        .env("KUBECONFIG", t.sandbox.kubeconfig_path())
        // Discovery is cached per home directory; keep it in the test's.
        .env("HOME", t.dir.path())
        .env("KUBECACHEDIR", t.dir.path().join("cache"));
    command
}

pub fn kubectl(t: &TestSandbox, args: &[&str]) -> Output {
    kubectl_command(t, args).output().expect("kubectl runs")
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn succeed(t: &TestSandbox, args: &[&str]) -> String {
    let output = kubectl(t, args);
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        text(&output)
    );
    text(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_lists_describes_and_deletes_the_project_resources() {
    let t = TestSandbox::start().await;
    let args = [
        "apply",
        "--server-side",
        "-f",
        "deploy/crds/",
        "-f",
        "deploy/examples/small.yaml",
    ];
    // kubectl maps every object before the CRDs it creates are served, so
    // on any cluster the first run can stop at "ensure CRDs are installed
    // first"; the same command then succeeds.
    let first = kubectl(&t, &args);
    if !first.status.success() {
        assert!(
            text(&first).contains("ensure CRDs are installed first"),
            "{}",
            text(&first)
        );
    }
    let applied = succeed(&t, &args);
    assert!(
        applied.contains("customresourcedefinition.apiextensions.k8s.io/postgresclusters.postgres.tusk.dev serverside-applied"),
        "{applied}"
    );
    assert!(
        applied.contains("postgrescluster.postgres.tusk.dev/small serverside-applied"),
        "{applied}"
    );
    let listed = succeed(&t, &["get", "postgresclusters"]);
    let header = listed.lines().next().unwrap_or_default();
    for column in ["NAME", "PHASE", "INSTANCES", "AGE"] {
        assert!(header.contains(column), "missing {column} in {listed}");
    }
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("small ") && l.contains(" 1 ")),
        "{listed}"
    );
    let short = succeed(&t, &["get", "pgc"]);
    assert!(short.contains("small"), "short name works: {short}");
    let described = succeed(&t, &["describe", "postgrescluster", "small"]);
    assert!(
        described.contains("Name:") && described.contains("small"),
        "{described}"
    );
    assert!(
        described.contains("Storage:") || described.contains("storage"),
        "{described}"
    );
    let again = succeed(
        &t,
        &["apply", "--server-side", "-f", "deploy/examples/small.yaml"],
    );
    assert!(again.contains("serverside-applied"), "{again}");
    let deleted = succeed(&t, &["delete", "-f", "deploy/examples/small.yaml"]);
    assert!(deleted.contains("deleted"), "{deleted}");
    let after = kubectl(&t, &["get", "postgrescluster", "small"]);
    assert!(!after.status.success());
    assert!(text(&after).contains("NotFound"), "{}", text(&after));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_prints_new_objects() {
    let t = TestSandbox::start().await;
    let mut child = kubectl_command(&t, &["get", "configmaps", "-w", "--request-timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl starts");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let api: Api<ConfigMap> = Api::default_namespaced(t.client.clone());
    // kubectl lists, then watches from the list's version: once its watch
    // request has arrived, a new object reaches it.
    let faults = t.sandbox.faults().clone();
    wait_for("kubectl to start watching", WAIT, || {
        let faults = faults.clone();
        async move { faults.count("watch", "configmaps") >= 1 }
    })
    .await;
    api.create(
        &PostParams::default(),
        &config_map("watched", json!({"a": "1"})),
    )
    .await
    .expect("created");
    let deadline = Instant::now() + WAIT;
    let mut seen = false;
    while Instant::now() < deadline && !seen {
        if let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            seen = line.starts_with("watched");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "kubectl get -w printed the new ConfigMap");
}

/// `kubectl create namespace` sends the Namespace in protobuf.
fn create_namespace(t: &TestSandbox, name: &str) {
    succeed(t, &["create", "namespace", name]);
}

fn expectations(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("fixture readable")
        .lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_fixtures_are_refused_by_the_server_with_their_messages() {
    let t = TestSandbox::start().await;
    succeed(&t, &["apply", "--server-side", "-f", "deploy/crds/"]);
    let dir = repo_root().join("crates/cli/tests/fixtures/invalid");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".yaml") && !name.ends_with(".old.yaml")
        })
        .collect();
    fixtures.sort();
    assert!(fixtures.len() >= 20, "found {} fixtures", fixtures.len());
    for (index, fixture) in fixtures.iter().enumerate() {
        let namespace = format!("fixture-{index}");
        create_namespace(&t, &namespace);
        let old = fixture.with_extension("old.yaml");
        if old.exists() {
            succeed(
                &t,
                &[
                    "apply",
                    "--server-side",
                    "-n",
                    &namespace,
                    "-f",
                    &old.to_string_lossy(),
                ],
            );
        }
        let output = kubectl(
            &t,
            &[
                "apply",
                "--server-side",
                "-n",
                &namespace,
                "-f",
                &fixture.to_string_lossy(),
            ],
        );
        let out = text(&output);
        let name = fixture
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        assert!(!output.status.success(), "{name} was accepted: {out}");
        for expected in expectations(fixture) {
            let found = match name.as_str() {
                // kubectl itself refuses a kind the server does not serve.
                "kind-unknown.yaml" => out.contains("no matches for kind \"PostgresClustr\""),
                // Strict field validation names the field the Kubernetes way.
                "unknown-field.yaml" => out.contains("unknown field \"spec.storage.sise\""),
                // The hint to quote it is tusk validate's; the server names
                // the field and the type.
                "yaml-1-1-boolean.yaml" => {
                    out.contains("spec.postgres.parameters.jit: false is not of type \"string\"")
                }
                _ => out.contains(&expected),
            };
            assert!(found, "{name}: expected {expected:?} in: {out}");
        }
    }
}

/// The CRDs the sandbox installed itself, applied again from `deploy/crds/`
/// by another manager: the YAML spells some numbers `15.0` where the stored
/// object has `15`, which is the same value, so there is nothing to conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_deploy_crds_over_the_installed_ones_without_conflicts() {
    let t = TestSandbox::with_tusk_crds().await;
    succeed(&t, &["apply", "--server-side", "-f", "deploy/crds/"]);
}
