//! The admission webhook as `deploy/install.yaml` installs it, on a real
//! kube-apiserver (v1.36, from the shared Kubernetes folder): the
//! operator's two replicas run on the sandbox's node joined to kube-up
//! (Docker runtime), keep their certificate and inject its authority into
//! the ValidatingWebhookConfiguration, and kube-apiserver calls them
//! through the webhook's Service (at its endpoints: kube-up runs no
//! kube-proxy). `kubectl create` of values the CRD admits and the
//! controller refuses (a parameter value or name wrong for the major, bad
//! resource quantities) is then refused, naming the field; a valid
//! cluster is admitted.
//!
//! Where the shared folder is absent the test says so and returns.

mod common;
#[path = "referee/node.rs"]
mod node;
// Shared with other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
mod referee;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Api;
use node::Joined;
use process::run_within;

fn manifest(name: &str, version: u32, extra: &str) -> String {
    format!(
        "apiVersion: postgres.tusk.dev/v1alpha1\nkind: PostgresCluster\nmetadata: {{name: {name}}}\n\
         spec:\n  instances: 1\n  postgres: {{version: {version}{extra}}}\n  storage: {{size: 1Gi}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_installed_webhook_refuses_on_kube_apiserver_naming_the_field() {
    let Some(joined) = Joined::start().await else {
        return;
    };
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(joined.client.clone());
    tusk_sandbox::testing::eventually(
        "the operator to inject its authority",
        Duration::from_secs(120),
        || {
            let configurations = configurations.clone();
            async move {
                let configuration = configurations.get("tusk-operator").await.ok()?;
                configuration
                    .webhooks?
                    .first()?
                    .client_config
                    .ca_bundle
                    .as_ref()
                    .map(|_| ())
            }
        },
    )
    .await;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let cases = [
        (
            "retain",
            manifest("retain", 15, ", parameters: {shared_buffers: Retain}"),
            Some("spec.postgres.parameters.shared_buffers"),
        ),
        (
            "timeout15",
            manifest("timeout15", 15, ", parameters: {transaction_timeout: 5s}"),
            Some("spec.postgres.parameters.transaction_timeout"),
        ),
        (
            "memory",
            manifest("memory", 15, "") + "  resources: {requests: {memory: \"-1Gi\"}}\n",
            Some("spec.resources.requests.memory"),
        ),
        (
            "cpu",
            manifest("cpu", 15, "") + "  resources: {limits: {cpu: \"s3://\"}}\n",
            Some("spec.resources.limits.cpu"),
        ),
        (
            "timeout17",
            manifest("timeout17", 17, ", parameters: {transaction_timeout: 5s}"),
            None,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, text, refused_at) in cases {
        let path = scratch.path().join(format!("{name}.yaml"));
        std::fs::write(&path, &text).expect("written");
        // Kubernetes' informers may take a moment to see the caBundle:
        // a call that fails (rather than a refusal naming a field) is
        // tried again, for a bounded time.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let (ok, said) = loop {
            let output = run_within(
                joined
                    .up
                    .kubectl()
                    .args(["create", "--dry-run=server", "-n", "default", "-f"])
                    .arg(&path),
                Duration::from_secs(60),
            );
            let said = String::from_utf8_lossy(&output.stderr).into_owned();
            let failed_call = said.contains("failed calling webhook");
            if !failed_call || std::time::Instant::now() >= deadline {
                break (output.status.success(), said);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        };
        eprintln!("{name}: admitted {ok}; {}", said.trim());
        let as_expected = match refused_at {
            Some(field) => !ok && said.contains(field),
            None => ok,
        };
        if !as_expected {
            wrong.push(format!("{name}: {said}"));
        }
    }
    assert!(wrong.is_empty(), "judged not as expected: {wrong:#?}");
}
