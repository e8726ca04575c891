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
        let found = self.privacy_findings()?;
        if dry_run || found.total() == 0 {
            return Ok(PrivacyRewrite { dry_run, found, vacuumed: false });
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
        let vacuumed = self.conn().is_autocommit();
        if vacuumed {
            self.vacuum_and_checkpoint()?;
        }
        Ok(PrivacyRewrite { dry_run, found, vacuumed })
    }
}
