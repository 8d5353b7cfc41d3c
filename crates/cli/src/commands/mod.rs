//! One module per subcommand.

pub mod approve;
pub mod backup;
pub mod cluster_access;
pub mod crds;
pub mod fence;
pub mod install;
pub mod install_manager;
pub mod instance;
pub mod logging;
pub mod logs;
pub mod operator;
pub mod plan;
pub mod promote;
pub mod psql;
pub mod rehearse;
pub mod report;
pub mod restore;
pub mod sandbox;
pub mod sandbox_fault;
pub mod sandbox_join;
pub mod sandbox_node;
pub mod sandbox_operator;
pub mod status;
pub mod validate;
pub mod why;

/// Why a command could not run (as opposed to input it checked and refused).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("cannot render YAML: {0}")]
    Render(#[from] serde_yaml_ng::Error),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Kubernetes(String),
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// Stdout could not be written; closed by its reader, the command ends
    /// quietly (`crate::output::is_closed`).
    #[error("cannot write to standard output: {0}")]
    Output(std::io::Error),
}
