//! The seam between the kubelet's logic (restarts, back-off, probes,
//! status, logs, exec, faults: `container`, `pod`) and what runs a
//! container: a host process (`process`) or a Docker container (`docker`).
//! A plan says how to launch a container; a launched one is waited for and
//! stopped the same way whichever runtime runs it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::docker::{DockerContainer, DockerError, DockerRuntime, DockerSpec};
use super::exit::Exit;
use super::process::{Process, ProcessSpec};

/// Which runtime the kubelet runs pods with.
#[derive(Clone, Debug, Default)]
pub enum ContainerRuntime {
    /// Pods are host processes (see `docs/sandbox.md`).
    #[default]
    Process,
    /// Pods are containers of the machine's Docker engine.
    Docker(Arc<DockerRuntime>),
}

impl ContainerRuntime {
    pub fn docker(&self) -> Option<&Arc<DockerRuntime>> {
        match self {
            Self::Process => None,
            Self::Docker(runtime) => Some(runtime),
        }
    }
}

/// How to start one run of a container.
#[derive(Clone, Debug)]
pub enum Launch {
    Process(ProcessSpec),
    Docker(Box<DockerSpec>),
}

impl Launch {
    /// Sets the CRI log file this run writes.
    pub fn set_log(&mut self, log: PathBuf) {
        match self {
            Self::Process(spec) => spec.log = log,
            Self::Docker(spec) => spec.log = log,
        }
    }
}

/// A started container of either runtime.
#[derive(Debug)]
pub enum Running {
    Process(Process),
    Docker(DockerContainer),
}

impl Running {
    /// Starts `launch`; on failure, the waiting reason and message.
    pub async fn start(launch: &Launch) -> Result<Self, (String, String)> {
        match launch {
            Launch::Process(spec) => Process::spawn(spec)
                .map(Self::Process)
                .map_err(|e| ("RunContainerError".to_owned(), e.to_string())),
            Launch::Docker(spec) => DockerContainer::start(spec)
                .await
                .map(Self::Docker)
                .map_err(|e| {
                    let reason = match e {
                        DockerError::MissingImage(_) => super::status::IMAGE_MISSING,
                        DockerError::RunsAsRoot | DockerError::NonNumericUser(_) => {
                            super::status::CONFIG_ERROR
                        }
                        _ => "RunContainerError",
                    };
                    (reason.to_owned(), e.to_string())
                }),
        }
    }

    /// The main process's host pid (what faults signal).
    pub fn pid(&self) -> i32 {
        match self {
            Self::Process(p) => p.pid(),
            Self::Docker(c) => c.pid(),
        }
    }

    pub fn running_for(&self) -> Duration {
        match self {
            Self::Process(p) => p.running_for(),
            Self::Docker(c) => c.running_for(),
        }
    }

    /// Whether a sandbox killed outright must find this run by its pid on
    /// the next start (Docker containers are found by their labels).
    pub fn recorded(&self) -> bool {
        matches!(self, Self::Process(_))
    }

    pub async fn wait(&mut self) -> Exit {
        match self {
            Self::Process(p) => p.wait().await,
            Self::Docker(c) => c.wait().await,
        }
    }

    pub async fn stop(&mut self, grace: Duration) -> Exit {
        match self {
            Self::Process(p) => p.stop(grace).await,
            Self::Docker(c) => c.stop(grace).await,
        }
    }
}
