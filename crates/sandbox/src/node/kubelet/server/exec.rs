//! `/exec/{namespace}/{pod}/{container}`: runs a command the way the
//! container's own processes run (see `ExecTemplate` and
//! `process::container_command`) and carries its stdin, stdout, stderr and
//! exit status over a WebSocket in the remote command framing
//! ([`super::channel`]).
//!
//! Sessions have no terminal: `tty=true` is accepted and the command runs
//! with pipes (its stderr sent as stdout, as a terminal would show it),
//! resize messages are ignored. A terminal would need `setsid` and
//! `TIOCSCTTY` in the child and `TIOCSWINSZ` for resizes, which need
//! `unsafe` code the workspace forbids.

use std::process::Stdio;
use std::sync::Arc;

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use nix::sys::signal::Signal;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;
use tokio::sync::mpsc;

use super::authorize::Action;
use super::channel::{self, Incoming};
use super::{ServerState, admit, bad_request, pod_not_found};
use crate::https::PeerIdentity;
use crate::node::kubelet::process::{ProcessSpec, container_command, signal_group};
use crate::node::kubelet::status::State as ContainerState;

/// How long a finished session waits for the client to close.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Which standard streams the client attaches.
#[derive(Clone, Copy, Debug, Default)]
struct Streams {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    /// A terminal was asked for: the client has no stderr stream then, and
    /// the command's stderr goes where a terminal would put it, to stdout.
    tty: bool,
}

impl Streams {
    /// The channel the command's stderr is sent on, if any.
    fn stderr_channel(self) -> Option<u8> {
        if self.stderr {
            Some(channel::STDERR)
        } else if self.tty && self.stdout {
            Some(channel::STDOUT)
        } else {
            None
        }
    }
}

fn flag(query: &[(String, String)], name: &str) -> bool {
    query
        .iter()
        .any(|(k, v)| k == name && matches!(v.as_str(), "true" | "1"))
}

pub async fn exec(
    State(state): State<Arc<ServerState>>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    peer: Option<Extension<PeerIdentity>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let peer = peer.map(|Extension(peer)| peer);
    if let Err(refused) = admit(&state, &headers, peer.as_ref(), Action::Run).await {
        return refused;
    }
    let command: Vec<String> = query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return bad_request("you must specify at least one command for the container");
    }
    // The kubelet's own names (`input`, `output`, `error`), which
    // kube-apiserver sends, or the pod API's, which the sandbox's API
    // server passes on.
    let streams = Streams {
        stdin: flag(&query, "input") || flag(&query, "stdin"),
        stdout: flag(&query, "output") || flag(&query, "stdout"),
        stderr: flag(&query, "error") || flag(&query, "stderr"),
        tty: flag(&query, "tty"),
    };
    if !(streams.stdin || streams.stdout || streams.stderr) {
        return bad_request("you must specify at least 1 of stdin, stdout, stderr");
    }
    let Some(pod) = state.pods.get(&namespace, &pod_name) else {
        return pod_not_found(&pod_name);
    };
    let running = pod
        .report(&container)
        .is_some_and(|r| matches!(r.state, ContainerState::Running { .. }));
    let template = pod.exec.get(&container).filter(|_| running);
    let Some(template) = template else {
        return bad_request(format!(
            "container {container} is not running in pod {pod_name}"
        ));
    };
    let spec = template.spec(&command);
    upgrade
        .protocols(channel::PROTOCOLS)
        .on_upgrade(move |socket| session(socket, spec, command, streams))
}

/// Sends everything read from `output` on `channel`.
async fn forward(mut output: impl AsyncRead + Unpin, channel: u8, out: mpsc::Sender<Vec<u8>>) {
    let mut buffer = vec![0u8; 32 * 1024];
    loop {
        match output.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if out
                    .send(channel::frame(channel, &buffer[..read]))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

async fn session(
    socket: WebSocket,
    spec: Result<ProcessSpec, String>,
    command: Vec<String>,
    streams: Streams,
) {
    let v5 = socket
        .protocol()
        .is_some_and(|p| p.as_bytes() == channel::V5.as_bytes());
    let (mut sink, mut incoming) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<Vec<u8>>(16);
    let writer = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            if sink.send(Message::Binary(message.into())).await.is_err() {
                return;
            }
        }
        // A normal closure is what ends the client's streams cleanly.
        let close = CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        };
        let _ = sink.send(Message::Close(Some(close))).await;
    });
    let status = match spec {
        Err(message) => channel::failure_status(&message),
        Ok(spec) => run(&spec, &command, streams, v5, &mut incoming, &out).await,
    };
    let _ = out
        .send(channel::frame(
            channel::ERROR,
            status.to_string().as_bytes(),
        ))
        .await;
    drop(out);
    let _ = writer.await;
    // Wait for the client's answering Close before the connection goes:
    // closing first would answer whatever the client still sends (its
    // stdin) with a reset, which can drop the status it has not read yet.
    let answered = async {
        while let Some(Ok(message)) = incoming.next().await {
            if matches!(message, Message::Close(_)) {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_WAIT, answered).await;
}

/// Starts the command with pipes for the streams the client attached; the
/// Status to end the session with when it cannot start.
fn spawn(spec: &ProcessSpec, streams: Streams) -> Result<Child, serde_json::Value> {
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    let failed = |error: &dyn std::fmt::Display| {
        channel::failure_status(&format!(
            "failed to exec in container: cannot start {}: {error}",
            spec.program.display()
        ))
    };
    let (mut command, _) = container_command(spec).map_err(|e| failed(&e))?;
    command
        .stdin(piped(streams.stdin))
        .stdout(piped(streams.stdout))
        .stderr(piped(streams.stderr_channel().is_some()))
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed(&error))
}

/// Runs the command, feeding stdin from the client and output to it, and
/// returns the Status that ends the session.
async fn run(
    spec: &ProcessSpec,
    command: &[String],
    streams: Streams,
    v5: bool,
    incoming: &mut futures::stream::SplitStream<WebSocket>,
    out: &mpsc::Sender<Vec<u8>>,
) -> serde_json::Value {
    let mut child = match spawn(spec, streams) {
        Ok(child) => child,
        Err(status) => return status,
    };
    let pid = child.id().and_then(|id| i32::try_from(id).ok());
    let mut outputs = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        outputs.push(tokio::spawn(forward(stdout, channel::STDOUT, out.clone())));
    }
    if let (Some(stderr), Some(to)) = (child.stderr.take(), streams.stderr_channel()) {
        outputs.push(tokio::spawn(forward(stderr, to, out.clone())));
    }
    let mut stdin = child.stdin.take();
    let exit = loop {
        tokio::select! {
            exit = child.wait() => break exit,
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(data))) => match channel::parse(&data, v5) {
                    Incoming::Stdin(bytes) => {
                        if let Some(pipe) = &mut stdin
                            && pipe.write_all(bytes).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    Incoming::CloseStdin => stdin = None,
                    Incoming::Resize | Incoming::Ignored => {}
                },
                Some(Ok(_)) => {}
                // The client went away: so does the command.
                Some(Err(_)) | None => {
                    if let Some(pid) = pid {
                        signal_group(pid, Signal::SIGKILL);
                    }
                    break child.wait().await;
                }
            },
        }
    };
    drop(stdin);
    // Programs the command left in the background would hold its output
    // open; the session ends with the command, as a container's run does.
    if let Some(pid) = pid {
        signal_group(pid, Signal::SIGKILL);
    }
    for task in outputs {
        let _ = task.await;
    }
    match exit {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            channel::exit_status(code, command)
        }
        Err(error) => channel::failure_status(&format!("cannot wait for the command: {error}")),
    }
}
