//! Applying mutations from another store. The rules, the same for git chunks and a hub:
//! - a memory or relation takes the version with the newer stamp ([`Version`]); an older or
//!   equal one changes nothing, so duplicates and late arrivals are harmless;
//! - the losing text is kept as a revision of the memory, whichever side lost;
//! - two edits that raced (neither had seen the other) are flagged as a pending relation of
//!   the memory with itself, shown as contested until someone judges it;
//! - a delete is a version like any other (soft: `deleted_at`; hard: a tombstone that keeps an
//!   older upsert from bringing the row back);
//! - sessions and prompts are kept once and filled in where they were missing;
//! - a relation whose memories have not arrived waits in `sync_deferred` and is applied when
//!   they do (retried at every apply, `dead` after [`DEFERRED_TRIES`]).

use std::cmp::Ordering;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Mutation;
use super::provenance;
use super::version::{Version, compare};
use crate::error::{CairnError, ErrorCode, Result};
use crate::store::sync_apply::{self as rows, LocalMemory, RelationVersion};
use crate::store::transfer::{
    CleanObservation, CleanRelation, CleanSession, Stamp, overwrite_observation, write_new_observation, write_relation,
};
use crate::text::{normalize_project, normalized_hash, redact, redact_opt};
use crate::transfer::{
    ImportReport, ObservationRecord, PromptRecord, RelationRecord, SessionRecord, clean_observation, import_prompts,
};

/// A deferred relation is given up (status `dead`) after this many applies without its memories.
pub const DEFERRED_TRIES: i64 = 5;

/// Where stub sessions (for rows naming a session that did not travel) say they came from.
const STUB_DIRECTORY: &str = "(recovered-missing-session)";

/// What an apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApplyReport {
    /// Mutations that changed a row.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub applied: usize,
    /// Mutations already there, or older than what is there.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub skipped: usize,
    /// Edits that raced another edit of the same memory (flagged as contested).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub conflicts: usize,
    /// Relations waiting for their memories.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub deferred: usize,
    /// Waiting relations applied now that their memories are here.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub deferred_applied: usize,
}

pub(crate) fn apply_all(tx: &Connection, source: &str, mutations: &[Mutation], now: &str) -> Result<ApplyReport> {
    let mut report = ApplyReport::default();
    // A relation deferred by this very apply has not had a try yet.
    let mut just_deferred = std::collections::HashSet::new();
    for (i, m) in mutations.iter().enumerate() {
        let at = format!("mutation {i} ({} {})", m.entity, m.entity_key);
        match m.entity.as_str() {
            "session" => apply_session(tx, m, &at, &mut report)?,
            "observation" => apply_observation(tx, m, now, &at, &mut report)?,
            "prompt" => apply_prompt(tx, m, now, &at, &mut report)?,
            "relation" => {
                let before = report.deferred;
                apply_relation(tx, source, &m.payload, now, &at, &mut report)?;
                if report.deferred > before {
                    just_deferred
                        .insert(m.payload.get("sync_id").and_then(Value::as_str).unwrap_or_default().to_owned());
                }
            }
            // A newer cairn or engram may sync entities this one does not know.
            _ => report.skipped += 1,
        }
    }
    retry_deferred(tx, now, &just_deferred, &mut report)?;
    Ok(report)
}

fn invalid(at: &str, why: impl std::fmt::Display) -> CairnError {
    CairnError::new(ErrorCode::SyncMutationInvalid, format!("{at}: {why}"))
}

/// The row's key from its payload, else the mutation's; `None` when both are empty.
fn given_key(payload: &Value, field: &str, entity_key: &str) -> Option<String> {
    payload
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .or(Some(entity_key.trim()).filter(|s| !s.is_empty()))
        .map(str::to_owned)
}

fn record<T: serde::de::DeserializeOwned>(payload: &Value, at: &str) -> Result<T> {
    T::deserialize(payload).map_err(|e| invalid(at, e))
}

fn apply_session(tx: &Connection, m: &Mutation, at: &str, report: &mut ApplyReport) -> Result<()> {
    if m.op == "delete" {
        // A session goes when its memories do; a remote session delete is not replayed.
        report.skipped += 1;
        return Ok(());
    }
    let s: SessionRecord = record(&m.payload, at)?;
    if s.id.trim().is_empty() {
        return Err(invalid(at, "id is empty"));
    }
    let project = normalize_project(s.project.as_deref().unwrap_or_default()).0;
    let directory = redact(s.directory.as_deref().unwrap_or_default()).0;
    let started_at = s
        .started_at
        .as_deref()
        .and_then(crate::clock::normalize_ts)
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned());
    let ended_at = s.ended_at.as_deref().and_then(crate::clock::normalize_ts);
    let summary = redact_opt(s.summary.as_deref()).filter(|x| !x.is_empty());
    let session = CleanSession {
        id: &s.id,
        project,
        directory,
        agent: redact(s.agent.as_deref().unwrap_or_default()).0,
        parent_id: s.parent_id.as_deref(),
        started_at,
        ended_at,
        summary,
    };
    let inserted = rows::insert_session_if_new(tx, &session)?;
    // Fill in only what is missing, and only when something is: a no-op update would be
    // journaled again.
    let filled = rows::fill_session(tx, &session, STUB_DIRECTORY)?;
    if inserted + filled > 0 {
        report.applied += 1;
    } else {
        report.skipped += 1;
    }
    Ok(())
}

/// Rows may name a session that did not travel with them.
fn ensure_session(tx: &Connection, id: &str, project: &str) -> Result<()> {
    rows::ensure_recovered_session(tx, id, project, STUB_DIRECTORY)
}

fn apply_prompt(tx: &Connection, m: &Mutation, now: &str, at: &str, report: &mut ApplyReport) -> Result<()> {
    let given = given_key(&m.payload, "sync_id", &m.entity_key);
    if m.op == "delete" {
        let sync_id = given.ok_or_else(|| invalid(at, "sync_id is empty"))?;
        let gone = rows::delete_prompt(tx, &sync_id)?;
        if gone > 0 {
            report.applied += 1;
        } else {
            report.skipped += 1;
        }
        return Ok(());
    }
    let mut p: PromptRecord = record(&m.payload, at)?;
    p.id = None;
    p.sync_id = given;
    if p.session_id.trim().is_empty() {
        return Err(invalid(at, "session_id is empty"));
    }
    ensure_session(tx, &p.session_id, &normalize_project(p.project.as_deref().unwrap_or_default()).0)?;
    let mut counts = ImportReport::default();
    import_prompts(tx, std::slice::from_ref(&p), now, &mut counts).map_err(|e| invalid(at, e.message))?;
    if counts.prompts_imported > 0 {
        report.applied += 1;
    } else {
        report.skipped += 1;
    }
    Ok(())
}

/// A memory's version as stored.
fn version_of(local: &LocalMemory) -> Version {
    Version::of(local.hlc.as_deref(), &local.updated_at)
}

fn tombstone(tx: &Connection, sync_id: &str) -> Result<Option<Version>> {
    Ok(rows::tombstone_stamp(tx, sync_id)?.as_deref().and_then(Version::parse))
}

/// Move this store's clock past a stamp it received.
fn observe(tx: &Connection, v: &Version) -> Result<()> {
    rows::observe_clock(tx, v.wall_ms, v.counter)
}

/// What decides between two versions with the same stamp.
fn text_key(kind: &str, title: &str, content: &str, deleted: bool) -> String {
    format!("{}{kind}\u{1f}{title}\u{1f}{}", u8::from(deleted), normalized_hash(content))
}

fn apply_observation(tx: &Connection, m: &Mutation, now: &str, at: &str, report: &mut ApplyReport) -> Result<()> {
    let payload = &m.payload;
    // engram's older chunks carry no sync_id: one is derived from the row, as an import does.
    let given = given_key(payload, "sync_id", &m.entity_key);
    let hlc = payload.get("hlc").and_then(Value::as_str);
    let hard = payload.get("hard_delete").and_then(Value::as_bool).unwrap_or(false);
    let deleted = m.op == "delete" || payload.get("deleted").and_then(Value::as_bool).unwrap_or(false);
    // engram's delete payloads may carry no text: the delete alone travels.
    if hard || (deleted && payload.get("title").is_none()) {
        let sync_id = given.ok_or_else(|| invalid(at, "sync_id is empty"))?;
        return apply_bare_delete(tx, &sync_id, payload, hlc, hard, now, report);
    }
    let mut rec: ObservationRecord = record(payload, at)?;
    let carried = provenance::carried(payload).map_err(|why| invalid(at, why))?;
    let carried = carried.as_ref();
    rec.id = None;
    rec.sync_id = given;
    if deleted && rec.deleted_at.is_none() {
        rec.deleted_at = rec.updated_at.clone().or_else(|| Some(now.to_owned()));
    }
    if !deleted {
        rec.deleted_at = None;
    }
    let row = clean_observation(&rec, now, at).map_err(|e| invalid(at, e.message))?;
    let sync_id = row.sync_id.clone();
    let remote = Version::of(hlc, &row.updated_at);
    observe(tx, &remote)?;
    if tombstone(tx, &sync_id)?.is_some_and(|t| t >= remote) {
        report.skipped += 1;
        return Ok(());
    }
    let remote_key = text_key(&row.kind, &row.title, &row.content, row.deleted_at.is_some());
    let Some(local) = rows::local_memory(tx, &sync_id)? else {
        ensure_session(tx, &row.session_id, &row.project)?;
        insert_memory(tx, &row, hlc)?;
        if carried.is_some() {
            let id = rows::local_memory(tx, &sync_id)?.map(|m| m.id).ok_or_else(|| invalid(at, "not inserted"))?;
            provenance::record(tx, id, carried, now)?;
        }
        report.applied += 1;
        return Ok(());
    };
    let local_version = version_of(&local);
    let local_key = text_key(&local.kind, &local.title, &local.content, local.deleted);
    let same_text = local.kind == row.kind && local.title == row.title && local.content == row.content;
    match compare((&remote, &remote_key), (&local_version, &local_key)) {
        // The same version again, perhaps now with the provenance its writer recorded later.
        Ordering::Equal => {
            if provenance::record(tx, local.id, carried, now)? {
                report.applied += 1;
            } else {
                report.skipped += 1;
            }
        }
        Ordering::Greater => {
            if !same_text {
                keep_text(tx, local.id, &local.kind, &local.title, &local.content, now)?;
            }
            ensure_session(tx, &row.session_id, &row.project)?;
            // The provenance follows the version that wins: dropped before the overwrite, written
            // after it, so the journal entry of the overwrite says what this store then holds.
            provenance::drop_if_rewritten(tx, local.id, carried, same_text)?;
            update_memory(tx, local.id, &row, hlc)?;
            provenance::record(tx, local.id, carried, now)?;
            report.applied += 1;
            // The remote writer had not seen this store's version: both edits stand, one as
            // the memory and one as its revision, for a person to judge.
            let prev = payload.get("prev_hlc").and_then(Value::as_str);
            if !same_text && local.hlc.is_some() && prev != local.hlc.as_deref() {
                flag_contested(tx, &sync_id, &remote, &local_version, now)?;
                report.conflicts += 1;
            }
        }
        Ordering::Less => {
            report.skipped += 1;
            if !same_text && !text_known(tx, local.id, &row)? {
                keep_text(tx, local.id, &row.kind, &row.title, &row.content, now)?;
                if local_version.node != remote.node {
                    flag_contested(tx, &sync_id, &remote, &local_version, now)?;
                    report.conflicts += 1;
                }
            }
        }
    }
    Ok(())
}

/// A delete without the memory's text: hard (the row goes, a tombstone stays) or soft.
fn apply_bare_delete(
    tx: &Connection,
    sync_id: &str,
    payload: &Value,
    hlc: Option<&str>,
    hard: bool,
    now: &str,
    report: &mut ApplyReport,
) -> Result<()> {
    let when = payload.get("deleted_at").and_then(Value::as_str).unwrap_or(now);
    let remote = Version::of(hlc, when);
    observe(tx, &remote)?;
    if tombstone(tx, sync_id)?.is_some_and(|t| t >= remote) {
        report.skipped += 1;
        return Ok(());
    }
    let local = rows::local_memory(tx, sync_id)?;
    if local.as_ref().is_some_and(|l| version_of(l) > remote) {
        report.skipped += 1;
        return Ok(());
    }
    // The tombstone first: the delete trigger journals the stamp it finds there.
    rows::write_tombstone(tx, sync_id, &remote.stamp(), when)?;
    match local {
        Some(local) if !hard => rows::soft_delete_memory(tx, local.id, when, hlc)?,
        Some(local) => {
            rows::hard_delete_memory(tx, local.id)?;
            rows::orphan_relations(tx, sync_id, now)?;
        }
        None => {}
    }
    report.applied += 1;
    Ok(())
}

fn insert_memory(tx: &Connection, r: &CleanObservation, hlc: Option<&str>) -> Result<()> {
    write_new_observation(tx, None, r, hlc)
}

fn update_memory(tx: &Connection, id: i64, r: &CleanObservation, hlc: Option<&str>) -> Result<()> {
    overwrite_observation(tx, id, r, Stamp::Remote(hlc))
}

/// Whether this text is already one of the memory's revisions.
fn text_known(tx: &Connection, id: i64, r: &CleanObservation) -> Result<bool> {
    rows::revision_exists(tx, id, &r.kind, &r.title, &r.content)
}

/// Keep a text the memory no longer shows as its newest revision (once).
fn keep_text(tx: &Connection, id: i64, kind: &str, title: &str, content: &str, now: &str) -> Result<()> {
    rows::keep_revision(tx, id, kind, title, content, now)
}

/// A pending relation of the memory with itself: the two raced versions, one of them now a
/// revision. Its id comes from the pair, so every store that sees the race flags it once.
fn flag_contested(tx: &Connection, sync_id: &str, a: &Version, b: &Version, now: &str) -> Result<()> {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    let digest = Sha256::digest(format!("{sync_id}\u{1f}{}\u{1f}{}", lo.stamp(), hi.stamp()).as_bytes());
    let relation_id = format!("rel-sync-{}", &hex::encode(digest)[..16]);
    rows::insert_contested(
        tx,
        &relation_id,
        sync_id,
        "edited on two machines at once: the newer edit is shown, the other is kept as a revision",
        now,
    )
}

fn apply_relation(
    tx: &Connection,
    source: &str,
    payload: &Value,
    now: &str,
    at: &str,
    report: &mut ApplyReport,
) -> Result<()> {
    let r: RelationRecord = record(payload, at)?;
    if r.sync_id.trim().is_empty() || r.source_id.trim().is_empty() || r.target_id.trim().is_empty() {
        return Err(invalid(at, "sync_id, source_id and target_id are required"));
    }
    if !rows::memory_exists(tx, &r.source_id)? || !rows::memory_exists(tx, &r.target_id)? {
        defer(tx, source, &r.sync_id, payload, now)?;
        report.deferred += 1;
        return Ok(());
    }
    if upsert_relation(tx, &r, payload, now)? {
        report.applied += 1;
    } else {
        report.skipped += 1;
    }
    Ok(())
}

/// Last writer wins, as for memories. Whether it changed the row.
fn upsert_relation(tx: &Connection, r: &RelationRecord, payload: &Value, now: &str) -> Result<bool> {
    let hlc = payload.get("hlc").and_then(Value::as_str);
    let created_at = r.created_at.as_deref().and_then(crate::clock::normalize_ts).unwrap_or_else(|| now.to_owned());
    let updated_at = r.updated_at.as_deref().and_then(crate::clock::normalize_ts).unwrap_or_else(|| created_at.clone());
    let remote = Version::of(hlc, &updated_at);
    observe(tx, &remote)?;
    let local = rows::relation_version(tx, &r.sync_id)?;
    let relation = r.relation.as_deref().unwrap_or("pending");
    let status = r.judgment_status.as_deref().unwrap_or("pending");
    if let Some(RelationVersion {
        hlc: local_hlc,
        updated_at: local_updated,
        relation: local_relation,
        status: local_status,
    }) = local
    {
        let local_version = Version::of(local_hlc.as_deref(), &local_updated);
        let remote_key = format!("{relation}\u{1f}{status}");
        let local_key = format!("{local_relation}\u{1f}{local_status}");
        if compare((&remote, &remote_key), (&local_version, &local_key)) != Ordering::Greater {
            return Ok(false);
        }
    }
    let row = CleanRelation {
        sync_id: &r.sync_id,
        source_id: &r.source_id,
        target_id: &r.target_id,
        relation,
        reason: redact_opt(r.reason.as_deref()),
        evidence: redact_opt(r.evidence.as_deref()),
        confidence: r.confidence,
        judgment_status: status,
        marked_by_actor: redact_opt(r.marked_by_actor.as_deref()),
        marked_by_kind: redact_opt(r.marked_by_kind.as_deref()),
        marked_by_model: redact_opt(r.marked_by_model.as_deref()),
        session_id: r.session_id.as_deref().filter(|s| !s.trim().is_empty()),
        created_at: &created_at,
        updated_at: &updated_at,
    };
    write_relation(tx, &row, Stamp::Remote(hlc))?;
    Ok(true)
}

fn defer(tx: &Connection, source: &str, sync_id: &str, payload: &Value, now: &str) -> Result<()> {
    rows::defer_relation(tx, source, sync_id, &payload.to_string(), now)
}

/// Apply the waiting relations whose memories are here now; count a try for the others.
fn retry_deferred(
    tx: &Connection,
    now: &str,
    just_deferred: &std::collections::HashSet<String>,
    report: &mut ApplyReport,
) -> Result<()> {
    let waiting = rows::pending_deferred(tx)?;
    for (sync_id, payload) in waiting {
        if just_deferred.contains(&sync_id) {
            continue;
        }
        let value: Value = serde_json::from_str(&payload).unwrap_or(Value::Null);
        let Ok(r) = RelationRecord::deserialize(&value) else {
            rows::bury_deferred(tx, &sync_id, "not a relation", now)?;
            continue;
        };
        if rows::memory_exists(tx, &r.source_id)? && rows::memory_exists(tx, &r.target_id)? {
            upsert_relation(tx, &r, &value, now)?;
            rows::drop_deferred(tx, &sync_id)?;
            report.deferred_applied += 1;
            continue;
        }
        rows::count_deferred_try(tx, &sync_id, "its memories have not arrived", DEFERRED_TRIES, now)?;
    }
    Ok(())
}
