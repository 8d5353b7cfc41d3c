//! Logging of the long-running roles (operator, instance manager), and
//! waiting for the signals that end them.
//!
//! Two formats, chosen by `--log-format` or `TUSK_LOG_FORMAT`: `json` (one
//! object per line, the default) or `text` (human-readable lines). A JSON line
//! carries, at the top level, `timestamp`, `level`, `target`, `message`,
//! the event's own fields (the instance manager's `pg_*` fields, for
//! instance), the fields of every span it happens in (the operator's
//! `reconcile` span gives `cluster` and `namespace`) and the fields fixed
//! for the whole process (the instance manager's `cluster`, `namespace`
//! and `instance`). `RUST_LOG` filters (default `info`). Lines go to
//! standard error.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written. JSON is the default: both roles run in pods
/// whose logs are collected, and an instance pod's environment is the
/// operator's to set, so its manager has to log structured lines unasked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (for a terminal).
    Text,
    /// One JSON object per line.
    #[default]
    Json,
}

/// The `--log-format` flag, shared by the long-running roles.
#[derive(clap::Args, Clone, Debug)]
pub struct LogArgs {
    /// Log line format: `json` (one object per line, with cluster,
    /// namespace and instance fields where known) or `text`.
    #[arg(long, env = "TUSK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

/// Installs the process's logger. `fixed` fields go on every JSON line;
/// in text they are logged once by the caller instead.
pub fn init(format: LogFormat, fixed: &[(&str, &str)]) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialisation (tests running several roles) is harmless.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines::new(fixed))
            .try_init(),
    };
}

/// Formats one event as one flat JSON object.
pub struct JsonLines {
    fixed: Map<String, Value>,
}

impl JsonLines {
    pub fn new(fixed: &[(&str, &str)]) -> Self {
        let fixed = fixed
            .iter()
            .map(|(key, value)| ((*key).to_owned(), Value::from(*value)))
            .collect();
        Self { fixed }
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), Value::from(timestamp));
        let metadata = event.metadata();
        line.insert("level".into(), Value::from(metadata.level().as_str()));
        line.insert("target".into(), Value::from(metadata.target()));
        line.extend(self.fixed.clone());
        // Outermost span first, so inner spans' fields win.
        for span in ctx.event_scope().into_iter().flat_map(|s| s.from_root()) {
            let extensions = span.extensions();
            let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                continue;
            };
            if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(fields.as_str()) {
                line.extend(fields);
            }
        }
        event.record(&mut FieldsInto(&mut line));
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// Records an event's fields as JSON values.
struct FieldsInto<'a>(&'a mut Map<String, Value>);

impl Visit for FieldsInto<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn span_and_fixed_fields_reach_the_top_level_of_each_line() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines::new(&[("instance", "db-1")]))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", cluster = "db", namespace = "prod");
            let _entered = span.enter();
            tracing::warn!(attempt = 3, "could not reach {}", "db-2");
        });
        let bytes = buffer.0.lock().expect("buffer").clone();
        let text = String::from_utf8(bytes).expect("utf-8");
        let line: Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["cluster"], "db", "{text}");
        assert_eq!(line["namespace"], "prod", "{text}");
        assert_eq!(line["instance"], "db-1", "{text}");
        assert_eq!(line["attempt"], 3, "{text}");
        assert_eq!(line["level"], "WARN", "{text}");
        assert_eq!(line["message"], "could not reach db-2", "{text}");
        assert!(line["timestamp"].is_string(), "{text}");
    }
}
