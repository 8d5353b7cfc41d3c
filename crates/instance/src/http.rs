//! The instance manager's HTTP API on the pod IP: `/healthz`, `/readyz`,
//! `/status` and `/metrics` (types in `tusk_api::instance`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use tusk_api::instance::{
    HEALTHZ_PATH, InstancePhase, InstanceReport, METRICS_PATH, READYZ_PATH, STATUS_PATH,
    TOKEN_HEADER,
};

use crate::api_tls::ApiTls;

use crate::context::InstanceContext;
use crate::observe::{DatabaseFigures, Observation};
use crate::recent::Recent;
use crate::state::SharedState;
use crate::supervisor::process_alive;
use crate::{metrics, observe, report, sql};

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("cannot serve the HTTP API over HTTPS: {0}")]
    Tls(#[from] crate::api_tls::ApiTlsError),
}

/// How long one observation of PostgreSQL answers every request: requests
/// arriving together share it (see [`crate::recent`]).
const OBSERVATION_MAX_AGE: Duration = Duration::from_millis(100);
/// How long the database sizes `/metrics` reports are kept: summing them
/// reads every file's size, and they change slowly.
const FIGURES_MAX_AGE: Duration = Duration::from_secs(10);

#[derive(Clone)]
struct AppState {
    ctx: Arc<InstanceContext>,
    state: SharedState,
    observations: Arc<Recent<Option<Observation>>>,
    figures: Arc<Recent<Option<DatabaseFigures>>>,
    /// Served over HTTPS: `/status` requires a token.
    tls: Option<Arc<ApiTls>>,
}

/// The routes, for serving or testing; with `tls`, `/status` requires a
/// token ([`tusk_api::instance::TOKEN_HEADER`]).
pub fn router(ctx: Arc<InstanceContext>, state: SharedState, tls: Option<Arc<ApiTls>>) -> Router {
    Router::new()
        .route(HEALTHZ_PATH, get(healthz))
        .route(READYZ_PATH, get(readyz))
        .route(STATUS_PATH, get(status))
        .route(METRICS_PATH, get(metrics_text))
        .with_state(AppState {
            ctx,
            state,
            observations: Arc::new(Recent::new(OBSERVATION_MAX_AGE)),
            figures: Arc::new(Recent::new(FIGURES_MAX_AGE)),
            tls,
        })
}

/// Binds the API's address (separately from serving, so that a port in
/// use is reported before anything else starts).
pub async fn bind(address: SocketAddr) -> Result<tokio::net::TcpListener, HttpError> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| HttpError::Bind { address, source })
}

/// Serves on `listener` until `shutdown` resolves: over HTTPS when the
/// pod says so (`TUSK_API_TLS`, see [`crate::api_tls`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    ctx: Arc<InstanceContext>,
    state: SharedState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    let tls = if ctx.settings.api_tls {
        let settings = &ctx.settings;
        Some(Arc::new(ApiTls::new(
            settings.secrets_dir.clone(),
            &settings.namespace,
            &settings.cluster_name,
        )?))
    } else {
        None
    };
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, https = tls.is_some(), "HTTP API listening");
    }
    if let Some(tls) = tls {
        let app = router(ctx, state, Some(tls.clone()));
        crate::api_tls::serve(listener, app, tls, shutdown).await;
        return Ok(());
    }
    axum::serve(listener, router(ctx, state, None))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(HttpError::Serve)
}

async fn current_report(app: &AppState) -> InstanceReport {
    let observation = app
        .observations
        .get(|| report::observe_local(&app.ctx))
        .await;
    let state = app.state.snapshot();
    let mut report = report::build(&app.ctx.settings.pod_name, &state, observation.as_ref());
    if report.role == tusk_api::instance::InstanceRole::Replica {
        report.held_minimums = app.ctx.held_minimums();
    }
    let kept = crate::datadir::kept_copy(&app.ctx.settings.pgdata);
    report.kept_copy = kept.exists().then(|| kept.display().to_string());
    report.kept_wal =
        crate::diverged::kept(&app.ctx.settings.pgdata).map(|kept| kept.display().to_string());
    if let Some(archiving) = report
        .archiving
        .as_mut()
        .filter(|a| a.failing && a.stanza_created)
    {
        archiving.message = crate::archiving::push_error(&app.ctx)
            .or_else(|| state.archive_push_error.clone())
            .or(archiving.message.take());
    }
    report
}

/// Liveness: the manager answers, PostgreSQL either runs or is stopped
/// on purpose (fenced, bootstrapping, restarting after a crash, ...), and
/// no process of PostgreSQL outlives a lapsed lease.
async fn healthz(State(app): State<AppState>) -> Response {
    let state = app.state.snapshot();
    let pgdata = &app.ctx.settings.pgdata;
    let lingering = || crate::fence::instance_running(pgdata, state.postmaster_pid);
    match liveness(&state, lingering) {
        Liveness::Alive => (StatusCode::OK, "ok\n").into_response(),
        Liveness::PostgresDown => {
            (StatusCode::SERVICE_UNAVAILABLE, "postgres is not running\n").into_response()
        }
        Liveness::FenceUnfinished => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the primary lease lapsed and PostgreSQL processes are still alive\n",
        )
            .into_response(),
    }
}

/// What `/healthz` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Liveness {
    Alive,
    PostgresDown,
    FenceUnfinished,
}

/// `/healthz`'s decision; `lingering` says whether any process of the
/// instance is alive (asked only once the lease's deadline has passed or
/// while a fence is unfinished).
fn liveness(state: &crate::state::ManagerState, lingering: impl FnOnce() -> bool) -> Liveness {
    let lapsed = state
        .lease_deadline
        .is_some_and(|deadline| std::time::Instant::now() >= deadline);
    if (state.fence_pending || lapsed) && lingering() {
        return Liveness::FenceUnfinished;
    }
    match (state.phase, state.postmaster_pid) {
        (InstancePhase::Running, Some(pid)) if !process_alive(pid) => Liveness::PostgresDown,
        (InstancePhase::Running, None) => Liveness::PostgresDown,
        _ => Liveness::Alive,
    }
}

/// Readiness: accepting connections, and a standby must be streaming.
async fn readyz(State(app): State<AppState>) -> Response {
    let report = current_report(&app).await;
    if report.ready {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn status(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(tls) = &app.tls {
        let token = headers
            .get(TOKEN_HEADER)
            .and_then(|value| value.to_str().ok());
        if let Err(refusal) = tls.check(token) {
            tracing::debug!(%refusal, "a /status request was refused");
            return (StatusCode::UNAUTHORIZED, format!("{refusal}\n")).into_response();
        }
    }
    Json(current_report(&app).await).into_response()
}

async fn metrics_text(State(app): State<AppState>) -> Response {
    let report = current_report(&app).await;
    let figures = if report.role == tusk_api::instance::InstanceRole::Stopped {
        None
    } else {
        let work = async {
            let client = sql::connect(&app.ctx.local_target(), "postgres")
                .await
                .ok()?;
            observe::database_figures(&client).await.ok()
        };
        let bounded = async {
            tokio::time::timeout(report::QUERY_TIMEOUT, work)
                .await
                .ok()
                .flatten()
        };
        app.figures.get(|| bounded).await
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::render(&report, figures.as_ref()),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ManagerState;

    #[test]
    fn liveness_fails_while_processes_outlive_a_lapsed_lease() {
        let me = i32::try_from(std::process::id()).expect("pid");
        let running = ManagerState {
            phase: InstancePhase::Running,
            postmaster_pid: Some(me),
            ..ManagerState::default()
        };
        let fencing = ManagerState {
            fence_pending: true,
            ..running.clone()
        };
        let waiting = ManagerState {
            phase: InstancePhase::WaitingForLease,
            postmaster_pid: None,
            fence_pending: true,
            ..ManagerState::default()
        };
        let now = std::time::Instant::now();
        let renewed = ManagerState {
            lease_deadline: Some(now + std::time::Duration::from_secs(60)),
            ..running.clone()
        };
        // The lease task hangs: nobody fenced, the deadline passed.
        let unrenewed = ManagerState {
            lease_deadline: now.checked_sub(std::time::Duration::from_millis(1)),
            ..running.clone()
        };
        let cases = [
            (&running, true, Liveness::Alive),
            (&fencing, true, Liveness::FenceUnfinished),
            (&fencing, false, Liveness::Alive),
            (&waiting, true, Liveness::FenceUnfinished),
            (&waiting, false, Liveness::Alive),
            (&renewed, true, Liveness::Alive),
            (&unrenewed, true, Liveness::FenceUnfinished),
            (&unrenewed, false, Liveness::Alive),
        ];
        for (state, lingering, expected) in cases {
            assert_eq!(
                liveness(state, || lingering),
                expected,
                "{state:?}, {lingering}"
            );
        }
        let lost = ManagerState {
            postmaster_pid: None,
            ..running
        };
        assert_eq!(liveness(&lost, || false), Liveness::PostgresDown);
    }
}
