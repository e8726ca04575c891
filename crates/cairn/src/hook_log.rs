//! A hook's log: one line on stderr per event at or above a level.
//!
//! `tracing_subscriber`'s formatter sets up a span registry (sharded slabs of per-thread
//! arrays) and compiles the filter's directives at every process start. A hook starts once per
//! agent event, logs nothing on a good run, and never opens a span worth recording, so this
//! plain subscriber does the same job for a fraction of its start-up cost (page faults and CPU;
//! docs/BENCHMARKS.md). A filter with per-target directives (`cairn_client=debug`) still gets
//! the full formatter.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Start the hook's logging with the `log` setting.
pub fn init(log: &str) {
    let filter = cairn_core::settings::log_filter(log);
    match filter.trim().parse::<LevelFilter>() {
        Ok(max) => {
            let _ = tracing::subscriber::set_global_default(LineLogger { max });
        }
        Err(_) => crate::init_logging(log),
    }
}

/// Prints each enabled event as `LEVEL target: message key=value…`.
struct LineLogger {
    max: LevelFilter,
}

impl Subscriber for LineLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= &self.max
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max)
    }

    // Spans carry nothing a hook's one line needs: every span is the same inert one.
    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let _ = writeln!(std::io::stderr().lock(), "{}", line(event));
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// The event as one line.
fn line(event: &Event<'_>) -> String {
    let metadata = event.metadata();
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut line = format!("{:>5} {}: {}", metadata.level(), metadata.target(), fields.message);
    line.push_str(&fields.rest);
    line
}

/// An event's message and its other fields as ` key=value`.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.rest, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.rest, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Collects the lines of events the logger lets through.
    struct Collect {
        logger: LineLogger,
        lines: Arc<Mutex<Vec<String>>>,
    }

    impl Subscriber for Collect {
        fn enabled(&self, metadata: &Metadata<'_>) -> bool {
            self.logger.enabled(metadata)
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            self.logger.new_span(span)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            self.lines.lock().unwrap().push(line(event));
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn events_at_or_above_the_level_print_as_one_line_with_their_fields() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collect = Collect { logger: LineLogger { max: LevelFilter::WARN }, lines: Arc::clone(&lines) };
        tracing::subscriber::with_default(collect, || {
            let _span = tracing::info_span!("ignored", n = 1).entered();
            tracing::warn!(error = %"connection refused", attempt = 2, "could not start the cairn daemon");
            tracing::info!("below the level");
            tracing::error!("the store is gone");
        });
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with(" WARN "), "{}", lines[0]);
        assert!(
            lines[0].ends_with(": could not start the cairn daemon error=connection refused attempt=2"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("ERROR ") && lines[1].ends_with(": the store is gone"), "{}", lines[1]);
    }
}
