//! `cairn history …`: the conversation-history archive. Each command is one op; `--json`
//! prints its answer as the other doors send it, text is a short rendering for people.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use cairn_core::history::context_usage::{ContextUsageReport, ContextUsageRequest};
use cairn_core::history::ingest::{PokeRequest, Progress, ScanReport, poke, process_env, scan};
use cairn_core::history::model::HistoryHost;
use cairn_core::history::plans::{Plans, PlansRequest};
use cairn_core::history::query::{
    ArchiveDisk, Chart, Compactions, CompactionsRequest, Forgotten, HistoryStats, MessageRequest, MessagesPage,
    MessagesRequest, PartRequest, PulledMessage, PulledPart, SearchRequest, SearchResults, Section, SessionListing,
    SessionsRequest, ToolSummary, TurnsPage, TurnsRequest,
};
use cairn_core::history::store::{HISTORY_DB_FILE, HistoryDb};
use cairn_core::ops::{HistoryChartRequest, HistoryChildrenRequest, HistoryForgetRequest, HistoryStatsRequest};
use cairn_core::settings::ensure_data_dir;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::HistoryAction;
use crate::env::Env;
use crate::output::{human_bytes, note};

pub fn history(env: &Env, action: HistoryAction) -> Result<()> {
    match action {
        HistoryAction::Sessions { project, query, host, limit, include_children } => {
            let req = SessionsRequest { project, query, host, limit, include_children };
            let sessions: Vec<SessionListing> = env.call(req)?;
            env.emit(&sessions, |s| sessions_text(s))
        }
        HistoryAction::Turns { session, turn, before, after, own } => {
            let caller_session_id = own.then(|| session.clone());
            let req = TurnsRequest {
                session_id: session,
                turn_number: turn,
                num_before: before,
                num_after: after,
                caller_session_id,
            };
            let page: TurnsPage = env.call(req)?;
            env.emit(&page, turns_text)
        }
        HistoryAction::Messages { session, message, before, after, own } => {
            let caller_session_id = own.then(|| session.clone());
            let req = MessagesRequest {
                session_id: session,
                message_id: message,
                num_before: before,
                num_after: after,
                caller_session_id,
            };
            let page: MessagesPage = env.call(req)?;
            env.emit(&page, messages_text)
        }
        HistoryAction::Message { session, message } => {
            let req = MessageRequest { session_id: session, message_id: message, caller_session_id: None };
            let pulled: PulledMessage = env.call(req)?;
            env.emit(&pulled, message_text)
        }
        HistoryAction::Part { session, message, part, offset, max_chars } => {
            let req = PartRequest {
                session_id: session,
                message_id: message,
                part_id: part,
                offset,
                max_chars,
                caller_session_id: None,
            };
            let page: PulledPart = env.call(req)?;
            if page.injected && !env.json {
                note("this part was injected by cairn (not typed by the user)");
            }
            if let (Some(next), false) = (page.next_offset, env.json) {
                note(&format!("{} of {} chars; more with --offset {next}", next - page.offset, page.total_chars));
            }
            env.emit(&page, |p| p.content.clone())
        }
        HistoryAction::Search { query, session, project, literal, kinds } => {
            let req = SearchRequest {
                query: query.join(" "),
                session_id: session,
                project,
                literal,
                kinds,
                caller_session_id: None,
            };
            let results: SearchResults = env.call(req)?;
            env.emit(&results, search_text)
        }
        HistoryAction::Chart { session } => {
            let chart: Chart = env.call(HistoryChartRequest::new(session))?;
            env.emit(&chart, |c| c.chart.trim_end().to_owned())
        }
        HistoryAction::Compactions { session, read } => {
            let list: Compactions = env.call(CompactionsRequest { session_id: session, read })?;
            env.emit(&list, compactions_text)
        }
        HistoryAction::Children { session } => {
            let children: Vec<SessionListing> = env.call(HistoryChildrenRequest::new(session))?;
            env.emit(&children, |s| sessions_text(s))
        }
        HistoryAction::Stats => {
            let stats: HistoryStats = env.call(HistoryStatsRequest)?;
            env.emit(&stats, stats_text)
        }
        HistoryAction::Prune { older_than, max_bytes, dry_run } => prune(env, older_than, max_bytes, dry_run),
        HistoryAction::Ingest { host, path, session } => ingest(env, host, path, session),
        HistoryAction::Plans { read, directory } => {
            let directory = Some(directory.map_or_else(|| env.cwd().to_owned(), |d| env.cwd().join(d)));
            let plans: Plans = env.call(PlansRequest { read, directory, session_id: None })?;
            env.emit(&plans, Plans::to_markdown)
        }
        HistoryAction::ContextUsage { session, limit } => {
            let req = ContextUsageRequest { session_id: session, caller_session_id: None, limit };
            let usage: ContextUsageReport = env.call(req)?;
            env.emit(&usage, |u| u.note.clone())
        }
        HistoryAction::Forget { session } => {
            let gone: Forgotten = env.call(HistoryForgetRequest::new(session))?;
            env.emit(&gone, |g| format!("Forgot session {} ({} rows erased).", g.session_id, g.removed))
        }
    }
}

fn sessions_text(sessions: &[SessionListing]) -> String {
    if sessions.is_empty() {
        return "No sessions in the history archive.".to_owned();
    }
    let mut out = String::new();
    for s in sessions {
        let _ = write!(out, "{}  {}  {}  {} messages", s.session_id, s.host, s.updated, s.messages);
        if let Some(title) = &s.title {
            let _ = write!(out, "  {title:?}");
        }
        if let Some(project) = &s.project {
            let _ = write!(out, "  [{project}]");
        }
        if let Some(parent) = &s.parent_id {
            let _ = write!(out, "  (child of {parent})");
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

fn tools_line(tool: &ToolSummary) -> String {
    format!("{} ({})", tool.calls.join(", "), tool.outcome)
}

fn turns_text(page: &TurnsPage) -> String {
    if page.turns.is_empty() {
        return "No turns.".to_owned();
    }
    let mut out = String::new();
    for t in &page.turns {
        let user = t.user.preview.as_deref().unwrap_or("-");
        let _ = writeln!(out, "Turn {} [{}] user: {user}", t.turn_number, t.user.message_id);
        if let Some(attachments) = &t.user.attachment {
            let _ = writeln!(out, "  attached: {}", attachments.join(", "));
        }
        let assistant = t.assistant.preview.as_deref().unwrap_or("-");
        let _ = writeln!(out, "  assistant ({} messages): {assistant}", t.assistant.total_messages);
        if let Some(tool) = &t.assistant.tool {
            let _ = writeln!(out, "  tools: {}", tools_line(tool));
        }
        if let Some(files) = &t.assistant.modified {
            let _ = writeln!(out, "  modified: {}", files.join(", "));
        }
    }
    out.trim_end().to_owned()
}

fn messages_text(page: &MessagesPage) -> String {
    let mut out = String::new();
    if let Some(before) = &page.before_message_id {
        let _ = writeln!(out, "(earlier: --message {before})");
    }
    for m in &page.messages {
        let mark = if m.injected { " (injected by cairn)" } else { "" };
        let _ = writeln!(out, "[turn {}] {} {}{mark}: {}", m.turn_number, m.role, m.message_id, m.preview);
        if let Some(tool) = &m.tool {
            let _ = writeln!(out, "  tools: {}", tools_line(tool));
        }
    }
    if let Some(after) = &page.after_message_id {
        let _ = writeln!(out, "(later: --message {after})");
    }
    if out.is_empty() { "No messages.".to_owned() } else { out.trim_end().to_owned() }
}

fn message_text(m: &PulledMessage) -> String {
    let mut out = format!("{} {} (turn {}, {})\n", m.role, m.message_id, m.turn_number, m.time);
    for section in &m.sections {
        let (head, body, part_id) = match section {
            Section::Text { content, part_id, injected } => {
                let head = if *injected { "text (injected by cairn)" } else { "text" };
                (head.to_owned(), Some(content.clone()), part_id)
            }
            Section::Reasoning { content, part_id } => ("reasoning".to_owned(), Some(content.clone()), part_id),
            Section::Tool { tool, status, input, content, part_id } => {
                let input = input.as_ref().map(|i| format!(" {i}")).unwrap_or_default();
                (format!("tool {tool} [{status}]{input}"), content.clone(), part_id)
            }
            Section::Image { mime } => (format!("image {}", mime.as_deref().unwrap_or("")), None, &None),
            Section::File { path, mime } => {
                (format!("file {} {}", path.as_deref().unwrap_or(""), mime.as_deref().unwrap_or("")), None, &None)
            }
        };
        let _ = writeln!(
            out,
            "--- {}{}",
            head.trim_end(),
            part_id.as_ref().map(|p| format!(" (part {p})")).unwrap_or_default()
        );
        if let Some(body) = body {
            let _ = writeln!(out, "{body}");
        }
    }
    out.trim_end().to_owned()
}

fn search_text(results: &SearchResults) -> String {
    if results.messages.is_empty() {
        return "No matches.".to_owned();
    }
    let mut out = String::new();
    for m in &results.messages {
        let _ = writeln!(out, "{} {} ({}, turn {})", m.session_id, m.message_id, m.role, m.turn_number);
        for hit in &m.hits {
            let what = match &hit.tool_name {
                Some(tool) => format!("{} {tool}", hit.kind),
                None => hit.kind.clone(),
            };
            for snippet in &hit.snippets {
                let _ = writeln!(out, "  [{what}, part {}] {snippet}", hit.part_id);
            }
        }
        if let Some(more) = m.remain_hits {
            let _ = writeln!(out, "  … {more} more hits in this message");
        }
    }
    out.trim_end().to_owned()
}

fn compactions_text(list: &Compactions) -> String {
    if let Some(summary) = &list.summary {
        return summary.trim_end().to_owned();
    }
    if list.compactions.is_empty() {
        return format!("Session {} has no compactions.", list.session_id);
    }
    let mut out = String::new();
    for c in &list.compactions {
        let _ = writeln!(out, "{}. {}  {}", c.index, c.time, c.preview);
    }
    out.trim_end().to_owned()
}

fn stats_text(stats: &HistoryStats) -> String {
    let mut out = String::new();
    for h in &stats.hosts {
        let _ = write!(
            out,
            "{}: {} sessions, {} messages, {} parts, {} chars",
            h.host, h.sessions, h.messages, h.parts, h.bytes
        );
        if let (Some(oldest), Some(newest)) = (&h.oldest, &h.newest) {
            let _ = write!(out, ", {oldest} .. {newest}");
        }
        if !h.skipped.is_empty() {
            let skipped: Vec<String> = h.skipped.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
            let _ = write!(out, "; skipped: {}", skipped.join(", "));
        }
        if h.errors > 0 {
            let _ = write!(out, "; {} sources failing", h.errors);
        }
        if h.source_files > 0 {
            let files = if h.source_files == 1 { "file" } else { "files" };
            let _ = write!(out, "; read from {} {files}, {}", h.source_files, human_bytes(h.source_bytes));
        }
        out.push('\n');
    }
    out.push_str(&archive_disk_text(&stats.disk));
    out
}

/// The archive's size on disk, and against the hosts' own files when any was read.
fn archive_disk_text(disk: &ArchiveDisk) -> String {
    let mut line = format!(
        "archive on disk: {} (history.db {}, WAL {}, index {})",
        human_bytes(disk.archive_bytes),
        human_bytes(disk.db_bytes),
        human_bytes(disk.wal_bytes),
        human_bytes(disk.index_bytes)
    );
    if let Some(ratio) = disk.ratio {
        let sources = human_bytes(disk.source_bytes);
        let _ = write!(line, ", {ratio:.2} times the {sources} of the hosts' files it was read from");
    }
    line
}

/// `cairn history ingest`: the readers run here, writing `history.db` beside the store. A
/// daemon's own scan may run at the same time: each source's cursor is compared and swapped
/// with the rows it covers, so neither reads a thing twice.
fn ingest(env: &Env, host: Option<String>, path: Option<PathBuf>, session: Option<String>) -> Result<()> {
    let host = host.map(|h| HistoryHost::parse(&h).ok_or_else(|| bad_host(&h))).transpose()?;
    ensure_data_dir(&env.settings.data_dir.value)?;
    let mut db = HistoryDb::open(&env.settings.data_dir.value.join(HISTORY_DB_FILE))?;
    let report = if host.is_some() || path.is_some() || session.is_some() {
        poke(&mut db, &process_env, &PokeRequest { host, path, session_id: session })?
    } else {
        let bar = progress_bar();
        let report = scan(&mut db, &process_env, &mut |p: Progress| {
            bar.set_length(p.bytes_total.max(1));
            bar.set_position(p.bytes_done);
            bar.set_message(format!("{}/{} {}", p.sources_done, p.sources_total, short_source(&p.source)));
        });
        bar.finish_and_clear();
        report?
    };
    env.emit(&report, report_text)
}

fn bad_host(raw: &str) -> cairn_core::CairnError {
    cairn_core::CairnError::invalid(format!("host {raw:?} is not known"))
        .with_hint("use opencode, claude-code, codex or gemini")
}

/// A bar on stderr when it is a terminal; hidden otherwise (scripts and tests see only stdout).
fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// The last two components of a source path: enough to see which transcript is being read.
fn short_source(source: &str) -> String {
    let parts: Vec<&str> = source.rsplit('/').take(2).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

fn report_text(r: &ScanReport) -> String {
    let mut lines = vec![format!(
        "Read {} source(s): {} session(s), {} message(s), {} part(s), {} bytes.",
        r.sources, r.sessions, r.messages, r.parts, r.bytes
    )];
    for (reason, n) in &r.skipped {
        lines.push(format!("  skipped {n} ({reason})"));
    }
    for e in &r.errors {
        lines.push(format!("  {}: {}", e.source, e.code));
    }
    lines.join("\n")
}

/// `cairn history prune`: on the archive file (as `history ingest`), a batch per transaction.
fn prune(env: &Env, older_than: Option<i64>, max_bytes: Option<u64>, dry_run: bool) -> Result<()> {
    use cairn_core::history::prune::{PruneRequest, prune_now};
    let older_than_days = older_than
        .map(|days| {
            u64::try_from(days).map_err(|_| {
                cairn_core::CairnError::invalid(format!("--older-than must be a positive number of days (got {days})"))
            })
        })
        .transpose()?;
    let request = PruneRequest { older_than_days, max_bytes, dry_run };
    cairn_core::history::prune::check(&request)?;
    let mut db = HistoryDb::open(&env.settings.data_dir.value.join(HISTORY_DB_FILE))?;
    let report = prune_now(&mut db, &request)?;
    env.emit(&report, |r| {
        let verb = if r.dry_run { "Would remove" } else { "Removed" };
        format!(
            "{verb} {} sessions, {} messages, {} parts ({} bytes of text); archive {} -> {} bytes",
            r.sessions, r.messages, r.parts, r.bytes, r.archive_bytes_before, r.archive_bytes_after
        )
    })
}
