//! `tusk operator`: the controller, with leader election, its metrics
//! endpoint and the admission webhook. Configuration comes from flags or the environment, so the
//! Helm chart's Deployment needs no config file.

use std::net::SocketAddr;
use std::process::ExitCode;

use tokio::sync::watch;
use tusk_operator::config::{OperatorConfig, setting};
use tusk_operator::controller::Options;
use tusk_operator::leader::LeaseTiming;
use tusk_operator::run::{Leadership, Settings, run as run_operator};
use tusk_operator::webhook::{Registration, WebhookSettings};

use super::CommandError;

#[derive(clap::Args)]
pub struct Args {
    /// Watch only this namespace (namespace-scoped mode); all when omitted.
    #[arg(long, env = "TUSK_WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Clusters reconciled at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub http_address: SocketAddr,
    /// Serve the PostgresCluster admission webhook over HTTPS on this
    /// address (every replica does; the certificate is kept in a Secret of
    /// the operator's namespace and its authority injected into the
    /// ValidatingWebhookConfiguration). Not served when omitted.
    #[arg(long)]
    pub webhook_address: Option<SocketAddr>,
    /// The Service in front of the webhook, named by its certificate.
    #[arg(long, default_value = tusk_operator::webhook::SERVICE)]
    pub webhook_service: String,
    /// The ValidatingWebhookConfiguration whose caBundle is kept.
    #[arg(long, default_value = tusk_operator::webhook::CONFIGURATION)]
    pub webhook_configuration: String,
    /// Run without leader election (only for a single replica).
    #[arg(long)]
    pub no_leader_election: bool,
    /// Namespace of the leader Lease (the operator's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity for leader election.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Image holding the `tusk` binary, injected into PostgreSQL pods;
    /// by default this very version's image, never a floating tag.
    #[arg(
        long,
        env = setting::OPERATOR_IMAGE,
        default_value_t = tusk_operator::install::operator_image()
    )]
    pub operator_image: String,
    /// Image for clusters that name none; `{version}` becomes the major version.
    #[arg(
        long,
        env = setting::DEFAULT_POSTGRES_IMAGE,
        default_value = "postgres:{version}"
    )]
    pub default_postgres_image: String,
    /// User id PostgreSQL runs as in its pods (never 0).
    #[arg(long, env = setting::POSTGRES_UID, default_value_t = 999, value_parser = clap::value_parser!(i64).range(1..))]
    pub postgres_uid: i64,
    /// Group id PostgreSQL runs as in its pods.
    #[arg(long, env = setting::POSTGRES_GID, default_value_t = 999, value_parser = clap::value_parser!(i64).range(1..))]
    pub postgres_gid: i64,
    /// Clusters whose pods roll at the same time when nothing but the
    /// operator's version changed them (an operator upgrade); the others
    /// wait their turn. Changes of a cluster's own spec roll at once.
    #[arg(long, env = setting::MAX_CONCURRENT_UPGRADES, default_value_t = tusk_operator::rollout::slots::DEFAULT_LIMIT, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_upgrades: u16,
    #[command(flatten)]
    pub log: super::logging::LogArgs,
}

impl Args {
    fn settings(&self) -> Settings {
        let identity = self
            .identity
            .clone()
            .unwrap_or_else(|| format!("tusk-operator-{}", std::process::id()));
        Settings {
            config: OperatorConfig {
                operator_image: self.operator_image.clone(),
                default_postgres_image: self.default_postgres_image.clone(),
                postgres_uid: self.postgres_uid,
                postgres_gid: self.postgres_gid,
                max_concurrent_upgrades: self.max_concurrent_upgrades,
                ..OperatorConfig::default()
            },
            options: Options {
                concurrency: self.concurrency,
                namespace: self.namespace.clone(),
            },
            http_address: Some(self.http_address),
            webhook: self.webhook_address.map(|address| WebhookSettings {
                address,
                registration: Registration {
                    namespace: self.lease_namespace.clone(),
                    service: self.webhook_service.clone(),
                    configuration: self.webhook_configuration.clone(),
                },
            }),
            leadership: (!self.no_leader_election).then(|| Leadership {
                namespace: self.lease_namespace.clone(),
                identity,
                timing: LeaseTiming::default(),
            }),
        }
    }
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    super::logging::init(args.log.log_format, &[]);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        watch_namespace = args.namespace.as_deref().unwrap_or("(all)"),
        http_address = %args.http_address,
        "operator starting"
    );
    let runtime = tokio::runtime::Runtime::new().map_err(CommandError::Runtime)?;
    let outcome = runtime.block_on(async {
        let client = kube::Client::try_default()
            .await
            .map_err(|e| CommandError::Kubernetes(e.to_string()))?;
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            super::logging::wait_for_termination().await;
            tracing::info!("stopping: finishing in-flight reconciles");
            let _ = stop_tx.send(true);
        });
        run_operator(client, args.settings(), stop_rx)
            .await
            .map_err(|e| CommandError::Kubernetes(e.to_string()))?;
        Ok(ExitCode::SUCCESS)
    });
    // Reported through the logger, so a JSON log stays one object a line.
    outcome.or_else(|error: CommandError| {
        tracing::error!(%error, "the operator stopped");
        Ok(ExitCode::from(2))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn the_injected_image_defaults_to_this_version_never_a_floating_tag() {
        // Without TUSK_OPERATOR_IMAGE in the environment (the test suite
        // sets none).
        let parsed = Command::try_parse_from(["operator"]).expect("defaults parse");
        assert_eq!(
            parsed.args.operator_image,
            format!("ghcr.io/tusk-dev/tusk:{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
