//! `cairn export --obsidian DIR [--watch]`: read the store through the one `Export` op (the
//! daemon when one runs, else the file), hand it to cairn-core's vault writer, print what it did.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use cairn_core::obsidian::{KeptNote, KeptReason, VaultReport, export_vault};
use cairn_core::ops::ExportMemoriesRequest;
use cairn_core::transfer::ExportData;
use cairn_core::{CairnError, ErrorCode};

use crate::env::Env;
use crate::output::{note, out};

pub fn export(env: &Env, dir: &Path, watch: Option<Duration>) -> Result<()> {
    let report = export_once(env, dir)?;
    let Some(interval) = watch else { return env.emit(&report, summary) };
    print_pass(env, &report)?;
    watch_store(env, dir, interval, report)
}

/// A watch prints a stream: with `--json`, one JSON object per line.
fn print_pass(env: &Env, report: &VaultReport) -> Result<()> {
    if env.json { out(&serde_json::to_string(report)?) } else { out(&summary(report)) }
}

fn export_once(env: &Env, dir: &Path) -> Result<VaultReport> {
    let project = env.settings.project.value.clone();
    let data: ExportData = env.call(ExportMemoriesRequest { project: project.clone() })?;
    Ok(export_vault(&data, dir, project.as_deref())?)
}

/// Export again every `interval` until Ctrl-C; a pass that changed something is printed (one
/// JSON line each with `--json`). A pass that fails for a passing reason (daemon restarting,
/// store busy) is reported on stderr and retried at the next tick: watching outlives a hiccup.
fn watch_store(env: &Env, dir: &Path, interval: Duration, mut last: VaultReport) -> Result<()> {
    let stop = stop_on_ctrl_c();
    note(&format!("watching the store; the vault follows every {}s (Ctrl-C stops)", interval.as_secs()));
    while sleep_unless_stopped(&stop, interval) {
        match export_once(env, dir) {
            Ok(report) => {
                if worth_printing(&report, &last) {
                    print_pass(env, &report)?;
                }
                last = report;
            }
            Err(err) if passing(&err) => note(&format!("export failed, retrying: {err:#}")),
            Err(err) => return Err(err),
        }
    }
    note("stopped watching");
    Ok(())
}

/// A failure the next tick may not meet (the daemon restarting, the store busy); anything
/// about the folder itself ends the watch.
fn passing(err: &anyhow::Error) -> bool {
    err.downcast_ref::<CairnError>().is_some_and(|e| {
        matches!(e.code, ErrorCode::DaemonUnavailable | ErrorCode::DatabaseBusy | ErrorCode::OperationInterrupted)
    })
}

/// Something was written or removed, or the set of kept notes changed (not the same notes
/// reported again every tick).
fn worth_printing(report: &VaultReport, last: &VaultReport) -> bool {
    !report.written.is_empty() || !report.removed.is_empty() || report.kept_edited != last.kept_edited
}

fn sleep_unless_stopped(stop: &AtomicBool, interval: Duration) -> bool {
    let until = Instant::now() + interval;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    !stop.load(Ordering::Relaxed)
}

/// Ctrl-C (and SIGTERM) end the watch after the pass under way: a note is never cut half way.
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async {
            #[cfg(unix)]
            {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                let terminated = async {
                    match term.as_mut() {
                        Some(term) => {
                            term.recv().await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {},
                    () = terminated => {},
                }
            }
            #[cfg(not(unix))]
            let _ = tokio::signal::ctrl_c().await;
        });
        flag.store(true, Ordering::Relaxed);
    });
    stop
}

fn summary(report: &VaultReport) -> String {
    let mut text = format!(
        "Exported {} and {} to {}: {} written, {} unchanged, {} removed",
        count(report.notes, "note"),
        count(report.hubs, "hub"),
        report.dir,
        report.written.len(),
        report.unchanged,
        report.removed.len()
    );
    for kept in &report.kept_edited {
        text.push('\n');
        text.push_str(&kept_line(kept));
    }
    text
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

fn kept_line(kept: &KeptNote) -> String {
    let why = match kept.reason {
        KeptReason::EditedInVault => "edited in the vault, kept",
        KeptReason::EditedNoLongerExported => "edited in the vault, its memory is gone: kept, no longer updated",
        KeptReason::NotAFile => "not a plain file, left alone",
    };
    match &kept.cairn_copy {
        Some(copy) => format!("kept {} ({why}); cairn's version: {copy}", kept.path),
        None => format!("kept {} ({why})", kept.path),
    }
}
