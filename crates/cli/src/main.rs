//! `tusk`: one binary for every Tusk role.
//!
//! Subcommands live in `commands/`, one module each; this file only parses
//! arguments and maps outcomes to exit codes (0 success, 1 the input was
//! checked and refused, 2 the command itself could not run).

mod commands;
mod manifests;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tusk",
    version,
    about = "Tusk: a PostgreSQL operator for Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions as YAML, or write one file per CRD.
    Crds(commands::crds::Args),
    /// Print the operator's installation (deploy/install.yaml) or write its
    /// kustomize base.
    Install(commands::install::Args),
    /// Check manifests the way the API server admits them.
    Validate(commands::validate::Args),
    /// The instance manager inside each PostgreSQL pod.
    Instance(commands::instance::Args),
    /// Run the PostgresCluster controller.
    Operator(commands::operator::Args),
    /// Switch the primary over to an instance, or approve a blocked failover
    /// (`--accept-data-loss`).
    Promote(commands::promote::Args),
    /// Copy this binary into a PostgreSQL pod (its init container runs this).
    InstallManager(commands::install_manager::Args),
    /// A Kubernetes-compatible control plane on this machine.
    Sandbox(commands::sandbox::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Crds(args) => commands::crds::run(&args),
        Command::Install(args) => commands::install::run(&args),
        Command::Validate(args) => commands::validate::run(&args),
        Command::Instance(args) => commands::instance::run(&args),
        Command::Operator(args) => commands::operator::run(&args),
        Command::Promote(args) => commands::promote::run(&args),
        Command::InstallManager(args) => commands::install_manager::run(&args),
        Command::Sandbox(args) => commands::sandbox::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
