//! Stored text that still holds a `<private>` tag or a secret (saved by an older cairn, or
//! with `[privacy] redact_secrets = false`): counted for `cairn doctor` (a few ids, never the
//! text), and rewritten by `cairn privacy rewrite`.
//!
//! The rewrite goes through [`Store::update`] for live memories, so the sync journal carries
//! the redacted version, then redacts in place what an update does not reach: revisions,
//! soft-deleted memories, prompts, sessions, relations and the journal's own earlier payloads.
//! It runs with `secure_delete` on (freed space is zeroed) and ends with a `VACUUM` and a
//! truncating WAL checkpoint when it runs outside a transaction, so the old bytes are gone from
//! the database file, not only from its rows. The tables it reads and rewrites, and their SQL,
//! are `crate::store::privacy`.

use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::memory::ObservationPatch;
use crate::redaction::redact_json;
use crate::room::Room;
use crate::store::Store;
use crate::store::privacy::{IN_PLACE, Row, Table, live_memory_fields, rewrite_row, table_rows};
use crate::text::{RedactFields, Redaction, redact_outbound};

/// How many ids a finding names.
const SAMPLE_IDS: usize = 5;

/// Rows that still hold private text or a secret, per kind, with a few of their ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrivacyFindings {
    /// Memories (live or deleted) with a field that holds one.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub memories: usize,
    /// Earlier versions of memories.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub revisions: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub prompts: usize,
    /// Sessions (summary, title, directory, agent).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub sessions: usize,
    /// Relations (reason, evidence).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub relations: usize,
    /// Sync journal entries and deferred relations (their payloads).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub journal: usize,
    /// A few of the memories' ids (`#12`), never their text.
    pub memory_ids: Vec<i64>,
}

impl PrivacyFindings {
    pub fn total(&self) -> usize {
        self.memories + self.revisions + self.prompts + self.sessions + self.relations + self.journal
    }
}

/// What `cairn privacy rewrite` did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PrivacyRewrite {
    pub dry_run: bool,
    /// What held private text or a secret before.
    pub found: PrivacyFindings,
    /// Whether the database file was rebuilt (`VACUUM`), so no old byte is left in it.
    pub vacuumed: bool,
    /// Why the file was not (or, dry, would not be) rebuilt after the rows were redacted: the
    /// disk short of room for the rebuild's copy, or other writes in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_rebuilt: Option<String>,
}

/// `texts` redacted, when any of them held private text or a secret. A journal payload is
/// JSON: its strings are redacted, not its text (an unclosed tag would eat its closing braces).
fn redacted(kind: &str, texts: &[String]) -> Option<Vec<String>> {
    let mut hit = false;
    let out = texts
        .iter()
        .map(|text| {
            if kind == "journal" {
                let mut value: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
                if redact_json(&mut value, Redaction::OUTBOUND) {
                    hit = true;
                    return value.to_string();
                }
                return text.clone();
            }
            let out = redact_outbound(text);
            hit |= out != text.as_str();
            out.into_owned()
        })
        .collect();
    hit.then_some(out)
}

/// The rows of `table` with a text that holds private text or a secret, redacted.
fn rows_holding(conn: &Connection, kind: &str, table: &Table, keys: usize) -> Result<Vec<Row>> {
    table_rows(conn, table, keys, |texts| redacted(kind, texts))
}

/// Live memories with a field that holds private text or a secret, and their patch.
fn live_memories_holding(conn: &Connection) -> Result<Vec<(i64, ObservationPatch)>> {
    live_memory_fields(conn, |patch| patch.redact_fields(Redaction::OUTBOUND))
}

impl Store {
    /// What still holds private text or a secret (read only).
    pub fn privacy_findings(&self) -> Result<PrivacyFindings> {
        let live = live_memories_holding(self.conn())?;
        let mut findings = PrivacyFindings {
            memories: live.len(),
            memory_ids: live.iter().map(|(id, _)| *id).take(SAMPLE_IDS).collect(),
            ..PrivacyFindings::default()
        };
        for (kind, keys, table) in IN_PLACE {
            let rows = rows_holding(self.conn(), kind, table, *keys)?;
            match *kind {
                "revisions" => findings.revisions += rows.len(),
                "deleted memories" => {
                    findings.memories += rows.len();
                    if findings.memory_ids.len() < SAMPLE_IDS {
                        findings.memory_ids.extend(rows.iter().filter_map(|(key, _)| match key[0] {
                            SqlValue::Integer(id) => Some(id),
                            _ => None,
                        }));
                        findings.memory_ids.truncate(SAMPLE_IDS);
                    }
                }
                "prompts" => findings.prompts += rows.len(),
                "sessions" => findings.sessions += rows.len(),
                "relations" => findings.relations += rows.len(),
                _ => findings.journal += rows.len(),
            }
        }
        Ok(findings)
    }

    /// Redact every stored text that still holds private text or a secret (secrets whatever
    /// `redact_secrets` says: the user asked for this), then rebuild the file. `dry_run`:
    /// only count.
    pub fn privacy_rewrite(&mut self, dry_run: bool) -> Result<PrivacyRewrite> {
        let room = self.data_dir().and_then(crate::room::room_for);
        self.privacy_rewrite_with_room(dry_run, room.as_ref())
    }

    /// [`Store::privacy_rewrite`] with the disk's room given (`None`: not measurable). The
    /// redaction does not wait on room: it rewrites rows in place with `secure_delete` on, so
    /// the old bytes of those rows are zeroed whatever happens next. Only the rebuild, which
    /// also clears free pages left by earlier deletes, needs a copy's room, and a disk short
    /// of it is told, not filled half-way.
    pub(crate) fn privacy_rewrite_with_room(&mut self, dry_run: bool, room: Option<&Room>) -> Result<PrivacyRewrite> {
        let found = self.privacy_findings()?;
        if found.total() == 0 {
            return Ok(PrivacyRewrite { dry_run, found, vacuumed: false, not_rebuilt: None });
        }
        let no_room = match room {
            Some(room) => crate::room::shortfall(self.pages()?.live_bytes(), room).map(|why| no_room_note(&why)),
            None => None,
        };
        if dry_run {
            return Ok(PrivacyRewrite { dry_run, found, vacuumed: false, not_rebuilt: no_room });
        }
        self.set_secure_delete()?;
        for (id, patch) in live_memories_holding(self.conn())? {
            self.update(id, &patch)?;
        }
        self.write(|tx| {
            for (kind, keys, table) in IN_PLACE {
                for (key, texts) in rows_holding(tx, kind, table, *keys)? {
                    rewrite_row(tx, table, key, texts)?;
                }
            }
            Ok(())
        })?;
        let not_rebuilt = if !self.outside_transaction() {
            Some(IN_FLIGHT_NOTE.to_owned())
        } else if no_room.is_some() {
            self.checkpoint_truncate()?;
            no_room
        } else {
            self.vacuum_and_checkpoint()?;
            None
        };
        Ok(PrivacyRewrite { dry_run, found, vacuumed: not_rebuilt.is_none(), not_rebuilt })
    }
}

const IN_FLIGHT_NOTE: &str = "other writes were in flight; run `cairn privacy rewrite` again to rebuild the file";

fn no_room_note(why: &str) -> String {
    format!(
        "not enough free space to rebuild the file: it {why}. The redacted rows' old bytes were zeroed \
         in place; free pages left by earlier deletes may still hold old text until `cairn gc` rebuilds \
         the file with room"
    )
}
