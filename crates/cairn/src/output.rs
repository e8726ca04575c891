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

/// An install's progress on stderr: a bar on a terminal, else a line per file at every tenth
/// of its size (a log stays readable).
pub(crate) enum Progress {
    Bar { bar: indicatif::ProgressBar, file: String },
    Lines { file: String, shown: u64 },
}

impl Progress {
    pub(crate) fn on_stderr() -> Progress {
        use std::io::IsTerminal as _;
        if !std::io::stderr().is_terminal() {
            return Progress::Lines { file: String::new(), shown: 0 };
        }
        let bar = indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("  {msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}")
        {
            bar.set_style(style);
        }
        Progress::Bar { bar, file: String::new() }
    }

    pub(crate) fn show(&mut self, name: &str, done: u64, total: u64) {
        match self {
            Progress::Bar { bar, file } => {
                if name != file {
                    name.clone_into(file);
                    bar.set_message(name.to_owned());
                    bar.set_length(total.max(1));
                }
                bar.set_position(done);
            }
            Progress::Lines { file, shown } => {
                if name != file {
                    name.clone_into(file);
                    *shown = 0;
                }
                let tenth = (done * 10).checked_div(total).map_or(10, |t| t.min(10));
                if tenth > *shown || (done >= total && *shown < 10) {
                    *shown = tenth.max(1);
                    note(&format!("  {name}: {:>3}% of {}", tenth * 10, human_bytes(total)));
                }
            }
        }
    }

    pub(crate) fn finish(&self) {
        if let Progress::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

/// A size for people: kB below a megabyte, else MB.
pub(crate) fn human_bytes(n: u64) -> String {
    match n {
        0..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        _ => format!("{:.1} MB", n as f64 / 1e6),
    }
}
