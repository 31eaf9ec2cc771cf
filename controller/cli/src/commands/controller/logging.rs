//! JSON logs with upstream's field names: one object per line on stdout with `level`, `time`
//! (RFC 3339, milliseconds), `logger` (the emitting module), `message`, and the event's own
//! fields (`controller`, `NodeClaim`, `error`, ...) flattened beside them, as upstream's zap
//! output has them.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::settings::LogLevel;

/// Installs the JSON logger at `level` for the whole process.
pub fn init(level: LogLevel) {
    let _ = tracing_subscriber::fmt()
        .with_max_level(level.filter())
        .event_format(UpstreamJson)
        .with_writer(std::io::stdout)
        .try_init();
}

/// One event as upstream's JSON line.
struct UpstreamJson;

/// An event's fields as JSON values.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), Value::from(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_string(), Value::from(value.to_string()));
    }
}

/// Log lines carry wall-clock time: the one place outside the `Clock` seam that reads it.
#[allow(clippy::disallowed_methods)]
fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

impl<S, N> FormatEvent<S, N> for UpstreamJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = Map::new();
        line.insert(
            "level".into(),
            Value::from(meta.level().as_str().to_lowercase()),
        );
        line.insert("time".into(), Value::from(now()));
        line.insert("logger".into(), Value::from(meta.target()));
        let message = fields.0.remove("message").unwrap_or(Value::from(""));
        line.insert("message".into(), message);
        for (key, value) in fields.0 {
            line.entry(key).or_insert(value);
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}
