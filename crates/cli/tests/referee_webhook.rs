//! Admission webhooks, with kube-apiserver as the referee: the operator's
//! webhook runs in this test on loopback, and the same
//! ValidatingWebhookConfiguration (a `url` client with its `caBundle`) is
//! applied to a real kube-apiserver (v1.36, from the shared Kubernetes
//! folder) and to the sandbox's API server. The same manifests are then
//! applied to both with kubectl: both must admit or refuse alike, with the
//! same message, for the webhook's refusals (the cases it exists for:
//! `shared_buffers: Retain`, `transaction_timeout` on PostgreSQL 15, bad
//! resource quantities), for a namespace the selector leaves out, for
//! updates, and for the failure policy when the webhook cannot be called
//! (nothing listening, an authority it does not chain to, no answer
//! within `timeoutSeconds`).
//!
//! Where the shared folder is absent the test says so and returns.

// Shared with other test binaries, which use the rest of it.
#[path = "parity/webhook.rs"]
mod loopback;
#[allow(dead_code)]
mod process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use process::run_within;
use serde_json::{Value, json};
use tusk_operator::webhook::certificate;
use tusk_operator::webhook::serve;
use tusk_sandbox::testing::TestSandbox;
use tusk_sandbox::testing::kube_up::{Components, KubeUp};

const LIMIT: Duration = Duration::from_secs(60);
const WEBHOOK: &str = "postgresclusters.postgres.tusk.dev";

/// One API server, through kubectl.
struct Server {
    name: &'static str,
    kubeconfig: PathBuf,
    scratch: PathBuf,
}

impl Server {
    /// kubectl `args` on `manifest` (written to a file of the same name on
    /// both servers); whether it succeeded, and what it printed with the
    /// scratch directory's path taken out.
    fn kubectl(&self, args: &[&str], file: &str, manifest: &Value) -> (bool, String) {
        let path = self.scratch.join(file);
        std::fs::write(&path, manifest.to_string()).expect("the manifest is written");
        let output = run_within(
            std::process::Command::new("kubectl")
                .env("KUBECONFIG", &self.kubeconfig)
                .args(args)
                .arg("-f")
                .arg(&path),
            LIMIT,
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let text = text.replace(&self.scratch.display().to_string(), "SCRATCH");
        (output.status.success(), text.trim().to_owned())
    }

    fn apply(&self, file: &str, manifest: &Value) {
        let (ok, text) = self.kubectl(
            &["apply", "--server-side", "--force-conflicts"],
            file,
            manifest,
        );
        assert!(ok, "{}: {file} is applied: {text}", self.name);
    }
}

fn cluster(name: &str, version: u32, parameters: Value) -> Value {
    json!({
        "apiVersion": "postgres.tusk.dev/v1alpha1",
        "kind": "PostgresCluster",
        "metadata": {"name": name},
        "spec": {
            "instances": 1,
            "postgres": {"version": version, "parameters": parameters},
            "storage": {"size": "1Gi"}
        }
    })
}

fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    if let Some(slot) = object.pointer_mut(pointer) {
        *slot = value;
    }
    object
}

/// The operator's configuration calling `url`; `exempt` is left out.
fn configuration(url: &str, bundle: &str, policy: &str, timeout: u32) -> Value {
    loopback::configuration(url, bundle, policy, timeout, "exempt")
}

/// What the two servers said of one case, and how long kubectl took
/// against each.
struct Judged {
    case: String,
    real: (bool, String),
    ours: (bool, String),
    took: [Duration; 2],
}

/// Applies `manifest` to both; `exact` compares the messages whole,
/// otherwise up to the webhook's name (the transport's own words differ
/// between Go and Rust).
fn judge(servers: &[Server; 2], case: &str, args: &[&str], manifest: &Value) -> Judged {
    let file: String = case
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let file = format!("{file}.json");
    let timed = |server: &Server| {
        let started = std::time::Instant::now();
        let said = server.kubectl(args, &file, manifest);
        (said, started.elapsed())
    };
    let (real, real_took) = timed(&servers[0]);
    let (ours, ours_took) = timed(&servers[1]);
    Judged {
        case: case.to_owned(),
        real,
        ours,
        took: [real_took, ours_took],
    }
}

fn prefix(text: &str) -> String {
    let marker = format!("failed calling webhook \"{WEBHOOK}\"");
    match text.find(&marker) {
        Some(at) => text[..at + marker.len()].to_owned(),
        None => text.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sandbox_calls_webhooks_as_kube_apiserver_does() {
    let Some(up) = KubeUp::start(Components::default()) else {
        return;
    };
    let sandbox = TestSandbox::start().await;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let servers = [
        Server {
            name: "kube-apiserver",
            kubeconfig: up.kubeconfig.clone(),
            scratch: scratch.path().join("real"),
        },
        Server {
            name: "sandbox",
            kubeconfig: sandbox.sandbox.kubeconfig_path().to_path_buf(),
            scratch: scratch.path().join("sandbox"),
        },
    ];
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for server in &servers {
        std::fs::create_dir_all(&server.scratch).expect("scratch");
        let output = run_within(
            std::process::Command::new("kubectl")
                .env("KUBECONFIG", &server.kubeconfig)
                .args(["apply", "--server-side", "-f"])
                .arg(repo.join("deploy/crds")),
            LIMIT,
        );
        assert!(
            output.status.success(),
            "{} takes the CRDs: {output:?}",
            server.name
        );
        for namespace in ["shop", "exempt"] {
            server.apply(
                &format!("ns-{namespace}.json"),
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            );
        }
    }

    // The operator's webhook, with a certificate for 127.0.0.1.
    let webhook = loopback::LoopbackWebhook::start().await;
    let url = webhook.url.clone();
    let issued_bundle = webhook.bundle.clone();
    // Ports where nothing listens and where nothing answers.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
        listener.local_addr().expect("an address").port()
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
    let silent_port = silent.local_addr().expect("an address").port();
    let other_authority = certificate::issue(
        &["127.0.0.1".to_owned()],
        k8s_openapi::jiff::Timestamp::now(),
        None,
    )
    .expect("another authority")
    .bundle_pem;

    let mut judged = Vec::new();
    let create = ["create", "-n", "shop"];
    let apply = ["apply", "--server-side", "-n", "shop"];
    let use_configuration = |configuration: Value| {
        for server in &servers {
            server.apply("configuration.json", &configuration);
        }
    };
    use_configuration(configuration(&url, &issued_bundle, "Fail", 5));
    // kube-apiserver reads webhook configurations from its informer.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let retain = cluster("retain", 15, json!({"shared_buffers": "Retain"}));
    let timeout15 = cluster("timeout15", 15, json!({"transaction_timeout": "5s"}));
    let memory = with(
        cluster("memory", 15, json!({})),
        "/spec",
        json!({"instances": 1, "postgres": {"version": 15}, "storage": {"size": "1Gi"},
               "resources": {"requests": {"memory": "-1Gi"}}}),
    );
    let cpu = with(
        memory.clone(),
        "/spec/resources",
        json!({"limits": {"cpu": "s3://"}}),
    );
    let cpu = with(cpu, "/metadata/name", json!("cpu"));
    let refused = [
        ("shared_buffers Retain", retain.clone()),
        ("transaction_timeout on 15", timeout15.clone()),
        ("requests.memory -1Gi", memory),
        ("limits.cpu s3://", cpu),
    ];
    for (case, manifest) in &refused {
        judged.push((true, false, judge(&servers, case, &create, manifest)));
    }
    let good = cluster("good", 17, json!({"transaction_timeout": "5s"}));
    judged.push((
        true,
        true,
        judge(&servers, "transaction_timeout on 17", &create, &good),
    ));
    judged.push((
        true,
        true,
        judge(
            &servers,
            "the selector leaves a namespace out",
            &["create", "-n", "exempt"],
            &retain,
        ),
    ));
    judged.push((
        true,
        true,
        judge(&servers, "a valid cluster", &apply, &good),
    ));
    let worse = with(good.clone(), "/spec/postgres/version", json!(17));
    let worse = with(
        worse,
        "/spec/postgres/parameters",
        json!({"shared_buffers": "Keep"}),
    );
    judged.push((
        true,
        false,
        judge(&servers, "an update to a bad value", &apply, &worse),
    ));
    let relabelled = with(good.clone(), "/metadata/labels", json!({"team": "db"}));
    judged.push((
        true,
        true,
        judge(&servers, "an update of labels only", &apply, &relabelled),
    ));

    use_configuration(configuration(
        &format!("https://127.0.0.1:{dead}{}", serve::PATH),
        &issued_bundle,
        "Fail",
        5,
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    judged.push((
        false,
        false,
        judge(&servers, "nothing listens, Fail", &create, &good),
    ));
    use_configuration(configuration(
        &format!("https://127.0.0.1:{dead}{}", serve::PATH),
        &issued_bundle,
        "Ignore",
        5,
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ignored = with(good.clone(), "/metadata/name", json!("ignored"));
    judged.push((
        false,
        true,
        judge(&servers, "nothing listens, Ignore", &create, &ignored),
    ));
    use_configuration(configuration(&url, &other_authority, "Fail", 5));
    tokio::time::sleep(Duration::from_secs(3)).await;
    judged.push((
        false,
        false,
        judge(&servers, "another authority, Fail", &create, &timeout15),
    ));
    use_configuration(configuration(
        &format!("https://127.0.0.1:{silent_port}{}", serve::PATH),
        &issued_bundle,
        "Fail",
        1,
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    judged.push((
        false,
        false,
        judge(&servers, "no answer within 1 s, Fail", &create, &good),
    ));
    let waited = started.elapsed();
    drop(silent);

    let mut disagreements = Vec::new();
    for (exact, expected, judged) in &judged {
        let (real, ours) = (&judged.real, &judged.ours);
        eprintln!(
            "{} ({} ms, {} ms):\n  kube-apiserver: {} {}\n  sandbox:        {} {}",
            judged.case,
            judged.took[0].as_millis(),
            judged.took[1].as_millis(),
            real.0,
            real.1,
            ours.0,
            ours.1
        );
        let same_text = if *exact {
            real.1 == ours.1
        } else {
            prefix(&real.1) == prefix(&ours.1)
        };
        if real.0 != *expected || ours.0 != *expected || !same_text {
            disagreements.push(judged.case.clone());
        }
        if !expected && *exact {
            assert!(
                real.1.contains("spec."),
                "{}: the field is named: {}",
                judged.case,
                real.1
            );
        }
    }
    drop(webhook);
    assert!(
        waited < Duration::from_secs(20),
        "the timeout bounds the wait: {waited:?}"
    );
    assert!(
        disagreements.is_empty(),
        "{} of {} cases judged differently or not as expected: {disagreements:?}",
        disagreements.len(),
        judged.len()
    );
}
