//! Admission parity, with kube-apiserver as the referee: every manifest of
//! the corpus (`parity/corpus.rs`: the examples and fixtures, a mutation of
//! every field and bound of the PostgresCluster schema, YAML 1.1 scalars,
//! updates, what only the controller's rules refuse) is judged by a real
//! kube-apiserver (v1.36, from the shared Kubernetes folder) and by the
//! sandbox's API server, both calling the operator's admission webhook
//! (served by the test on loopback), and by `tusk validate`.
//! All three must accept or refuse alike, and a refusal must name the same
//! fields. The test prints the corpus's size and every disagreement.
//!
//! Where the shared folder is absent the test says so and returns.

mod parity;
// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;

use std::path::Path;

use parity::judge::{Server, Verdict, tusk_validate};
use tusk_sandbox::testing::TestSandbox;
use tusk_sandbox::testing::kube_up::{Components, KubeUp};

fn verdict_line(judge: &str, verdict: &Verdict) -> String {
    match verdict {
        Verdict::Accepted => format!("  {judge}: accepted"),
        Verdict::Refused { fields, text } => format!(
            "  {judge}: refused at {fields:?}\n    {}",
            text.trim().replace('\n', "\n    ")
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kube_apiserver_the_sandbox_and_tusk_validate_agree_on_the_corpus() {
    let Some(up) = KubeUp::start(Components::default()) else {
        return;
    };
    let sandbox = TestSandbox::start().await;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    for (name, kubeconfig) in [
        ("kube-apiserver", up.kubeconfig.as_path()),
        ("sandbox", sandbox.sandbox.kubeconfig_path()),
    ] {
        let output = process::run_within(
            std::process::Command::new("kubectl")
                .env("KUBECONFIG", kubeconfig)
                .args(["apply", "--server-side", "-f"])
                .arg(repo.join("deploy/crds"))
                .args(["--wait"]),
            std::time::Duration::from_secs(60),
        );
        assert!(output.status.success(), "{name} takes the CRDs: {output:?}");
    }
    // Both API servers call the operator's webhook, as an installation
    // does, so what only the controller's rules refuse is refused at
    // admission too.
    let webhook = parity::webhook::LoopbackWebhook::start().await;
    let configuration = parity::webhook::configuration(
        &webhook.url,
        &webhook.bundle,
        "Fail",
        5,
        tusk_operator::install::NAMESPACE,
    );
    let configuration_file = scratch.path().join("webhook.json");
    std::fs::write(&configuration_file, configuration.to_string()).expect("written");
    for (name, kubeconfig) in [
        ("kube-apiserver", up.kubeconfig.as_path()),
        ("sandbox", sandbox.sandbox.kubeconfig_path()),
    ] {
        let output = process::run_within(
            std::process::Command::new("kubectl")
                .env("KUBECONFIG", kubeconfig)
                .args(["apply", "--server-side", "-f"])
                .arg(&configuration_file),
            std::time::Duration::from_secs(60),
        );
        assert!(
            output.status.success(),
            "{name} takes the webhook: {output:?}"
        );
    }
    // kube-apiserver reads webhook configurations from its informer.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let real = Server {
        kubeconfig: &up.kubeconfig,
        scratch: &scratch.path().join("real"),
    };
    let ours = Server {
        kubeconfig: sandbox.sandbox.kubeconfig_path(),
        scratch: &scratch.path().join("sandbox"),
    };
    std::fs::create_dir_all(real.scratch).expect("scratch");
    std::fs::create_dir_all(ours.scratch).expect("scratch");
    // Both API servers know the CRDs once they serve them.
    tusk_sandbox::testing::wait_for(
        "the CRDs to be served",
        tusk_sandbox::testing::WAIT,
        || async {
            let real = process::run_within(
                std::process::Command::new("kubectl")
                    .env("KUBECONFIG", &up.kubeconfig)
                    .args(["get", "postgresclusters"]),
                std::time::Duration::from_secs(20),
            );
            let ours = process::run_within(
                std::process::Command::new("kubectl")
                    .env("KUBECONFIG", sandbox.sandbox.kubeconfig_path())
                    .args(["get", "postgresclusters"]),
                std::time::Duration::from_secs(20),
            );
            real.status.success() && ours.status.success()
        },
    )
    .await;

    let cases = parity::corpus::all(&repo);
    // Judged three at a time: each verdict is a few short processes.
    let judged = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(case) = cases.get(index) else { break };
                    let verdicts = (
                        real.judge(index, case),
                        ours.judge(index, case),
                        tusk_validate(scratch.path(), index, case),
                    );
                    judged
                        .lock()
                        .expect("no judge panicked")
                        .push((index, verdicts));
                }
            });
        }
    });
    let mut judged = judged.into_inner().expect("no judge panicked");
    judged.sort_by_key(|(index, _)| *index);
    let mut disagreements = Vec::new();
    for (index, (referee, sandboxed, local)) in &judged {
        let case = &cases[*index];
        let agree = |other: &Verdict| {
            other.refused() == referee.refused() && other.fields() == referee.fields()
        };
        if !agree(sandboxed) || !agree(local) {
            disagreements.push(format!(
                "{}:\n{}\n{}\n{}",
                case.name,
                verdict_line("kube-apiserver", referee),
                verdict_line("sandbox", sandboxed),
                verdict_line("tusk validate", local)
            ));
        }
    }
    // The cases the webhook exists for are refused by kube-apiserver itself
    // (through the webhook), the field named.
    for (index, (referee, _, _)) in &judged {
        let case = &cases[*index];
        let measured = [
            "controller: shared_buffers Retain",
            "controller: transaction_timeout on 15",
            "controller: requests.memory -1Gi",
            "controller: limits.cpu s3://",
        ];
        if measured.contains(&case.name.as_str()) {
            assert!(
                referee.refused() && !referee.fields().is_empty(),
                "{}: {}",
                case.name,
                verdict_line("kube-apiserver", referee)
            );
        }
    }
    let refused = cases.len();
    eprintln!(
        "parity corpus: {refused} manifests judged by kube-apiserver, the sandbox and tusk validate; {} disagreements",
        disagreements.len()
    );
    assert!(
        cases.len() >= 150,
        "the corpus has {} cases, fewer than 150",
        cases.len()
    );
    assert!(
        disagreements.is_empty(),
        "{} of {} cases judged differently:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
}
