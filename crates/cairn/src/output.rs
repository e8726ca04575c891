//! Writing to stdout (data) and stderr (people). A closed pipe (`cairn search x | head -1`) is
//! not an error: the command stops and exits 0.

use std::io::{self, Write};

/// Raised when stdout's reader went away.
#[derive(Debug)]
pub struct BrokenPipe;

impl std::fmt::Display for BrokenPipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("broken pipe")
    }
}

impl std::error::Error for BrokenPipe {}

/// Write text to stdout.
pub fn out(text: &str) -> anyhow::Result<()> {
    let mut stdout = io::stdout().lock();
    let result = stdout.write_all(text.as_bytes()).and_then(|()| {
        if !text.ends_with('\n') && !text.is_empty() {
            stdout.write_all(b"\n")?;
        }
        stdout.flush()
    });
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(BrokenPipe.into()),
        other => Ok(other?),
    }
}

/// Write a value as pretty JSON to stdout.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    out(&serde_json::to_string_pretty(value)?)
}

/// A line for people on stderr (warnings, hints).
pub fn note(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}
