//! `tusk`: one binary for every Tusk role.
//!
//! Subcommands live in `commands/`, one module each; this file only parses
//! arguments and maps outcomes to exit codes (0 success, 1 the input was
//! checked and refused, 2 the command itself could not run). Commands print
//! through `output`, so a stdout closed by its reader ends them quietly.

mod commands;
mod manifests;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    /// What awaits approval (a blocked failover, an upgrade), and the
    /// approval of exactly that, by its identity.
    Approve(commands::approve::Args),
    /// Take a base backup now (a PostgresBackup) and follow it.
    Backup(commands::backup::Args),
    /// Restore the newest backup into a scratch instance now, check it,
    /// and print what was found.
    Rehearse(commands::rehearse::Args),
    /// Print (or create with --apply) a new cluster restored from a
    /// cluster's backups, to a point in time.
    Restore(commands::restore::Args),
    /// A cluster on one screen: phase, conditions, primary, instances,
    /// last failover, backups.
    Status(commands::status::Args),
    /// Why a cluster is not Ready: conditions, instances and Warning events.
    Why(commands::why::Args),
    /// What the operator's next pass over a cluster would do, computed by
    /// its own planner from the live objects, applying nothing.
    Plan(commands::plan::Args),
    /// Run psql against the cluster's read-write Service.
    Psql(commands::psql::Args),
    /// The logs of every instance, each line prefixed with its name.
    Logs(commands::logs::Args),
    /// A support bundle: the cluster, its objects, events and logs, with
    /// every Secret value redacted, written to a new directory.
    Report(commands::report::Args),
    /// Fence an instance (`*`: all): its PostgreSQL stops and stays stopped.
    Fence(commands::fence::Args),
    /// Unfence an instance (`*`: all) fenced by `tusk fence`.
    Unfence(commands::fence::Args),
    /// Copy this binary into a PostgreSQL pod (its init container runs this).
    InstallManager(commands::install_manager::Args),
    /// A Kubernetes-compatible control plane on this machine.
    Sandbox(commands::sandbox::Args),
}

/// The name kubectl runs a plugin by: `kubectl tusk ...` runs
/// `kubectl-tusk ...` from PATH, which is this binary under another name.
const KUBECTL_PLUGIN: &str = "kubectl-tusk";

/// Parses the arguments; invoked as `kubectl-tusk`, help and errors speak
/// of `kubectl tusk`.
fn parse() -> Cli {
    let invoked_as = std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    let mut command = Cli::command();
    if invoked_as.as_deref() == Some(KUBECTL_PLUGIN) {
        command = command.bin_name("kubectl tusk");
    }
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

fn main() -> ExitCode {
    let cli = parse();
    let outcome = match cli.command {
        Command::Crds(args) => commands::crds::run(&args),
        Command::Install(args) => commands::install::run(&args),
        Command::Validate(args) => commands::validate::run(&args),
        Command::Instance(args) => commands::instance::run(&args),
        Command::Operator(args) => commands::operator::run(&args),
        Command::Promote(args) => commands::promote::run(&args),
        Command::Approve(args) => commands::approve::run(&args),
        Command::Backup(args) => commands::backup::run(&args),
        Command::Rehearse(args) => commands::rehearse::run(&args),
        Command::Restore(args) => commands::restore::run(&args),
        Command::Status(args) => commands::status::run(&args),
        Command::Why(args) => commands::why::run(&args),
        Command::Plan(args) => commands::plan::run(&args),
        Command::Psql(args) => commands::psql::run(&args),
        Command::Logs(args) => commands::logs::run(&args),
        Command::Report(args) => commands::report::run(&args),
        Command::Fence(args) => commands::fence::run(&args, true),
        Command::Unfence(args) => commands::fence::run(&args, false),
        Command::InstallManager(args) => commands::install_manager::run(&args),
        Command::Sandbox(args) => commands::sandbox::run(&args),
    };
    match outcome {
        Ok(code) => code,
        // `tusk crds | head -1`: the reader has what it wanted.
        Err(error) if output::is_closed(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
