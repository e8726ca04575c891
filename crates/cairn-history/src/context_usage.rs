//! Op `context_usage` (the context meter's numbers, from the archive): how full a session's context
//! window is, from the archive: the last assistant message's usage record, counted by the meter's
//! rules (`agent::meter`), against the model's window and the `[context_meter]` thresholds, with
//! the change since the answer before.

use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::HistoryHost;
use super::query::check_id;
use super::store::HistoryDb;
use cairn_base::context_window::{ContextUsage, MeterStatus, thousands, trend_text, used_tokens, window_of};
use cairn_base::error::{CairnError, ErrorCode, Result};
use cairn_base::settings::plugin::ContextMeterSettings;

/// Assistant messages looked at, newest first, for the latest answer and the one before (a
/// Claude Code answer is one record per content block, all with the same usage).
const LOOK_BACK: usize = 200;

/// `context_usage {session_id?, caller_session_id?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextUsageRequest {
    /// The session to measure; default: the caller's, else the most recently updated one.
    #[serde(default, alias = "sessionId")]
    pub session_id: Option<String>,
    /// The caller's own session, when the door knows it.
    #[serde(default)]
    pub caller_session_id: Option<String>,
    /// The model's context window in tokens, when the caller knows it (cairn's OpenCode plugin
    /// passes its provider's limit, so this agrees with the meter in the prompt); otherwise 1M
    /// for a `[1m]` model, else `[context_meter] default_limit`. 0 counts as not given.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// Which session was measured, and why that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum UsageSource {
    /// The session the call named.
    Given,
    /// The caller's own session.
    Caller,
    /// Nothing named one (or the caller's is not archived yet): the most recently updated main
    /// session.
    Latest,
}

/// The context meter's numbers for one session. The numbers are absent when the session has no
/// assistant usage yet (or the archive holds no session); `note` then says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextUsageReport {
    pub session_id: Option<String>,
    pub host: Option<HistoryHost>,
    pub source: UsageSource,
    /// Whole percent of the window used (rounded down).
    pub percent: Option<u64>,
    /// Tokens in the window at the last answer.
    pub used: Option<u64>,
    /// The model's window: the request's `limit`, else 1M for a `[1m]` model, else
    /// `[context_meter] default_limit`.
    pub limit: Option<u64>,
    pub model: Option<String>,
    pub status: Option<MeterStatus>,
    /// The change since the answer before, in words (`+3,200 tokens since the last answer`).
    pub trend: Option<String>,
    /// The same change in tokens.
    pub delta: Option<i64>,
    /// The assistant message measured, and when it was written.
    pub message_id: Option<String>,
    pub measured_at: Option<String>,
    /// One line for people: the numbers, or why there are none, and which session it is.
    pub note: String,
}

/// Context in use at the end of one turn: its last answer that reported token usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnUsage {
    pub turn_number: i64,
    pub used: u64,
}

/// A session's context use over its turns, for a chart (`context_usage_turns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextUsageTurns {
    pub session_id: String,
    /// The window the chart is drawn against (the model's, else the meter's default).
    pub limit: u64,
    /// Turns with a measured answer, in order.
    pub turns: Vec<TurnUsage>,
    /// Turns in which the session was compacted.
    pub compacted_turns: Vec<i64>,
}

/// One assistant answer's usage.
struct Answer {
    id: String,
    tokens: String,
    used: u64,
    model: Option<String>,
    created_at: String,
}

impl ContextUsageReport {
    /// An answer that has no usage to report (no session, or no answer with tokens), saying why.
    fn without_usage(session: Option<(String, HistoryHost)>, source: UsageSource, note: String) -> Self {
        let (session_id, host) = session.unzip();
        ContextUsageReport {
            session_id,
            host,
            source,
            percent: None,
            used: None,
            limit: None,
            model: None,
            status: None,
            trend: None,
            delta: None,
            message_id: None,
            measured_at: None,
            note,
        }
    }
}

/// The largest window `limit` may say (no model comes near 100M tokens): a bigger one is a
/// mistake, refused rather than reported as 0 %.
pub const MAX_LIMIT: u64 = 100_000_000;

/// Measure the session `req` names (see [`ContextUsageRequest`]).
pub fn context_usage(
    db: &HistoryDb,
    req: &ContextUsageRequest,
    settings: &ContextMeterSettings,
) -> Result<ContextUsageReport> {
    if let Some(limit) = req.limit.filter(|&l| l > MAX_LIMIT) {
        return Err(CairnError::invalid(format!("limit {limit} is larger than any model's window"))
            .with_hint(format!("give the model's context window in tokens, at most {MAX_LIMIT}")));
    }
    let conn = db.conn();
    let given = |s: &Option<String>| s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned);
    let mut preface = String::new();
    let (session, source) = if let Some(id) = given(&req.session_id) {
        check_id("session_id", &id)?;
        let host = session_host(conn, &id)?.ok_or_else(|| {
            CairnError::new(ErrorCode::HistorySessionNotFound, format!("no history for session {id:?}"))
                .with_hint("list sessions with history_sessions; a new session appears after the next scan")
        })?;
        (Some((id, host)), UsageSource::Given)
    } else {
        let caller = given(&req.caller_session_id);
        let own = match &caller {
            Some(id) if check_id("caller_session_id", id).is_ok() => session_host(conn, id)?.map(|h| (id.clone(), h)),
            _ => None,
        };
        if let Some(own) = own {
            (Some(own), UsageSource::Caller)
        } else {
            if let Some(id) = &caller {
                preface = format!("Your session {id} is not in the history archive yet; ");
            }
            (latest_session(conn)?, UsageSource::Latest)
        }
    };
    let Some((session_id, host)) = session else {
        let note = format!("{preface}the history archive holds no session yet: no context usage to report.");
        return Ok(ContextUsageReport::without_usage(None, source, note));
    };
    let which = match source {
        UsageSource::Given => format!("session {session_id}"),
        UsageSource::Caller => format!("your session {session_id}"),
        UsageSource::Latest => format!("the most recently updated session, {session_id} ({})", host.as_str()),
    };
    let answers = last_answers(conn, &session_id)?;
    let Some(last) = answers.first() else {
        let note =
            format!("{preface}{which}: no assistant answer with token usage yet, so no context usage to report.");
        return Ok(ContextUsageReport::without_usage(Some((session_id, host)), source, note));
    };
    let model = match &last.model {
        Some(m) => Some(m.clone()),
        None => session_model(conn, &session_id)?,
    };
    let usage = ContextUsage {
        used: last.used,
        limit: req
            .limit
            .filter(|&l| l > 0)
            .unwrap_or_else(|| window_of(model.as_deref().unwrap_or(""), settings.default_limit)),
        model: model.clone().unwrap_or_default(),
    };
    let percent = usage.percent();
    let status = MeterStatus::of(percent, settings);
    // The answer before: the nearest earlier record that is not the same API call again.
    let previous = answers.iter().skip(1).find(|a| a.tokens != last.tokens);
    let delta = previous.map(|p| i64::try_from(last.used).unwrap_or(i64::MAX) - i64::try_from(p.used).unwrap_or(0));
    let trend = delta.map(trend_text);
    let model_text = model.as_deref().map(|m| format!(", {m}")).unwrap_or_default();
    let trend_note = trend.as_deref().map_or_else(|| "; the first answer measured".into(), |t| format!("; {t}"));
    let note = format!(
        "{preface}{which}: {percent}% used ({} / {} tokens{model_text}), {}{trend_note}.",
        thousands(usage.used),
        thousands(usage.limit),
        status.as_str(),
    );
    Ok(ContextUsageReport {
        session_id: Some(session_id),
        host: Some(host),
        source,
        percent: Some(percent),
        used: Some(usage.used),
        limit: Some(usage.limit),
        model,
        status: Some(status),
        trend,
        delta,
        message_id: Some(last.id.clone()),
        measured_at: Some(last.created_at.clone()),
        note,
    })
}

fn session_host(conn: &rusqlite::Connection, id: &str) -> Result<Option<HistoryHost>> {
    let host: Option<String> = conn
        .prepare_cached("SELECT host FROM history_sessions WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    Ok(host.map(|h| HistoryHost::parse(&h).unwrap_or(HistoryHost::OpenCode)))
}

fn session_model(conn: &rusqlite::Connection, id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT model FROM history_sessions WHERE id = ?1")?
        .query_row([id], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// The most recently updated main session (a sub-agent's window is its own, not the user's).
fn latest_session(conn: &rusqlite::Connection) -> Result<Option<(String, HistoryHost)>> {
    let row: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT id, host FROM history_sessions WHERE parent_id IS NULL ORDER BY updated_at DESC, id DESC LIMIT 1",
        )?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(row.map(|(id, host)| (id, HistoryHost::parse(&host).unwrap_or(HistoryHost::OpenCode))))
}

/// The session's latest assistant answers with a usage that counts, newest first.
/// The context in use at the end of each turn of a session, and the turns it was compacted in.
/// One pass over the session's assistant messages in order. A compaction's summary answer is
/// left out: its usage is the summariser reading the old context, not what the session carries
/// on with.
pub fn context_usage_turns(
    db: &HistoryDb,
    session_id: &str,
    settings: &ContextMeterSettings,
) -> Result<ContextUsageTurns> {
    check_id("session_id", session_id)?;
    let conn = db.conn();
    if session_host(conn, session_id)?.is_none() {
        return Err(CairnError::new(
            ErrorCode::HistorySessionNotFound,
            format!("no history for session {session_id:?}"),
        )
        .with_hint("list sessions with history_sessions; a new session appears after the next scan"));
    }
    let mut stmt = conn.prepare_cached(
        "SELECT coalesce(turn_number, 0), tokens, model FROM history_messages
         WHERE session_id = ?1 AND role = 'assistant' AND summary = 0 AND tokens IS NOT NULL ORDER BY seq, id",
    )?;
    let mut rows = stmt.query([session_id])?;
    let mut turns: Vec<TurnUsage> = Vec::new();
    let mut model: Option<String> = None;
    while let Some(row) = rows.next()? {
        let (turn_number, tokens, answer_model): (i64, String, Option<String>) =
            (row.get(0)?, row.get(1)?, row.get(2)?);
        let used = serde_json::from_str::<Value>(&tokens).map_or(0, |v| used_tokens(&v));
        // An answer still streaming reports zeros: not a measurement.
        if used == 0 {
            continue;
        }
        model = answer_model.filter(|m| !m.trim().is_empty()).or(model);
        match turns.last_mut() {
            Some(last) if last.turn_number == turn_number => last.used = used,
            _ => turns.push(TurnUsage { turn_number, used }),
        }
    }
    let model = match model {
        Some(m) => Some(m),
        None => session_model(conn, session_id)?,
    };
    let mut compacted = conn.prepare_cached(
        "SELECT DISTINCT coalesce(turn_number, 0) FROM history_messages
         WHERE session_id = ?1 AND (compaction = 1 OR summary = 1) ORDER BY 1",
    )?;
    let compacted_turns = compacted.query_map([session_id], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?;
    Ok(ContextUsageTurns {
        session_id: session_id.to_owned(),
        limit: window_of(model.as_deref().unwrap_or(""), settings.default_limit),
        turns,
        compacted_turns,
    })
}

fn last_answers(conn: &rusqlite::Connection, session_id: &str) -> Result<Vec<Answer>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, tokens, model, created_at FROM history_messages
         WHERE session_id = ?1 AND role = 'assistant' AND tokens IS NOT NULL
         ORDER BY seq DESC, id DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(rusqlite::params![session_id, LOOK_BACK as i64], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?, r.get::<_, String>(3)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, tokens, model, created_at) = row?;
        let used = serde_json::from_str::<Value>(&tokens).map_or(0, |v| used_tokens(&v));
        // An OpenCode answer still streaming has all-zero tokens: not a measurement.
        if used > 0 {
            out.push(Answer { id, tokens, used, model: model.filter(|m| !m.trim().is_empty()), created_at });
        }
    }
    Ok(out)
}
