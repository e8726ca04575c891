//! The held-out extraction set (`eval/extraction/{dev,…,holdout39}/*.json`, one folder per split of [`SPLITS`]): coding
//! sessions written for cairn, each with the atomic facts a reader should take from it, and
//! questions a later session would search with. The split is fixed by the file's directory:
//! odd-numbered sessions s01–s23 are dev, even-numbered s02–s24 test (reported once, then tuned
//! on like dev), s25–s36 holdout (written after that report; run once, then tuned on), s37–s48
//! holdout2 (written before any change was tried on holdout; run once, on 2026-12-05), s49–s60
//! holdout3 (written blind, committed before the next change was scored on any split; run once,
//! on 2026-12-06), s61–s72 holdout4 (written blind the same way, committed before the changes
//! after holdout3's run were scored on it; run once, on 2026-12-06), s73–s84 holdout5 (written
//! blind the same way, committed before anything was scored on it; run once, on 2026-12-06),
//! s85–s96 holdout6 (the same; run once, with nothing changed, on 2026-12-06), s97–s108
//! holdout7 (the same; run once, on 2026-12-06), s109–s120 holdout8 (the same; run once, on
//! 2026-12-06), s121–s132 holdout9 (the same; run once, on 2026-12-06), s133–s144 holdout10 (the
//! same; run once, on 2026-12-06), s145–s156 holdout11 and s157–s168 holdout12 (the same;
//! written after holdout10's run), s169–s180 holdout13 and s181–s192 holdout14 (the same;
//! written after holdout12's run), s193–s204 holdout15 and s205–s216 holdout16 (the same;
//! written after holdout14's run), s217–s228 holdout17 and s229–s240 holdout18 (the same;
//! written after holdout16's run), s241–s252 holdout19 and s253–s264 holdout20 (the same;
//! written after holdout18's run), s265–s276 holdout21 and s277–s288 holdout22 (the same;
//! written after holdout20's run began), s289–s300 holdout23 and s301–s312 holdout24 (the
//! same; written while holdout21 ran), s313–s324 holdout25 and s325–s336 holdout26 (the same;
//! written while holdout23 ran), s337–s348 holdout27 and s349–s360 holdout28 (the same;
//! written after holdout26's run), s361–s372 holdout29 (the same; written after holdout28's
//! run), s373–s384 holdout30 and s385–s396 holdout31 (the same; written after holdout29's
//! run), s397–s408 holdout32 and s409–s420 holdout33 (the same; written after holdout31's
//! run), s421–s432 holdout34 and s433–s444 holdout35 (the same; written after holdout33's
//! run), s445–s456 holdout36 and s457–s468 holdout37 (the same; written after holdout35's
//! run), s469–s480 holdout38 and s481–s492 holdout39 (the same; written after holdout37's
//! run). A held-out figure is a split's first run; after it, the
//! split is tuning data.

use std::path::Path;

use anyhow::{Context, Result};
use cairn_core::history::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, PartKind, ToolStatus,
};
use cairn_core::history::store::SourceRef;
use cairn_core::{CairnError, Core};
use serde::Deserialize;

/// One session of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct Session {
    pub id: String,
    pub split: String,
    pub host: String,
    pub project: String,
    pub title: String,
    pub messages: Vec<Message>,
    pub facts: Vec<Fact>,
    /// True statements of the session that are not required (a detail, a figure): a memory
    /// that says one is no noise, and no fact is recalled by it.
    #[serde(default)]
    pub acceptable: Vec<Acceptable>,
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub role: String,
    pub text: String,
    #[serde(default)]
    pub tools: Vec<ToolCall>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ToolCall {
    pub tool: String,
    pub input: serde_json::Value,
    pub output: String,
}

/// An annotated fact: its type and the keyword groups a memory must hold to state it (every
/// group, any one alternative of each, case-insensitive substrings).
#[derive(Debug, Clone, Deserialize)]
pub struct Fact {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// What the fact says, for people (and the oracle provider's answers).
    pub note: String,
    pub keywords: Vec<Vec<String>>,
}

/// (Its `note`, for people, is not read.)
#[derive(Debug, Clone, Deserialize)]
pub struct Acceptable {
    pub keywords: Vec<Vec<String>>,
}

/// A question a later session asks; its answer is `fact` of this session.
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub query: String,
    pub fact: String,
}

/// The splits, in the order they were written (each folder of the set is one).
pub const SPLITS: &[&str] = &[
    "dev",
    "test",
    "holdout",
    "holdout2",
    "holdout3",
    "holdout4",
    "holdout5",
    "holdout6",
    "holdout7",
    "holdout8",
    "holdout9",
    "holdout10",
    "holdout11",
    "holdout12",
    "holdout13",
    "holdout14",
    "holdout15",
    "holdout16",
    "holdout17",
    "holdout18",
    "holdout19",
    "holdout20",
    "holdout21",
    "holdout22",
    "holdout23",
    "holdout24",
    "holdout25",
    "holdout26",
    "holdout27",
    "holdout28",
    "holdout29",
    "holdout30",
    "holdout31",
    "holdout32",
    "holdout33",
    "holdout34",
    "holdout35",
    "holdout36",
    "holdout37",
    "holdout38",
    "holdout39",
];

/// The sessions of `split` (one of [`SPLITS`], or `all`) under `dir`, in id order; `only` keeps
/// the named ones.
pub fn load(dir: &Path, split: &str, only: &[String]) -> Result<Vec<Session>> {
    let splits: &[&str] = match split {
        "all" => SPLITS,
        one => match SPLITS.iter().position(|s| *s == one) {
            Some(at) => &SPLITS[at..=at],
            None => {
                return Err(CairnError::invalid(format!("unknown split {one:?}"))
                    .with_hint(format!("use --split {} or all", SPLITS.join(", ")))
                    .into());
            }
        },
    };
    let mut sessions = Vec::new();
    for split in splits {
        let folder = dir.join(split);
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("reading {} (run from the repository root, or pass --dir)", folder.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let session: Session =
                serde_json::from_str(&text).with_context(|| format!("{} is not a session", path.display()))?;
            if session.split != *split {
                anyhow::bail!("{} says split {:?} but sits in {split}/", path.display(), session.split);
            }
            sessions.push(session);
        }
    }
    sessions.retain(|s| only.is_empty() || only.contains(&s.id));
    sessions.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(sessions)
}

/// The session as the archive stores it: one message per entry, its text a text part and each
/// tool call a tool part with its input and output (what a host's reader writes).
pub fn batch(session: &Session, at: &str) -> IngestBatch {
    let host = if session.host == "claude-code" { HistoryHost::ClaudeCode } else { HistoryHost::OpenCode };
    let mut batch = IngestBatch {
        sessions: vec![HistorySession {
            id: session.id.clone(),
            host,
            project: Some(session.project.clone()),
            directory: None,
            parent_id: None,
            title: Some(session.title.clone()),
            agent: None,
            model: None,
            created_at: at.to_owned(),
            updated_at: at.to_owned(),
        }],
        ..IngestBatch::default()
    };
    for (seq, message) in session.messages.iter().enumerate() {
        let role = if message.role == "user" { HistoryRole::User } else { HistoryRole::Assistant };
        let id = format!("{}_msg_{seq:03}", session.id);
        let mut idx = 0;
        let mut part = |kind| {
            idx += 1;
            HistoryPart::new(&session.id, &id, &format!("{id}_prt_{idx}"), idx, kind)
        };
        if !message.text.is_empty() {
            batch.parts.push(HistoryPart { text: Some(message.text.clone()), ..part(PartKind::Text) });
        }
        for (n, call) in message.tools.iter().enumerate() {
            batch.parts.push(HistoryPart {
                tool: Some(call.tool.clone()),
                call_id: Some(format!("{id}_call_{n}")),
                status: Some(ToolStatus::Completed),
                input: Some(call.input.to_string()),
                output: Some(call.output.clone()),
                ..part(PartKind::Tool)
            });
        }
        batch.messages.push(HistoryMessage::new(&session.id, &id, role, seq as i64, at));
    }
    batch
}

/// Archive every session in `core`'s history, as an ingest would.
pub fn archive(core: &mut Core, sessions: &[Session], at: &str) -> Result<()> {
    for session in sessions {
        let source = SourceRef { key: format!("eval/{}", session.id), host: HistoryHost::OpenCode };
        let next = Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None };
        core.history.db()?.apply(&source, None, &batch(session, at), &next)?;
    }
    Ok(())
}

/// The turns of a session as plain memories would hold them (the baseline retrieval corpus):
/// a user message with the answers that follow it, tool calls as one-line notes.
pub fn turns(session: &Session) -> Vec<String> {
    let mut turns: Vec<String> = Vec::new();
    for message in &session.messages {
        let mut said = message.text.clone();
        for call in &message.tools {
            said.push_str(&format!("\n(ran {}: {})", call.tool, call.input));
        }
        match turns.last_mut() {
            Some(turn) if message.role != "user" => {
                turn.push('\n');
                turn.push_str(&said);
            }
            _ => turns.push(said),
        }
    }
    turns
}
