//! `GET /containerLogs/{namespace}/{pod}/{container}`: one container
//! instance's log, selected and rendered by [`LogOptions`], and followed
//! until that instance ends when asked.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::authorize::Action;
use super::{ServerState, admit, bad_request, pod_not_found};
use crate::https::PeerIdentity;
use crate::node::kubelet::logs::read::{LogOptions, Renderer, parse_entries, tail};
use crate::node::kubelet::served::ServedPod;
use crate::node::kubelet::status::{ContainerReport, State as ContainerState};

/// How often a followed log is read again.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The instance to read: the running or last finished one, or with
/// `previous` the one before it; the message of kube's 400 otherwise.
fn instance(
    pod_name: &str,
    pod: &ServedPod,
    report: &ContainerReport,
    previous: bool,
) -> Result<i32, String> {
    let restarts = report.restart_count;
    let current = match &report.state {
        ContainerState::Running { .. } | ContainerState::Terminated(_) => Some(restarts),
        // Between runs (back-off), the last run is the one shown.
        ContainerState::Waiting { .. } if restarts > 0 => Some(restarts - 1),
        ContainerState::Waiting { reason, .. } => {
            if previous {
                None
            } else {
                return Err(format!(
                    "container \"{}\" in pod \"{pod_name}\" is waiting to start: {reason}",
                    report.name
                ));
            }
        }
    };
    let wanted = if previous {
        current.map(|c| c - 1).filter(|p| *p >= 0)
    } else {
        current
    };
    match wanted {
        Some(n) if !previous || pod.log_file(&report.name, n).exists() => Ok(n),
        _ => Err(format!(
            "previous terminated container \"{}\" in pod \"{pod_name}\" not found",
            report.name
        )),
    }
}

pub async fn container_logs(
    State(state): State<Arc<ServerState>>,
    Path((namespace, pod_name, container)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    peer: Option<Extension<PeerIdentity>>,
) -> Response {
    let peer = peer.map(|Extension(peer)| peer);
    if let Err(refused) = admit(&state, &headers, peer.as_ref(), Action::ReadLogs).await {
        return refused;
    }
    let options = match LogOptions::from_query(&query) {
        Ok(options) => options,
        Err(message) => return bad_request(message),
    };
    let Some(pod) = state.pods.get(&namespace, &pod_name) else {
        return pod_not_found(&pod_name);
    };
    let Some(report) = pod.report(&container) else {
        return bad_request(format!(
            "container {container} is not valid for pod {pod_name}"
        ));
    };
    let number = match instance(&pod_name, &pod, &report, options.previous) {
        Ok(number) => number,
        Err(message) => return bad_request(message),
    };
    let file = pod.log_file(&container, number);
    let follow = options.follow && !options.previous;
    let body = Body::from_stream(log_stream(
        file,
        options,
        follow.then_some((pod, container, number)),
    ));
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// Whether the instance numbered `number` of the container still runs.
fn running(pod: &ServedPod, container: &str, number: i32) -> bool {
    pod.report(container).is_some_and(|r| {
        r.restart_count == number && matches!(r.state, ContainerState::Running { .. })
    })
}

/// What is new in `file` from `offset`: its complete lines, and the offset
/// after them.
async fn read_from(file: &std::path::Path, offset: u64) -> (Vec<u8>, u64) {
    let Ok(mut handle) = tokio::fs::File::open(file).await else {
        return (Vec::new(), offset);
    };
    let mut text = Vec::new();
    if handle.seek(std::io::SeekFrom::Start(offset)).await.is_err()
        || handle.read_to_end(&mut text).await.is_err()
    {
        return (Vec::new(), offset);
    }
    (text, offset)
}

type Followed = Option<(ServedPod, String, i32)>;

fn log_stream(
    file: PathBuf,
    options: LogOptions,
    followed: Followed,
) -> impl futures::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    async_stream::stream! {
        let mut renderer = Renderer::new(&options);
        let (text, _) = read_from(&file, 0).await;
        let (entries, used) = parse_entries(&text);
        let mut offset = used as u64;
        let mut out = Vec::new();
        for entry in tail(&entries, options.tail_lines) {
            renderer.render(entry, &mut out);
        }
        if !out.is_empty() {
            yield Ok(out);
        }
        let Some((pod, container, number)) = followed else { return };
        loop {
            if renderer.exhausted() {
                return;
            }
            // Checked before reading: output is complete once the
            // instance is seen to have ended.
            let live = running(&pod, &container, number);
            let (text, start) = read_from(&file, offset).await;
            let (entries, used) = parse_entries(&text);
            offset = start + used as u64;
            let mut out = Vec::new();
            for entry in &entries {
                renderer.render(entry, &mut out);
            }
            if !out.is_empty() {
                yield Ok(out);
            }
            if !live {
                return;
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }
}
