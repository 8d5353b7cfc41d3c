//! `kubectl tusk` end to end on the full sandbox with real PostgreSQL:
//! the built `tusk` binary, run directly and as the kubectl plugin
//! `kubectl-tusk` found on PATH, reports a cluster's real status, says why
//! it is not Ready, connects psql through `-rw`, prefixes every instance's
//! log lines, fences and unfences instances without losing other
//! entries of the annotation, and plans the operator's next pass without
//! applying it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use common::{NS, World, wait_for};
use kube::ResourceExt;
use serde_json::{Value, json};
use tusk_api::labels::FENCED_INSTANCES;

const CLUSTER: &str = "tiny";

/// Runs `program args` with the world's kubeconfig and `path` first on
/// PATH, killed after a minute.
async fn run_with(program: &str, args: &[&str], kubeconfig: &Path, path: &Path) -> Output {
    run_with_env(program, args, kubeconfig, path, &[]).await
}

/// [`run_with`], with `env` set too.
async fn run_with_env(
    program: &str,
    args: &[&str],
    kubeconfig: &Path,
    path: &Path,
    env: &[(&str, String)],
) -> Output {
    let search = format!(
        "{}:{}",
        path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", search)
        .env("PGCONNECT_TIMEOUT", "5")
        // What the commands keep under the home directory (the cluster's
        // authority for psql) stays in the test's directory.
        .env("HOME", kubeconfig.parent().unwrap_or(kubeconfig))
        .envs(env.iter().map(|(name, value)| (*name, value)))
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} did not finish within 60 s"))
        .unwrap_or_else(|e| panic!("{program} {args:?} cannot run: {e}"))
}

struct Plugin {
    kubeconfig: PathBuf,
    /// Holds the `kubectl-tusk` symlink.
    bin: tempfile::TempDir,
}

impl Plugin {
    fn new(world: &World) -> Self {
        let bin = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tusk"), bin.path().join("kubectl-tusk"))
            .expect("symlink kubectl-tusk");
        Self {
            kubeconfig: world.kubeconfig(),
            bin,
        }
    }

    /// `tusk args`, the binary itself.
    async fn tusk(&self, args: &[&str]) -> Output {
        run_with(
            env!("CARGO_BIN_EXE_tusk"),
            args,
            &self.kubeconfig,
            self.bin.path(),
        )
        .await
    }

    /// `kubectl tusk args`, through kubectl's plugin lookup.
    async fn kubectl_tusk(&self, args: &[&str]) -> Output {
        let mut all = vec!["tusk"];
        all.extend_from_slice(args);
        run_with("kubectl", &all, &self.kubeconfig, self.bin.path()).await
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stdout of a command that must succeed.
fn success(what: &str, output: &Output) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}): {}{}",
        output.status,
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout(output)
}

/// The instance that is not the primary.
fn replica_of(status: &tusk_api::v1alpha1::PostgresClusterStatus) -> String {
    status
        .instances
        .iter()
        .find(|i| Some(&i.name) != status.current_primary.as_ref())
        .map(|i| i.name.clone())
        .expect("a replica")
}

async fn annotation(world: &World) -> Option<String> {
    world
        .clusters()
        .get(CLUSTER)
        .await
        .expect("cluster")
        .annotations()
        .get(FENCED_INSTANCES)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_tusk_reports_connects_and_fences_a_real_cluster() {
    let world = World::start().await;
    world
        .create_cluster(
            CLUSTER,
            json!({"instances": 2, "postgres": {"version": 15, "parameters": {"shared_buffers": "16MB"}},
                   "storage": {"size": "1Gi"}}),
        )
        .await;
    world.wait_ready(CLUSTER, 2).await;
    assert_eq!(
        world.status(CLUSTER).await.latest_instance_serial,
        2,
        "each instance created once (a pass ahead of the caches made a third)"
    );
    let plugin = Plugin::new(&world);

    reports_the_real_status(&world, &plugin).await;
    let why = success("tusk why", &plugin.tusk(&["why", CLUSTER]).await);
    assert_eq!(why, "Ready\n");
    connects_psql(&world, &plugin).await;

    let logs = success(
        "tusk logs",
        &plugin.tusk(&["logs", CLUSTER, "-n", NS]).await,
    );
    for instance in ["tiny-1", "tiny-2"] {
        let prefix = format!("{instance} | ");
        assert!(
            logs.lines().any(|l| l.starts_with(&prefix)),
            "no {instance} lines"
        );
    }
    for line in logs.lines() {
        assert!(
            line.starts_with("tiny-1 | ") || line.starts_with("tiny-2 | "),
            "unprefixed line {line:?}"
        );
    }

    refuses_what_it_cannot_do(&plugin).await;
    bundles_a_report_without_a_secret(&world, &plugin).await;
    fences_and_unfences(&world, &plugin).await;
    plans_without_applying(&world, &plugin).await;
    world.shutdown().await;
}

/// Invoked by kubectl as `kubectl-tusk`, the binary speaks of `kubectl tusk`.
#[tokio::test]
async fn kubectl_runs_the_binary_as_its_tusk_plugin() {
    let bin = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tusk"), bin.path().join("kubectl-tusk"))
        .expect("symlink kubectl-tusk");
    let kubeconfig = bin.path().join("no-kubeconfig");
    let help = success(
        "kubectl tusk --help",
        &run_with("kubectl", &["tusk", "--help"], &kubeconfig, bin.path()).await,
    );
    assert!(help.contains("Usage: kubectl tusk <COMMAND>"), "{help}");
    for command in [
        "status", "why", "plan", "approve", "psql", "logs", "report", "fence", "unfence",
    ] {
        assert!(
            help.contains(&format!("\n  {command} ")),
            "{command} in {help}"
        );
    }
    let direct = success(
        "tusk --help",
        &run_with(
            env!("CARGO_BIN_EXE_tusk"),
            &["--help"],
            &kubeconfig,
            bin.path(),
        )
        .await,
    );
    assert!(direct.contains("Usage: tusk <COMMAND>"), "{direct}");
}

/// A missing cluster is named; an instance name that is not one is refused
/// before anything is written.
async fn refuses_what_it_cannot_do(plugin: &Plugin) {
    let missing = plugin.tusk(&["status", "absent", "-n", NS]).await;
    assert_eq!(missing.status.code(), Some(2));
    let error = String::from_utf8_lossy(&missing.stderr);
    assert!(
        error.contains("no PostgresCluster absent in namespace default"),
        "{error}"
    );
    let refused = plugin.tusk(&["fence", CLUSTER, "tiny-1,tiny-2"]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not an instance name"),
        "{refused:?}"
    );
}

/// Every file of the bundle under `dir`, by path relative to it.
fn bundle_files(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path
                    .strip_prefix(dir)
                    .expect("inside")
                    .display()
                    .to_string();
                files.push((relative, std::fs::read_to_string(&path).expect("text")));
            }
        }
    }
    files.sort();
    files
}

/// `tusk report` writes the cluster, its objects, events and every
/// instance's log, and no Secret value, raw or base64, appears anywhere in
/// it; a directory already holding a bundle is refused untouched.
async fn bundles_a_report_without_a_secret(world: &World, plugin: &Plugin) {
    let parent = tempfile::tempdir().expect("temp dir");
    let dir = parent.path().join("bundle");
    let dir_text = dir.display().to_string();
    let out = success(
        "tusk report",
        &plugin
            .tusk(&["report", CLUSTER, "-n", NS, "-o", &dir_text])
            .await,
    );
    assert_eq!(out.trim(), dir_text);
    let files = bundle_files(&dir);
    let file = |name: &str| {
        files
            .iter()
            .find(|(path, _)| path == name)
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| {
                panic!(
                    "no {name} in {:?}",
                    files.iter().map(|f| &f.0).collect::<Vec<_>>()
                )
            })
    };
    assert!(
        file("summary.txt").contains("tiny"),
        "{}",
        file("summary.txt")
    );
    assert!(file("cluster.yaml").contains("kind: PostgresCluster"));
    assert!(!file("cluster.yaml").contains("managedFields"));
    for instance in ["tiny-1", "tiny-2"] {
        assert!(file("objects/pod.yaml").contains(&format!("name: {instance}")));
        assert!(
            !file(&format!("logs/{instance}.log")).is_empty(),
            "{instance}'s log"
        );
    }
    assert!(file("objects/lease.yaml").contains("name: tiny-primary"));
    assert!(file("objects/persistentvolumeclaim.yaml").contains("name: tiny-1"));
    assert!(
        file("events.yaml").contains("involvedObject"),
        "events about the cluster"
    );

    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(world.client.clone(), NS);
    let listed = secrets
        .list(
            &kube::api::ListParams::default().labels(&tusk_api::labels::cluster_selector(CLUSTER)),
        )
        .await
        .expect("secrets")
        .items;
    let mut values = 0;
    for secret in &listed {
        assert!(file("secrets.yaml").contains(&secret.name_any()));
        // User names are no secret (`postgres` is in every apiVersion).
        let passwords = secret
            .data
            .iter()
            .flatten()
            .filter(|(key, _)| *key != "username");
        for (key, value) in passwords {
            let raw = String::from_utf8_lossy(&value.0).into_owned();
            let encoded = serde_json::to_value(value).expect("base64");
            let encoded = encoded.as_str().expect("a string").to_owned();
            for shown in [raw, encoded] {
                if shown.len() < 8 {
                    continue;
                }
                values += 1;
                for (path, text) in &files {
                    assert!(
                        !text.contains(&shown),
                        "{}/{key} in {path}",
                        secret.name_any()
                    );
                }
            }
        }
    }
    assert!(values >= 2, "the passwords were looked for: {values}");

    let again = plugin
        .tusk(&["report", CLUSTER, "-n", NS, "-o", &dir_text])
        .await;
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{again:?}"
    );
    assert_eq!(bundle_files(&dir), files, "the first bundle is untouched");
}

/// A Warning event about the cluster, written through events.k8s.io/v1
/// as the operator writes its events.
async fn warn_about_cluster(world: &World, reason: &str, note: &str) {
    let cluster = world.clusters().get(CLUSTER).await.expect("cluster");
    let event: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{CLUSTER}.{}", reason.to_lowercase()), "namespace": NS},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "tusk.dev/operator", "reportingInstance": "tusk-operator",
        "action": "Reconcile", "type": "Warning", "reason": reason, "note": note,
        "regarding": {"apiVersion": "postgres.tusk.dev/v1alpha1", "kind": "PostgresCluster",
                      "name": CLUSTER, "namespace": NS, "uid": cluster.uid()}
    }))
    .expect("an event");
    kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(world.client.clone(), NS)
        .create(&kube::api::PostParams::default(), &event)
        .await
        .expect("event created");
}

/// `status -o json`, directly and through kubectl, says what the status
/// says; the text names the same facts.
async fn reports_the_real_status(world: &World, plugin: &Plugin) {
    let status = world.status(CLUSTER).await;
    for output in [
        plugin.tusk(&["status", CLUSTER, "-o", "json"]).await,
        plugin
            .kubectl_tusk(&["status", CLUSTER, "-n", NS, "-o", "json"])
            .await,
    ] {
        let text = success("status -o json", &output);
        let report: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(report["cluster"], CLUSTER);
        assert_eq!(report["namespace"], NS);
        assert_eq!(report["phase"], "Ready");
        assert_eq!(report["readyInstances"], status.ready_instances);
        assert_eq!(report["instancesDeclared"], 2);
        assert_eq!(
            report["primary"]["current"].as_str(),
            status.current_primary.as_deref()
        );
        assert_eq!(
            report["primary"]["target"].as_str(),
            status.target_primary.as_deref()
        );
        let instances = report["instances"].as_array().expect("instances");
        assert_eq!(instances[0]["role"], "primary", "the primary first: {text}");
        assert_eq!(instances.len(), status.instances.len(), "{text}");
        for real in &status.instances {
            let shown = instances
                .iter()
                .find(|i| i["name"] == real.name.as_str())
                .unwrap_or_else(|| panic!("{} in {text}", real.name));
            assert_eq!(shown["role"], real.role.as_str());
            assert_eq!(shown["ready"], real.ready);
            assert_eq!(shown["podReady"], true, "{text}");
            assert_eq!(shown["fenced"], false);
            assert_eq!(shown["timeline"].as_i64(), real.timeline);
        }
        let ready = report["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .find(|c| c["type"] == "Ready")
            .cloned()
            .expect("a Ready condition");
        assert_eq!(ready["status"], "True", "{text}");
    }
    let primary = status.current_primary.clone().expect("a primary");
    let text = success(
        "kubectl tusk status",
        &plugin.kubectl_tusk(&["status", CLUSTER]).await,
    );
    eprintln!("kubectl tusk status {CLUSTER}:\n{text}");
    for expected in [
        "Cluster     default/tiny".to_owned(),
        "Phase       Ready  (2/2 instances ready)".to_owned(),
        format!("{primary}  primary  yes    ready"),
        format!("{}  replica  yes    ready", replica_of(&status)),
    ] {
        assert!(text.contains(&expected), "{expected:?} in:\n{text}");
    }
}

/// `psql --print` names the `-rw` Service's address, verifies the server
/// by its name and the cluster's authority, and hides the password; `psql
/// -- -c ...` runs a real query as the app owner and as the superuser,
/// over a verified connection.
async fn connects_psql(world: &World, plugin: &Plugin) {
    let ip = world.service_ip("tiny-rw").await;
    let line = success(
        "psql --print",
        &plugin.tusk(&["psql", CLUSTER, "--print"]).await,
    );
    assert!(
        line.contains(&format!(
            "psql 'host=tiny-rw.{NS}.svc hostaddr={ip} port=5432 user=app dbname=app sslmode=verify-full'"
        )),
        "{line}"
    );
    assert!(line.contains("PGSSLROOTCERT="), "{line}");
    let secret = world.conninfo("tiny-rw", CLUSTER).await;
    let password = secret
        .split(' ')
        .find_map(|kv| kv.strip_prefix("password="))
        .expect("a password");
    assert!(!line.contains(password), "the password is shown: {line}");
    let answer = success(
        "kubectl tusk psql",
        &plugin
            .kubectl_tusk(&[
                "psql",
                CLUSTER,
                "--",
                "-tAc",
                "select current_user || ' ' || (1 + 1) || ' ' || ssl from pg_stat_ssl where pid = pg_backend_pid()",
            ])
            .await,
    );
    assert_eq!(answer, "app 2 true\n");
    // The superuser logs in over the network only once the cluster allows
    // it (a reload, no restart).
    let as_superuser = || async {
        plugin
            .tusk(&[
                "psql",
                CLUSTER,
                "--superuser",
                "--",
                "-tAc",
                "select current_user, pg_is_in_recovery()",
            ])
            .await
    };
    let refused = as_superuser().await;
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("spec.postgres.superuserAccess is false"),
        "{said}"
    );
    world
        .clusters()
        .patch(
            CLUSTER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"postgres": {"superuserAccess": true}}})),
        )
        .await
        .expect("superuser access allowed");
    let mut allowed = as_superuser().await;
    for _ in 0..60 {
        if allowed.status.success() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        allowed = as_superuser().await;
    }
    let superuser = success("tusk psql --superuser", &allowed);
    assert_eq!(superuser, "postgres|f\n");
    // The printed line runs as it is (kubectl reads the password).
    let shell = success(
        "the printed psql line",
        &run_with(
            "sh",
            &["-c", &format!("{} -tAc 'select 1'", line.trim_end())],
            &plugin.kubeconfig,
            plugin.bin.path(),
        )
        .await,
    );
    assert_eq!(shell, "1\n");
}

/// Fencing adds to the annotation and keeps other entries; `why` then
/// names the fenced instance; unfencing puts everything back.
async fn fences_and_unfences(world: &World, plugin: &Plugin) {
    let replica = replica_of(&world.status(CLUSTER).await);
    success(
        "kubectl annotate",
        &run_with(
            "kubectl",
            &[
                "annotate",
                "postgrescluster",
                CLUSTER,
                &format!("{FENCED_INSTANCES}=tiny-9"),
            ],
            &plugin.kubeconfig,
            plugin.bin.path(),
        )
        .await,
    );
    success(
        "kubectl tusk fence",
        &plugin.kubectl_tusk(&["fence", CLUSTER, &replica]).await,
    );
    assert_eq!(
        annotation(world).await.as_deref(),
        Some(format!("[\"{replica}\",\"tiny-9\"]").as_str())
    );

    wait_for(
        &format!("`tusk why` to say {replica} is fenced"),
        Duration::from_secs(120),
        || async {
            let output = plugin.tusk(&["why", CLUSTER]).await;
            output.status.code() == Some(1)
                && stdout(&output).contains(&format!("{replica} is fenced"))
        },
    )
    .await;
    warn_about_cluster(world, "VolumeSlow", "a volume answers slowly").await;
    let why = stdout(&plugin.tusk(&["why", CLUSTER]).await);
    assert!(
        why.contains("VolumeSlow: a volume answers slowly"),
        "the cluster's Warning event: {why}"
    );
    eprintln!("tusk why {CLUSTER}, fenced:\n{why}");
    assert!(
        why.starts_with("default/tiny is not Ready:\n- phase "),
        "{why}"
    );
    let status: Value = serde_json::from_str(&stdout(
        &plugin.tusk(&["status", CLUSTER, "-o", "json"]).await,
    ))
    .expect("JSON");
    let fenced: Vec<&str> = status["instances"]
        .as_array()
        .expect("instances")
        .iter()
        .filter(|i| i["fenced"] == true)
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(fenced, [replica.as_str()]);

    success(
        "tusk unfence",
        &plugin.tusk(&["unfence", CLUSTER, &replica]).await,
    );
    assert_eq!(annotation(world).await.as_deref(), Some("[\"tiny-9\"]"));
    success(
        "tusk unfence *",
        &plugin.tusk(&["unfence", CLUSTER, "*"]).await,
    );
    assert_eq!(annotation(world).await, None);
    world.wait_ready(CLUSTER, 2).await;
    wait_for(
        "`tusk why` to say Ready",
        Duration::from_secs(60),
        || async { stdout(&plugin.tusk(&["why", CLUSTER]).await) == "Ready\n" },
    )
    .await;
}

/// `tusk plan` with the operator's settings: the test's operator runs in
/// process (no Deployment), so they are given as its environment.
async fn plan(world: &World, plugin: &Plugin, args: &[&str]) -> Output {
    let config = world.operator_config();
    let env = [
        ("TUSK_POSTGRES_UID", config.postgres_uid.to_string()),
        ("TUSK_POSTGRES_GID", config.postgres_gid.to_string()),
        (
            "TUSK_DEFAULT_POSTGRES_IMAGE",
            config.default_postgres_image.clone(),
        ),
    ];
    let mut all = vec!["plan", CLUSTER];
    all.extend_from_slice(args);
    let program = env!("CARGO_BIN_EXE_tusk");
    run_with_env(program, &all, &plugin.kubeconfig, plugin.bin.path(), &env).await
}

/// A converged cluster has nothing to do; a paused one given a third
/// instance and a larger volume is planned to get both, the plan says they
/// wait for the pause, and nothing was applied: no third pod, the volume's
/// request as it was.
async fn plans_without_applying(world: &World, plugin: &Plugin) {
    let converged = success("tusk plan", &plan(world, plugin, &[]).await);
    assert!(
        converged.contains("Nothing to do: the cluster is as declared."),
        "{converged}"
    );
    assert!(
        !converged.contains("Decided without the report of"),
        "every instance reached: {converged}"
    );
    // Serials are never reused: the new instance is the next one.
    let serial = world.status(CLUSTER).await.latest_instance_serial + 1;
    let new = format!("{CLUSTER}-{serial}");
    world
        .clusters()
        .patch(
            CLUSTER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {
                "paused": true, "instances": 3, "storage": {"size": "2Gi"}}})),
        )
        .await
        .expect("pause and grow the cluster");
    let json = success(
        "tusk plan -o json",
        &plan(world, plugin, &["-o", "json"]).await,
    );
    let preview: Value = serde_json::from_str(&json).expect("JSON");
    let steps: Vec<(String, String)> = preview["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["action"].as_str().unwrap_or_default().to_owned(),
                s["object"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("update", "PersistentVolumeClaim/tiny-1"),
        ("update", "PersistentVolumeClaim/tiny-2"),
        ("create", &format!("PersistentVolumeClaim/{new}")),
        ("create", &format!("Pod/{new}")),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(a, o)| ((*a).to_owned(), (*o).to_owned()))
        .collect();
    assert_eq!(steps, expected, "{json}");
    assert!(
        preview["held"]
            .as_str()
            .is_some_and(|h| h.starts_with("spec.paused is true")),
        "{json}"
    );
    let text = success("tusk plan", &plan(world, plugin, &[]).await);
    eprintln!("tusk plan {CLUSTER}, paused and grown:\n{text}");
    assert!(
        text.contains("grow from 1Gi to 2Gi (spec.storage.size)"),
        "{text}"
    );
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(world.client.clone(), NS);
    assert!(
        pods.get_opt("tiny-3").await.expect("read pod").is_none(),
        "a plan creates nothing"
    );
    let claims: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        kube::Api::namespaced(world.client.clone(), NS);
    let claim = claims.get("tiny-1").await.expect("claim tiny-1");
    let requested = claim
        .spec
        .and_then(|s| s.resources)
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned());
    assert_eq!(
        requested.map(|q| q.0).as_deref(),
        Some("1Gi"),
        "a plan grows nothing"
    );
}
