//! Structured JSON logs for long-running roles, and waiting for the signals
//! that end them.

/// JSON log lines on stderr, one object per event with its fields at the
/// top level (the instance manager's `pg_*` fields, for instance);
/// `RUST_LOG` filters (default `info`). Every long-running role logs
/// through this one setup.
pub fn init_json() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second initialisation (tests running several roles) is harmless.
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Completes on SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
pub async fn wait_for_termination() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
