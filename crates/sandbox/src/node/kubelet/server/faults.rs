//! `POST /faults/{fault}`: the node's faults, as the API server relays
//! them from `/sandbox/faults/{fault}` (see the API server's
//! `fault_control`): Service and peer cuts, freezing, thawing and killing a
//! container, losing and restoring the node.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::authorize::Action;
use super::{ServerState, admit, bad_request, status};
use crate::https::PeerIdentity;
use crate::node::kubelet::Processes;
use crate::node::proxy::cuts::Direction;

/// Why a fault was not injected: 400 for a bad request, 409 for a
/// container that is not running.
struct Refusal {
    conflict: bool,
    message: String,
}

fn bad(message: impl Into<String>) -> Refusal {
    Refusal {
        conflict: false,
        message: message.into(),
    }
}

fn param<'a>(query: &'a HashMap<String, String>, name: &str) -> Result<&'a str, Refusal> {
    query
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad(format!("the fault needs the parameter {name:?}")))
}

fn done(message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                      "status": "Success", "message": message});
    let content_type = [(axum::http::header::CONTENT_TYPE, "application/json")];
    (StatusCode::OK, content_type, body.to_string()).into_response()
}

pub async fn inject(
    State(state): State<Arc<ServerState>>,
    Path(fault): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    peer: Option<Extension<PeerIdentity>>,
) -> Response {
    let peer = peer.map(|Extension(peer)| peer);
    if let Err(refused) = admit(&state, &headers, peer.as_ref(), Action::Run).await {
        return refused;
    }
    match apply(&state, &fault, &query) {
        Ok(message) => done(message),
        Err(Refusal {
            conflict: true,
            message,
        }) => status(StatusCode::CONFLICT, "Conflict", message),
        Err(Refusal { message, .. }) => bad_request(message),
    }
}

fn apply(
    state: &ServerState,
    fault: &str,
    query: &HashMap<String, String>,
) -> Result<String, Refusal> {
    let faults = &state.faults;
    match fault {
        "lose-node" => {
            let processes: Processes = param(query, "processes")?.parse().map_err(bad)?;
            faults.lose_node(processes);
            Ok(format!("the node is lost ({processes:?} processes)"))
        }
        "restore-node" => {
            faults.restore_node();
            Ok("the node is back".into())
        }
        _ => pod_fault(state, fault, query),
    }
}

fn pod_fault(
    state: &ServerState,
    fault: &str,
    query: &HashMap<String, String>,
) -> Result<String, Refusal> {
    let (faults, cuts) = (&state.faults, state.faults.service_cuts());
    let (namespace, pod) = (param(query, "namespace")?, param(query, "pod")?);
    let container = || param(query, "container");
    let refused = |e: super::super::FaultError| Refusal {
        // A runtime that cannot cut peers is a bad request; the rest are
        // about the pod's state.
        conflict: !matches!(
            e,
            super::super::FaultError::Peers(super::super::PeerCutError::Unsupported)
        ),
        message: e.to_string(),
    };
    let direction = || -> Result<Direction, Refusal> {
        let direction = query.get("direction").map_or("both", String::as_str);
        direction.parse().map_err(bad)
    };
    match fault {
        "cut-service" => cuts.cut(namespace, pod, direction()?),
        "heal-service" => cuts.heal(namespace, pod),
        "cut-peers" => faults
            .cut_peers(namespace, pod, direction()?)
            .map_err(refused)?,
        "heal-peers" => faults.heal_peers(namespace, pod).map_err(refused)?,
        "freeze" => faults
            .freeze(namespace, pod, container()?)
            .map_err(refused)?,
        "thaw" => faults.thaw(namespace, pod, container()?).map_err(refused)?,
        "kill" => faults.kill(namespace, pod, container()?).map_err(refused)?,
        other => return Err(bad(format!("unknown fault {other:?}"))),
    }
    Ok(format!("{fault}: pod {namespace}/{pod}"))
}
