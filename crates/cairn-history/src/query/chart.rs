//! The compaction chart and the compaction records.

use super::messages::browse_messages;
use super::requests::{CompactionsRequest, MessagesRequest, TurnsRequest};
use super::results::{Chart, CompactionEntry, Compactions};
use super::turns::{browse_turns, text_of};
use super::{MESSAGE_COLUMNS, MessageRow, message_row, parts_of, view};
use crate::store::HistoryDb;
use cairn_base::error::{CairnError, Result};
use cairn_base::settings::HistorySettings;

/// The navigation chart left at a compaction, built as the session sees itself: the turns
/// before its latest compaction (all of it when it has none yet).
pub fn chart(db: &HistoryDb, session_id: &str, cfg: &HistorySettings) -> Result<Chart> {
    let charting = &cfg.context_charting;
    let turns = browse_turns(
        db,
        &TurnsRequest {
            session_id: session_id.to_owned(),
            turn_number: None,
            num_before: charting.recent_turns,
            num_after: 0,
            caller_session_id: Some(session_id.to_owned()),
        },
        cfg,
    )?;
    let mut chart = format!(
        "I lost context from my prior conversation. What remains is a lossy index of session {session_id}: \
         previews of what was said, not the conversation itself.\n\n"
    );
    let Some(latest) = turns.turns.last() else {
        chart.push_str(
            "The session has no turns recorded before this compaction yet. I use history_search and \
             history_browse_messages on this session if I need anything from before.\n",
        );
        return Ok(Chart { session_id: session_id.to_owned(), chart });
    };
    let first = turns.turns.first().map_or(1, |t| t.turn_number);
    chart.push_str(&format!(
        "To see where I was, I called history_browse_turns with num_before={} and num_after=0:\n\n```json\n{}\n```\n\n",
        charting.recent_turns,
        serde_json::to_string_pretty(&turns)?
    ));
    if first > 1 {
        chart.push_str(&format!(
            "Turns 1 to {} are not shown: I page back with history_browse_turns (turn_number={}, num_before={}).\n",
            first - 1,
            first - 1,
            charting.recent_turns
        ));
    }
    chart.push_str(
        "Each turn is one user message and the work after it; history_browse_messages with a turn's user \
         message_id shows its messages.\n\n",
    );
    let messages = browse_messages(
        db,
        &MessagesRequest {
            session_id: session_id.to_owned(),
            message_id: None,
            num_before: charting.recent_messages,
            num_after: 0,
            caller_session_id: Some(session_id.to_owned()),
        },
        cfg,
    )?;
    // the chart is what was said: a message of only cairn's own text is not in it
    let mut messages = messages;
    messages.messages.retain(|m| !m.injected);
    chart.push_str(&format!(
        "I called history_browse_messages on the latest turn ({}) with num_before={} and num_after=0:\n\n```json\n{}\n```\n\n",
        latest.turn_number,
        charting.recent_messages,
        serde_json::to_string_pretty(&messages)?
    ));
    chart.push_str(
        "To go on, I page with before_message_id / after_message_id (history_browse_messages), read a message \
         in full with history_pull_message and a long part with history_pull_part, and find anything else \
         with history_search. Previews omit qualifiers and details: before I act on something critical (a \
         path, a command, a constraint the user set), I pull the message and verify it.\n",
    );
    Ok(Chart { session_id: session_id.to_owned(), chart })
}

/// A session's compactions, oldest first; with `read`, that one's full summary.
pub fn compactions(db: &HistoryDb, req: &CompactionsRequest) -> Result<Compactions> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, None)?;
    let rows: Vec<MessageRow> = {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages
             WHERE session_id = ?1 AND (compaction = 1 OR summary = 1) ORDER BY seq, id"
        ))?;
        stmt.query_map([&view.session_id], message_row)?.collect::<rusqlite::Result<_>>()?
    };
    // Pair each trigger with the summary after it (either may be missing).
    let mut pairs: Vec<(Option<MessageRow>, Option<MessageRow>)> = Vec::new();
    for row in rows {
        match pairs.last_mut() {
            Some((_, summary @ None)) if row.summary => *summary = Some(row),
            _ if row.summary => pairs.push((None, Some(row))),
            _ => pairs.push((Some(row), None)),
        }
    }
    let mut entries = Vec::new();
    let mut summary_text = None;
    for (i, (trigger, summary)) in pairs.iter().enumerate() {
        let text = match summary {
            Some(s) => text_of(&parts_of(conn, &view.session_id, &s.id)?).unwrap_or_default(),
            None => String::new(),
        };
        if req.read == Some(i + 1) {
            summary_text = Some(text.clone());
        }
        let time = trigger.as_ref().or(summary.as_ref()).map(|m| m.created_at.clone()).unwrap_or_default();
        entries.push(CompactionEntry {
            index: (i + 1) as u64,
            time,
            trigger_message_id: trigger.as_ref().map(|m| m.id.clone()),
            summary_message_id: summary.as_ref().map(|m| m.id.clone()),
            preview: cairn_base::text::preview(&text, 60),
        });
    }
    if let Some(read) = req.read
        && summary_text.is_none()
    {
        return Err(CairnError::invalid(format!("the session has no compaction {read}"))
            .with_hint(format!("read is 1..={}", entries.len())));
    }
    Ok(Compactions { session_id: view.session_id, compactions: entries, summary: summary_text })
}
