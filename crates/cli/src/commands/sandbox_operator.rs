//! How `tusk sandbox up` runs the operator: by default installed the way a
//! user installs it (the objects of deploy/install.yaml: namespace,
//! ServiceAccount, RBAC, Deployment, metrics Service), so it runs as the
//! Deployment's pod under its own ServiceAccount, with the sandbox's
//! settings given as a user would give them, in the Deployment's
//! environment and arguments. `--operator-in-process` runs it inside
//! `tusk sandbox up` instead, for debugging.

use kube::Client;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tusk_operator::config::OperatorConfig;
use tusk_operator::install;
use tusk_operator::run::{Settings, run as run_operator};
use tusk_sandbox::converge::{self, Applied};

use super::CommandError;

/// Where the operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperatorMode {
    /// As the pod of the installed Deployment.
    Pod,
    /// In this process, with the sandbox's admin credentials.
    InProcess,
    /// Not at all.
    None,
}

fn failed(error: impl std::fmt::Display) -> CommandError {
    CommandError::Sandbox(error.to_string())
}

/// The user and group PostgreSQL pods run as: the machine's `postgres`
/// user when the sandbox runs as root, else the sandbox's own.
fn postgres_identity() -> Result<(u32, u32), CommandError> {
    tusk_sandbox::kubelet::postgres_identity().ok_or_else(|| {
        failed("running as root needs a `postgres` user for PostgreSQL pods (scripts/setup installs PostgreSQL)")
    })
}

/// The sandbox's settings on the operator Deployment, as a user would set
/// them on any cluster: PostgreSQL's user and group of this machine in the
/// container's environment, and the HTTP endpoints and the admission
/// webhook on the pod's own address (pods share the host's ports here, so
/// `0.0.0.0:8080` would be taken by the first pod that binds it).
pub fn with_sandbox_settings(mut deployment: Value, uid: u32, gid: u32) -> Value {
    let container = &mut deployment["spec"]["template"]["spec"]["containers"][0];
    let mut env = container["env"].as_array().cloned().unwrap_or_default();
    env.retain(|e| {
        !matches!(
            e["name"].as_str(),
            Some("TUSK_POSTGRES_UID" | "TUSK_POSTGRES_GID" | "POD_IP")
        )
    });
    env.extend([
        json!({"name": "TUSK_POSTGRES_UID", "value": uid.to_string()}),
        json!({"name": "TUSK_POSTGRES_GID", "value": gid.to_string()}),
        json!({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}),
    ]);
    container["env"] = json!(env);
    container["args"] = json!([
        "operator",
        format!("--http-address=$(POD_IP):{}", install::HTTP_PORT),
        format!(
            "--webhook-address=$(POD_IP):{}",
            tusk_operator::webhook::PORT
        ),
    ]);
    deployment
}

/// Applies the operator's installation (CRDs are installed already), with
/// the sandbox's settings on the Deployment for the process runtime, or
/// exactly as `deploy/install.yaml` has it for the Docker runtime, where
/// pods are containers of the real images as on a cluster.
pub async fn install_operator(client: &Client, as_is: bool) -> Result<Vec<Applied>, CommandError> {
    let identity = if as_is {
        None
    } else {
        Some(postgres_identity()?)
    };
    let documents: Vec<Value> = install::manifests()
        .map_err(failed)?
        .into_iter()
        .map(|d| match identity {
            Some((uid, gid)) if d["kind"] == "Deployment" => with_sandbox_settings(d, uid, gid),
            _ => d,
        })
        .collect();
    converge::apply(client, &documents).await.map_err(failed)
}

/// How long `tusk sandbox up` waits for the admission webhook.
const WEBHOOK_READY: std::time::Duration = std::time::Duration::from_secs(180);

/// Waits until a replica serves the admission webhook (its authority is
/// in the configuration's `caBundle` and the webhook's Service has a ready
/// endpoint): until then the API server refuses every PostgresCluster
/// write (`failurePolicy: Fail`), so manifests applied earlier would fail.
pub async fn wait_for_webhook(client: &Client) -> Result<(), CommandError> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::Endpoints;
    use kube::Api;
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), install::NAMESPACE);
    let deadline = tokio::time::Instant::now() + WEBHOOK_READY;
    loop {
        let injected = configurations
            .get_opt(tusk_operator::webhook::CONFIGURATION)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.webhooks)
            .is_some_and(|w| w.iter().all(|w| w.client_config.ca_bundle.is_some()));
        let served = endpoints
            .get_opt(tusk_operator::webhook::SERVICE)
            .await
            .ok()
            .flatten()
            .and_then(|e| e.subsets)
            .is_some_and(|s| {
                s.iter()
                    .any(|s| s.addresses.as_ref().is_some_and(|a| !a.is_empty()))
            });
        if injected && served {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(failed(format!(
                "the operator's admission webhook is not served after {} s (caBundle injected: {injected}, a ready endpoint: {served}); see kubectl -n {} logs deployment/{}",
                WEBHOOK_READY.as_secs(),
                install::NAMESPACE,
                install::NAME
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Starts the operator in this process.
pub fn start_in_process(
    client: &Client,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, CommandError> {
    let (uid, gid) = postgres_identity()?;
    let settings = Settings {
        config: OperatorConfig {
            postgres_uid: i64::from(uid),
            postgres_gid: i64::from(gid),
            ..OperatorConfig::default()
        },
        ..Settings::default()
    };
    let client = client.clone();
    Ok(tokio::spawn(async move {
        if let Err(error) = run_operator(client, settings, stop).await {
            tracing::error!(%error, "the operator stopped");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_sets_the_postgres_user_and_the_pods_own_address() {
        let deployment = serde_json::to_value(install::deployment()).expect("deployment");
        let set = with_sandbox_settings(deployment, 101, 104);
        let container = &set["spec"]["template"]["spec"]["containers"][0];
        let env = container["env"].as_array().expect("env");
        let value = |name: &str| {
            env.iter()
                .find(|e| e["name"] == name)
                .map(|e| e["value"].clone())
        };
        assert_eq!(value("TUSK_POSTGRES_UID"), Some(json!("101")));
        assert_eq!(value("TUSK_POSTGRES_GID"), Some(json!("104")));
        assert!(value("POD_NAME").is_some(), "the install's own env stays");
        assert_eq!(
            container["args"],
            json!([
                "operator",
                "--http-address=$(POD_IP):8080",
                "--webhook-address=$(POD_IP):9443"
            ])
        );
        assert_eq!(
            set["spec"]["template"]["spec"]["serviceAccountName"],
            "tusk-operator"
        );
        // Applying it again changes nothing.
        assert_eq!(with_sandbox_settings(set.clone(), 101, 104), set);
    }
}
