//! `s` in the conflicts view: a semantic scan of the project, the web page's (at most
//! [`SCAN_PAIRS`] pairs judged by the configured model, verdicts recorded). It is sent in
//! batches, as `cairn conflicts scan --semantic` does, so the status line shows progress and
//! no call comes near the client's time limit; each batch runs on the long lane, so browsing
//! never waits behind the model. When the scan ends the list reloads and the project's
//! pending count is asked for: a pair the model was unsure of stays pending only when it is a
//! strong one, so the scan's own counts cannot say what waits for a person.

use super::{App, Lane, View, error_line};
use cairn_core::ops::{Op, OpOutput, RelationStatsRequest};
use cairn_core::relations::{ScanRequest, ScanResult};

/// Pairs one scan judges at most: the web page's cap (the model takes seconds per pair).
pub const SCAN_PAIRS: usize = 20;
/// Pairs judged per call: a few model calls, so progress shows between them.
const SCAN_BATCH: usize = 4;

/// A scan under way: the request waiting for its answer and the counts so far.
#[derive(Debug)]
pub struct ScanProgress {
    pub project: String,
    /// The batch sent, or once the batches are done, the project's relation counts.
    request: u64,
    /// Where the next batch starts in the scan's list of pairs.
    offset: usize,
    /// Pairs judged, left unsure or failed so far.
    done: usize,
    judged: usize,
    failed: usize,
    /// Set once the last batch answered: what the status line adds after the counts.
    ended: Option<String>,
}

impl App {
    /// `s`: start a scan of this directory's project, unless one runs.
    pub(super) fn start_scan(&mut self) {
        if self.refuse_read_only() {
            return;
        }
        if let Some(scan) = &self.scan {
            self.status = format!("a scan of {} is under way", scan.project);
            return;
        }
        let Some(project) = self.options.project.clone() else {
            self.status = "no project here: start cairn tui in a project's directory to scan it".into();
            return;
        };
        let request = self.send_scan_batch(&project, 0);
        self.status = format!("scanning {project} for conflicting memories…");
        self.scan = Some(ScanProgress { project, request, offset: 0, done: 0, judged: 0, failed: 0, ended: None });
    }

    fn send_scan_batch(&mut self, project: &str, offset: usize) -> u64 {
        let request = ScanRequest {
            project: project.to_owned(),
            apply: true,
            semantic: true,
            max_semantic: Some(SCAN_BATCH),
            offset: Some(offset),
            ..ScanRequest::default()
        };
        self.send_as(Op::ScanRelations(request), Lane::Long)
    }

    /// Whether `id` is the scan's request; then its answer is taken.
    pub(super) fn scan_answered(&mut self, id: u64, result: &cairn_core::Result<OpOutput>) -> bool {
        let Some(scan) = self.scan.take_if(|s| s.request == id) else { return false };
        if scan.ended.is_some() {
            let pending = match result {
                Ok(OpOutput::RelationStats(stats)) => {
                    Some(stats.by_judgment_status.get("pending").copied().unwrap_or(0))
                }
                // The scan is done; only its pending count could not be read.
                _ => None,
            };
            self.status = scan.summary(pending);
            return true;
        }
        match result {
            Ok(OpOutput::ScanRelations(batch)) => self.scan_batch_done(scan, batch),
            Ok(_) => self.status = "scan: the store answered something else".into(),
            Err(e) => {
                self.status = error_line(e);
                if scan.done > 0 {
                    self.reload_conflicts();
                }
            }
        }
        true
    }

    /// Count a batch; send the next one, or end the scan: show what it recorded and ask how
    /// many pairs of the project now wait for a person.
    fn scan_batch_done(&mut self, mut scan: ScanProgress, batch: &ScanResult) {
        let judged_now = batch.semantic_judged + batch.semantic_skipped + batch.semantic_errors;
        scan.done += judged_now;
        scan.judged += batch.semantic_judged;
        scan.failed += batch.semantic_errors;
        scan.offset = batch.next_offset;
        let finished =
            batch.warning.is_some() || batch.semantic_remaining == 0 || judged_now == 0 || scan.done >= SCAN_PAIRS;
        if finished {
            scan.ended = Some(match &batch.warning {
                Some(warning) => format!(" ({})", crate::text::one_line(warning, 200)),
                None if batch.semantic_remaining > 0 => {
                    format!("; {} more to judge: s scans on", batch.semantic_remaining)
                }
                None => String::new(),
            });
            self.status = scan.summary(None);
            scan.request = self.send(Op::RelationStats(RelationStatsRequest { project: Some(scan.project.clone()) }));
            self.reload_conflicts();
        } else {
            let of = (scan.done + batch.semantic_remaining).min(SCAN_PAIRS);
            self.status = format!("scanning {}… {} of {of} pairs", scan.project, scan.done);
            scan.request = self.send_scan_batch(&scan.project, scan.offset);
        }
        self.scan = Some(scan);
    }

    /// Show what the scan recorded, when the conflicts are on screen.
    fn reload_conflicts(&mut self) {
        if matches!(self.view(), View::Conflicts(_)) {
            self.back();
            self.open_conflicts();
        }
    }
}

impl ScanProgress {
    /// The status line of an ended scan: "shop: 6 pairs judged, 2 pending", with what failed,
    /// what is left and why it stopped.
    fn summary(&self, pending: Option<i64>) -> String {
        let mut line = format!("{}: {} pairs judged", self.project, self.judged);
        if self.failed > 0 {
            line.push_str(&format!(", {} failed", self.failed));
        }
        if let Some(pending) = pending {
            line.push_str(&format!(", {pending} pending"));
        }
        line.push_str(self.ended.as_deref().unwrap_or_default());
        line
    }
}
