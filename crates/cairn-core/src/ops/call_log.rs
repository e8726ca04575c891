//! The debug log of history op calls: with `[history]
//! debug_log_tool_calls = true`, one JSON line per call — tool, arguments, `estimated_tokens`
//! (bytes of the answer / 4: what the call cost the agent's context), `duration_ms`, and the
//! error code of a failed call — appended to `<data dir>/logs/history-calls.jsonl`. Nothing is
//! written outside the data dir, `<private>` text in the arguments is redacted, and a log
//! that cannot be written never fails the call.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::OpOutput;
use crate::error::Result;

/// The log, relative to the data dir.
pub const CALL_LOG: &str = "logs/history-calls.jsonl";
/// Past this size the log is moved to `history-calls.1.jsonl` (one old file kept).
const ROTATE_BYTES: u64 = 8 * 1024 * 1024;

/// Append one call to the log under `data_dir`.
pub fn append(data_dir: &Path, tool: &str, args: &Value, result: &Result<OpOutput>, elapsed: Duration) {
    let line = entry(tool, args, result, elapsed);
    if let Err(e) = write_line(&data_dir.join(CALL_LOG), &line) {
        tracing::warn!(error = %e, "cannot write the history call log");
    }
}

/// The log line of one call.
fn entry(tool: &str, args: &Value, result: &Result<OpOutput>, elapsed: Duration) -> Value {
    let (estimated_tokens, error) = match result {
        Ok(output) => (serde_json::to_string(output).map_or(0, |s| s.len().div_ceil(4)), None),
        Err(e) => (0, Some(e.code.as_str())),
    };
    let mut line = serde_json::json!({
        "ts": crate::clock::format_ts(time::OffsetDateTime::now_utc()),
        "tool": tool,
        "args": redacted(args),
        "estimated_tokens": estimated_tokens,
        // Hundredths of a millisecond: the reads take well under one.
        "duration_ms": (elapsed.as_secs_f64() * 100_000.0).round() / 100.0,
    });
    if let Some(code) = error {
        line["error"] = Value::from(code);
    }
    line
}

/// `args` with `<private>` text redacted in every string.
fn redacted(args: &Value) -> Value {
    match args {
        Value::String(s) => Value::String(crate::text::redact(s).0),
        Value::Array(items) => Value::Array(items.iter().map(redacted).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), redacted(v))).collect()),
        other => other.clone(),
    }
}

fn write_line(path: &Path, line: &Value) -> std::io::Result<()> {
    let dir = path.parent().expect("CALL_LOG has a directory");
    create_private_dir(dir)?;
    if std::fs::metadata(path).is_ok_and(|m| m.len() > ROTATE_BYTES) {
        std::fs::rename(path, path.with_extension("1.jsonl"))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    // One write per line: concurrent calls never interleave within a line.
    file.write_all(&bytes)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{CairnError, ErrorCode};

    #[test]
    fn a_call_is_one_line_with_cost_time_and_redacted_args() {
        let dir = tempfile::tempdir().unwrap();
        let args = serde_json::json!({"query": "deploy <private>token=abc</private> steps", "limit": 3});
        let ok: Result<OpOutput> = Ok(OpOutput::HistoryChart(crate::history::query::Chart {
            session_id: "s1".into(),
            chart: "x".repeat(400),
        }));
        append(dir.path(), "history_search", &args, &ok, Duration::from_micros(1234));
        let failed: Result<OpOutput> = Err(CairnError::new(ErrorCode::HistorySessionNotFound, "no such session"));
        append(dir.path(), "history_browse_turns", &serde_json::json!({}), &failed, Duration::from_millis(2));
        let text = std::fs::read_to_string(dir.path().join(CALL_LOG)).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["tool"], "history_search");
        assert_eq!(lines[0]["args"]["query"], "deploy [REDACTED] steps");
        assert_eq!(lines[0]["args"]["limit"], 3);
        assert!(lines[0]["estimated_tokens"].as_u64().unwrap() >= 100, "{}", lines[0]);
        assert_eq!(lines[0]["duration_ms"], 1.23);
        assert!(lines[0].get("error").is_none());
        assert_eq!(lines[1]["error"], "history_session_not_found");
        assert_eq!(lines[1]["estimated_tokens"], 0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(CALL_LOG)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_big_log_is_rotated_and_an_unwritable_one_is_only_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(CALL_LOG);
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        std::fs::write(&log, vec![b'x'; usize::try_from(ROTATE_BYTES).unwrap() + 1]).unwrap();
        let ok: Result<OpOutput> = Ok(OpOutput::HistoryStats(crate::history::query::HistoryStats::default()));
        append(dir.path(), "history_stats", &Value::Null, &ok, Duration::ZERO);
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
        assert!(log.with_extension("1.jsonl").is_file());
        // A file where the logs directory should be: the call still returns normally.
        let blocked = tempfile::tempdir().unwrap();
        std::fs::write(blocked.path().join("logs"), "not a dir").unwrap();
        append(blocked.path(), "history_stats", &Value::Null, &ok, Duration::ZERO);
    }
}
