//! Stored text that still holds a `<private>` tag or a secret (saved by an older cairn, or
//! with `[privacy] redact_secrets = false`): counted for `cairn doctor` (a few ids, never the
//! text), and rewritten by `cairn privacy rewrite`.
//!
//! The rewrite goes through [`Store::update`] for live memories, so the sync journal carries
//! the redacted version, then redacts in place what an update does not reach: revisions,
//! soft-deleted memories, prompts, sessions, relations and the journal's own earlier payloads.
//! It runs with `secure_delete` on (freed space is zeroed) and ends with a `VACUUM` and a
//! truncating WAL checkpoint when it runs outside a transaction, so the old bytes are gone from
//! the database file, not only from its rows.

use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::memory::ObservationPatch;
use crate::redaction::redact_json;
use crate::store::Store;
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

/// A table's rows whose text columns are checked, keyed by what identifies a row.
struct Table {
    select: &'static str,
    update: &'static str,
}

/// Everything but live memories, redacted in place. Each select gives the key column(s) first
/// (`keys`), then the text columns the update sets in order.
const IN_PLACE: &[(&str, usize, Table)] = &[
    (
        "revisions",
        2,
        Table {
            select: "SELECT observation_id, revision, type, title, content FROM observation_revisions",
            update: "UPDATE observation_revisions SET type = ?3, title = ?4, content = ?5
                     WHERE observation_id = ?1 AND revision = ?2",
        },
    ),
    (
        "deleted memories",
        1,
        Table {
            select: "SELECT id, type, title, content, coalesce(topic_key, ''), coalesce(tool_name, '')
                     FROM observations WHERE deleted_at IS NOT NULL",
            update: "UPDATE observations SET type = ?2, title = ?3, content = ?4, topic_key = nullif(?5, ''),
                     tool_name = nullif(?6, '') WHERE id = ?1",
        },
    ),
    (
        "prompts",
        1,
        Table { select: "SELECT id, content FROM prompts", update: "UPDATE prompts SET content = ?2 WHERE id = ?1" },
    ),
    (
        "sessions",
        1,
        Table {
            select: "SELECT id, coalesce(summary, ''), coalesce(title, ''), directory, agent FROM sessions",
            update: "UPDATE sessions SET summary = nullif(?2, ''), title = nullif(?3, ''), directory = ?4, agent = ?5
                     WHERE id = ?1",
        },
    ),
    (
        "relations",
        1,
        Table {
            select: "SELECT id, coalesce(reason, ''), coalesce(evidence, '') FROM relations",
            update: "UPDATE relations SET reason = nullif(?2, ''), evidence = nullif(?3, '') WHERE id = ?1",
        },
    ),
    (
        "journal",
        1,
        Table {
            select: "SELECT seq, payload FROM sync_journal",
            update: "UPDATE sync_journal SET payload = ?2 WHERE seq = ?1",
        },
    ),
    (
        "journal",
        1,
        Table {
            select: "SELECT sync_id, payload FROM sync_deferred",
            update: "UPDATE sync_deferred SET payload = ?2 WHERE sync_id = ?1",
        },
    ),
];

/// One row: its key values and its text values, redacted.
type Row = (Vec<SqlValue>, Vec<String>);

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
    let mut stmt = conn.prepare(table.select)?;
    let columns = stmt.column_count();
    let rows = stmt.query_map([], |r| {
        let key = (0..keys).map(|i| r.get::<_, SqlValue>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        let texts = (keys..columns).map(|i| r.get::<_, String>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        Ok((key, texts))
    })?;
    let mut found = Vec::new();
    for row in rows {
        let (key, texts) = row?;
        if let Some(texts) = redacted(kind, &texts) {
            found.push((key, texts));
        }
    }
    Ok(found)
}

/// Live memories with a field that holds private text or a secret, and their patch.
fn live_memories_holding(conn: &Connection) -> Result<Vec<(i64, ObservationPatch)>> {
    let mut stmt = conn.prepare(
        "SELECT id, type, title, content, topic_key, tool_name FROM observations WHERE deleted_at IS NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            ObservationPatch {
                kind: Some(r.get(1)?),
                title: Some(r.get(2)?),
                content: Some(r.get(3)?),
                topic_key: r.get(4)?,
                tool_name: r.get(5)?,
                ..ObservationPatch::default()
            },
        ))
    })?;
    let mut found = Vec::new();
    for row in rows {
        let (id, mut patch) = row?;
        if patch.redact_fields(Redaction::OUTBOUND) {
            found.push((id, patch));
        }
    }
    Ok(found)
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
        self.conn().pragma_update(None, "secure_delete", true)?;
        for (id, patch) in live_memories_holding(self.conn())? {
            self.update(id, &patch)?;
        }
        self.write(|tx| {
            for (kind, keys, table) in IN_PLACE {
                for (key, texts) in rows_holding(tx, kind, table, *keys)? {
                    let values: Vec<SqlValue> = key.into_iter().chain(texts.into_iter().map(SqlValue::Text)).collect();
                    tx.execute(table.update, rusqlite::params_from_iter(values))?;
                }
            }
            Ok(())
        })?;
        let vacuumed = self.conn().is_autocommit();
        if vacuumed {
            self.conn().execute_batch("VACUUM")?;
            self.conn().query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(PrivacyRewrite { dry_run, found, vacuumed })
    }
}
