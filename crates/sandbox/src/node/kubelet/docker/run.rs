//! One run of a container on the engine: created, started, its output
//! copied into the CRI log file the process runtime writes too (so
//! `pods/log` reads both alike), waited for, stopped with the grace period
//! (the image's stop signal, then SIGKILL) and removed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, EventsOptionsBuilder, LogsOptionsBuilder,
    StopContainerOptionsBuilder,
};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::{DockerError, DockerRuntime, engine, remove};
use crate::node::kubelet::logs::{LogSink, Stream, copy_output};
use crate::node::kubelet::process::Exit;

/// What to create for one container.
#[derive(Clone, Debug)]
pub struct DockerSpec {
    pub runtime: Arc<DockerRuntime>,
    pub name: String,
    pub image: String,
    /// The container's whole configuration, the image included.
    pub body: ContainerCreateBody,
    /// stdout and stderr are appended here, in the CRI log format.
    pub log: PathBuf,
    /// `runAsNonRoot` without `runAsUser`: the image's user must be a
    /// non-zero uid.
    pub image_user_must_be_non_root: bool,
}

/// A running (or finished) container.
#[derive(Debug)]
pub struct DockerContainer {
    runtime: Arc<DockerRuntime>,
    name: String,
    pid: i32,
    started: Instant,
    /// It has a memory limit, so the kernel may end it at that limit.
    memory_limited: bool,
    exit: Option<Exit>,
    output: Option<tokio::task::JoinHandle<()>>,
}

impl DockerContainer {
    /// Creates and starts the container (replacing a leftover of the same
    /// name) and starts copying its output into its log.
    pub async fn start(spec: &DockerSpec) -> Result<Self, DockerError> {
        let docker = spec.runtime.docker();
        spec.runtime.require_image(&spec.image).await?;
        if spec.image_user_must_be_non_root {
            spec.runtime.require_non_root_image(&spec.image).await?;
        }
        remove(docker, &spec.name).await;
        let options = CreateContainerOptionsBuilder::default()
            .name(&spec.name)
            .build();
        docker
            .create_container(Some(options), spec.body.clone())
            .await
            .map_err(engine(format!("creating container {}", spec.name)))?;
        let sink = LogSink::new(open_log(&spec.log).map_err(|source| DockerError::Engine {
            what: format!("opening the log {}", spec.log.display()),
            source: bollard::errors::Error::IOError { err: source },
        })?);
        // Following before starting catches the first line too.
        let output = tokio::spawn(follow_logs(spec.runtime.clone(), spec.name.clone(), sink));
        let started = docker.start_container(&spec.name, None).await;
        if let Err(source) = started {
            output.abort();
            let message = format!("starting container {}", spec.name);
            remove(docker, &spec.name).await;
            return Err(DockerError::Engine {
                what: message,
                source,
            });
        }
        let pid = docker
            .inspect_container(&spec.name, None)
            .await
            .ok()
            .and_then(|c| c.state?.pid)
            .and_then(|pid| i32::try_from(pid).ok())
            .unwrap_or(0);
        Ok(Self {
            runtime: spec.runtime.clone(),
            name: spec.name.clone(),
            pid,
            started: Instant::now(),
            memory_limited: spec
                .body
                .host_config
                .as_ref()
                .and_then(|h| h.memory)
                .is_some_and(|bytes| bytes > 0),
            exit: None,
            output: Some(output),
        })
    }

    /// The container's main process, as the host sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn running_for(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits for the container to end; its exit code and whether the
    /// kernel's OOM killer ended it.
    pub async fn wait(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let docker = self.runtime.docker();
        let mut waiting = docker.wait_container(&self.name, None);
        // Ends (with an error for a non-zero code) when the container stops.
        while let Some(_event) = waiting.next().await {}
        let state = docker
            .inspect_container(&self.name, None)
            .await
            .ok()
            .and_then(|c| c.state);
        let code = state
            .as_ref()
            .and_then(|s| s.exit_code)
            .and_then(|c| i32::try_from(c).ok())
            .unwrap_or(-1);
        let mut oom_killed = state.and_then(|s| s.oom_killed).unwrap_or(false);
        if !oom_killed && code == 137 && self.memory_limited {
            oom_killed = self.oom_event().await;
        }
        if let Some(output) = self.output.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), output).await;
        }
        let exit = Exit {
            code,
            signal: (code > 128).then_some(code - 128),
            oom_killed,
        };
        self.exit = Some(exit);
        remove(docker, &self.name).await;
        exit
    }

    /// Whether the engine reported an `oom` event for this container since
    /// it started. The engine may record a container's exit before the
    /// OOM killer's event, leaving `State.OOMKilled` false on a container
    /// the kernel killed at its memory limit (seen on a loaded machine):
    /// a SIGKILL exit of a container with a limit is checked against the
    /// engine's events, for about a second.
    async fn oom_event(&self) -> bool {
        let docker = self.runtime.docker();
        let since = SystemTime::now()
            .checked_sub(self.started.elapsed() + Duration::from_secs(1))
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let filters = HashMap::from([
            ("container".to_owned(), vec![self.name.clone()]),
            ("event".to_owned(), vec!["oom".to_owned()]),
        ]);
        for _ in 0..5 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let until = format!("{}.{:09}", now.as_secs(), now.subsec_nanos());
            let options = EventsOptionsBuilder::default()
                .since(&since.to_string())
                .until(&until)
                .filters(&filters)
                .build();
            let mut events = docker.events(Some(options));
            let first = tokio::time::timeout(Duration::from_secs(2), events.next()).await;
            if matches!(first, Ok(Some(Ok(_)))) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        false
    }

    /// The image's stop signal, up to `grace` to exit, then SIGKILL.
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        // A frozen container must be able to act on the signal.
        crate::node::kubelet::process::signal_tree(self.pid, nix::sys::signal::Signal::SIGCONT);
        let seconds = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        let options = StopContainerOptionsBuilder::default().t(seconds).build();
        let _ = self
            .runtime
            .docker()
            .stop_container(&self.name, Some(options))
            .await;
        self.wait().await
    }
}

impl Drop for DockerContainer {
    /// A container outlives nothing that owns it: removed with its owner.
    fn drop(&mut self) {
        if self.exit.is_none() {
            if let Some(output) = &self.output {
                output.abort();
            }
            let runtime = self.runtime.clone();
            let name = self.name.clone();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move { remove(runtime.docker(), &name).await });
            }
        }
    }
}

fn open_log(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Copies the container's stdout and stderr, as the engine streams them,
/// into `sink` line by line until the container ends.
async fn follow_logs(runtime: Arc<DockerRuntime>, name: String, sink: LogSink) {
    let (mut stdout_in, stdout_out) = tokio::io::duplex(64 * 1024);
    let (mut stderr_in, stderr_out) = tokio::io::duplex(64 * 1024);
    let copies = tokio::spawn(async move {
        tokio::join!(
            copy_output(stdout_out, Stream::Stdout, sink.clone()),
            copy_output(stderr_out, Stream::Stderr, sink)
        );
    });
    let options = LogsOptionsBuilder::default()
        .follow(true)
        .stdout(true)
        .stderr(true)
        .build();
    // The container may not have started yet: retry until it has output
    // or is gone.
    for _ in 0..50 {
        let mut logs = runtime.docker().logs(&name, Some(options.clone()));
        let mut any = false;
        while let Some(Ok(chunk)) = logs.next().await {
            any = true;
            let _ = match chunk {
                bollard::container::LogOutput::StdErr { message } => {
                    stderr_in.write_all(&message).await
                }
                bollard::container::LogOutput::StdOut { message }
                | bollard::container::LogOutput::Console { message } => {
                    stdout_in.write_all(&message).await
                }
                bollard::container::LogOutput::StdIn { .. } => Ok(()),
            };
        }
        if any {
            break;
        }
        let state = runtime
            .docker()
            .inspect_container(&name, None)
            .await
            .ok()
            .and_then(|c| c.state);
        let not_yet = state.is_some_and(|s| {
            s.running == Some(true) || s.started_at.unwrap_or_default().starts_with("0001")
        });
        if !not_yet {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(stdout_in);
    drop(stderr_in);
    let _ = copies.await;
}
