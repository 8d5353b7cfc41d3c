//! `tusk logs CLUSTER`: the logs of every instance pod, each line prefixed
//! with its instance's name, read through the API (`pods/log`).

use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::LogParams;

use super::CommandError;
use super::cluster_access::{ClusterRef, Target, block_on, kubernetes};
use crate::output::out;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: ClusterRef,
    /// Lines from the end of each instance's log [default: all].
    #[arg(long)]
    pub tail: Option<i64>,
}

/// `text` with every line prefixed by `instance`.
pub fn prefixed(instance: &str, text: &str) -> String {
    text.lines()
        .map(|line| format!("{instance} | {line}\n"))
        .collect()
}

/// The container whose log is the instance's: the first (PostgreSQL's).
pub fn container_of(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
}

pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    block_on(async {
        let target = Target::connect(args.at.namespace.as_deref()).await?;
        target.cluster(&args.at.cluster).await?;
        let pods = target.pods(&args.at.cluster).await?;
        if pods.is_empty() {
            eprintln!("{} has no instance pods", args.at.cluster);
            return Ok(ExitCode::from(1));
        }
        let api = target.api::<Pod>();
        for pod in &pods {
            let name = pod.name_any();
            let params = LogParams {
                container: container_of(pod),
                tail_lines: args.tail,
                ..LogParams::default()
            };
            match api.logs(&name, &params).await {
                Ok(text) => out!("{}", prefixed(&name, &text))?,
                Err(error) => eprintln!("{name}: cannot read its log: {}", kubernetes(error)),
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_names_its_instance() {
        assert_eq!(prefixed("db-1", "a\nb\n"), "db-1 | a\ndb-1 | b\n");
        assert_eq!(prefixed("db-1", ""), "");
    }
}
