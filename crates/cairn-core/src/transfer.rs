//! Export the whole store as JSON and import it back, idempotently by sync_id (engram #531:
//! importing twice tripled its rows). Import reads engram's export shape too, and
//! [`Store::import_engram_db`] reads an engram database directly.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::clock::normalize_ts;
use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{Observation, Prompt, Relation, Session};
use crate::store::Store;
use crate::store::foreign::ForeignDb;
use crate::store::transfer::{self as rows, ExportRows};
use crate::store::transfer::{CleanObservation, Stamp, overwrite_observation, write_new_observation};
use crate::text::{
    MAX_CONTENT_BYTES, MAX_TITLE_BYTES, RedactFields, Redaction, Scope, fit_content, normalize_project,
    normalize_topic_key, normalized_hash, redact, redact_opt,
};

/// Format version written in exports (engram's, so its tools read ours).
pub const EXPORT_VERSION: &str = "0.1.0";

/// The largest local id an import keeps. Beyond it the row gets a new id: ids past 2^53 are
/// not exact in JavaScript clients, and an id of `i64::MAX` would leave SQLite's AUTOINCREMENT
/// nothing to count up to, failing every later save with "database or disk is full".
pub const MAX_KEPT_ID: i64 = (1 << 53) - 1;

/// Revision and duplicate counts from a file are capped here: saves add one to them, and past
/// `i64::MAX` SQLite turns the sum into a float that no later read of the row accepts.
pub const MAX_COUNT: i64 = (1 << 53) - 1;

/// Everything in the store, including soft-deleted memories (their deletion must travel too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExportData {
    pub version: String,
    pub generator: String,
    pub exported_at: String,
    pub sessions: Vec<Session>,
    pub observations: Vec<Observation>,
    pub prompts: Vec<Prompt>,
    pub relations: Vec<Relation>,
}

/// What an import did. Importing the same file twice changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportReport {
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub sessions_imported: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub observations_imported: usize,
    /// Existing memories replaced by a newer version from the file.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub observations_updated: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub prompts_imported: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub relations_imported: usize,
    /// Records already present (same sync_id, not newer): importing twice changes nothing.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub skipped: usize,
}

impl Store {
    /// Export everything, or one project's sessions, memories and prompts.
    pub fn export(&self, project: Option<&str>) -> Result<ExportData> {
        let project = project.map(|p| normalize_project(p).0);
        let ExportRows { mut sessions, observations, prompts, relations } = self.export_rows(project.as_deref())?;
        // Sessions referenced by exported rows must travel with them, whatever their project.
        if project.is_some() {
            let known: HashSet<String> = sessions.iter().map(|s| s.id.clone()).collect();
            let needed: HashSet<&String> = observations
                .iter()
                .map(|o| &o.session_id)
                .chain(prompts.iter().map(|p| &p.session_id))
                .filter(|id| !known.contains(*id))
                .collect();
            for id in needed {
                sessions.push(self.get_session(id)?);
            }
        }
        let mut data = ExportData {
            version: EXPORT_VERSION.to_owned(),
            generator: format!("cairn {}", env!("CARGO_PKG_VERSION")),
            exported_at: self.now(),
            sessions,
            observations,
            prompts,
            relations,
        };
        // An export leaves the machine: whatever was stored before redaction (or with
        // `redact_secrets` off) goes out redacted.
        data.redact_fields(Redaction::OUTBOUND);
        Ok(data)
    }

    /// Import an export file's bytes (cairn's or engram's format). All or nothing.
    pub fn import_bytes(&mut self, bytes: &[u8]) -> Result<ImportReport> {
        let data = parse_import(bytes)?;
        self.import(&data)
    }

    /// Import parsed records in one transaction: on any invalid record nothing changes.
    pub fn import(&mut self, data: &ImportData) -> Result<ImportReport> {
        let (data, _) = self.redacted(data);
        let data = &data;
        let now = self.now();
        self.write(|tx| {
            let mut report = ImportReport::default();
            import_sessions(tx, &data.sessions, &mut report)?;
            ensure_referenced_sessions(tx, data, &now)?;
            import_observations(tx, &data.observations, &now, &mut report)?;
            import_prompts(tx, &data.prompts, &now, &mut report)?;
            import_relations(tx, &data.relations, &now, &mut report)?;
            Ok(report)
        })
    }

    /// Import an engram database (read-only; engram may be running). Idempotent.
    pub fn import_engram_db(&mut self, path: &Path) -> Result<ImportReport> {
        let data = read_engram_db(path)?;
        self.import(&data)
    }
}

/// Where engram keeps its database under a home directory.
pub fn default_engram_db(home: &Path) -> std::path::PathBuf {
    home.join(".engram").join("engram.db")
}

/// Records as found in an import file: everything optional that engram or older cairn
/// versions may leave out; checked when applied.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ImportData {
    #[serde(default)]
    pub sessions: Vec<SessionRecord>,
    #[serde(default)]
    pub observations: Vec<ObservationRecord>,
    #[serde(default)]
    pub prompts: Vec<PromptRecord>,
    #[serde(default)]
    pub relations: Vec<RelationRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub project: Option<String>,
    pub directory: Option<String>,
    pub agent: Option<String>,
    pub parent_id: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub summary: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ObservationRecord {
    pub id: Option<i64>,
    pub sync_id: Option<String>,
    pub session_id: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub title: String,
    pub content: String,
    pub tool_name: Option<String>,
    pub project: Option<String>,
    pub scope: Option<String>,
    pub topic_key: Option<String>,
    pub revision_count: Option<i64>,
    pub duplicate_count: Option<i64>,
    pub pinned: Option<bool>,
    pub last_seen_at: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub deleted_at: Option<String>,
    pub review_after: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PromptRecord {
    pub id: Option<i64>,
    pub sync_id: Option<String>,
    pub session_id: String,
    pub content: String,
    pub project: Option<String>,
    pub created_at: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RelationRecord {
    pub sync_id: String,
    pub source_id: String,
    pub target_id: String,
    pub relation: Option<String>,
    pub reason: Option<String>,
    pub evidence: Option<String>,
    pub confidence: Option<f64>,
    pub judgment_status: Option<String>,
    pub marked_by_actor: Option<String>,
    pub marked_by_kind: Option<String>,
    pub marked_by_model: Option<String>,
    pub session_id: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

/// Parse an import file, with errors that say where it is broken.
pub fn parse_import(bytes: &[u8]) -> Result<ImportData> {
    let value = parse_import_value(bytes)?;
    serde_json::from_value(value).map_err(|e| invalid_import(format!("a record has the wrong shape: {e}")))
}

/// Check an import file is UTF-8 JSON shaped like an export; the JSON, unconverted (so a
/// client can forward it).
pub fn parse_import_value(bytes: &[u8]) -> Result<serde_json::Value> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        CairnError::new(
            ErrorCode::InvalidUtf8,
            format!("the import file is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| invalid_import(format!("not valid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(invalid_import("expected a JSON object with sessions, observations and prompts"));
    };
    if !["sessions", "observations", "prompts", "relations"].iter().any(|k| object.contains_key(*k)) {
        return Err(invalid_import("this is not a cairn or engram export (no sessions, observations or prompts)"));
    }
    Ok(value)
}

fn invalid_import(message: impl Into<String>) -> CairnError {
    CairnError::new(ErrorCode::InvalidImport, message).with_hint("nothing was imported; fix the file or re-export it")
}

/// A timestamp from a file: RFC 3339 or engram's SQLite format; missing ones take `fallback`.
fn timestamp(raw: Option<&str>, fallback: &str, at: &str) -> Result<String> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(fallback.to_owned()),
        Some(s) => normalize_ts(s).ok_or_else(|| invalid_import(format!("{at}: {s:?} is not a timestamp"))),
    }
}

fn optional_timestamp(raw: Option<&str>, at: &str) -> Result<Option<String>> {
    match raw.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => normalize_ts(s).map(Some).ok_or_else(|| invalid_import(format!("{at}: {s:?} is not a timestamp"))),
    }
}

fn import_sessions(tx: &Connection, sessions: &[SessionRecord], report: &mut ImportReport) -> Result<()> {
    for (i, s) in sessions.iter().enumerate() {
        let at = format!("sessions[{i}]");
        if s.id.trim().is_empty() {
            return Err(invalid_import(format!("{at}: id is empty")));
        }
        let started_at = timestamp(s.started_at.as_deref(), "1970-01-01T00:00:00.000Z", &at)?;
        let ended_at = optional_timestamp(s.ended_at.as_deref(), &at)?;
        let exists = rows::session_exists(tx, &s.id)?;
        rows::merge_session(
            tx,
            &rows::CleanSession {
                id: &s.id,
                project: normalize_project(s.project.as_deref().unwrap_or_default()).0,
                directory: redact(s.directory.as_deref().unwrap_or_default()).0,
                agent: redact(s.agent.as_deref().unwrap_or_default()).0,
                parent_id: s.parent_id.as_deref(),
                started_at,
                ended_at,
                summary: redact_opt(s.summary.as_deref()).filter(|x| !x.is_empty()),
            },
        )?;
        if exists {
            report.skipped += 1;
        } else {
            report.sessions_imported += 1;
        }
    }
    Ok(())
}

/// Rows may name sessions the file does not carry (engram exports by project): recreate them
/// as stubs rather than refuse the import.
fn ensure_referenced_sessions(tx: &Connection, data: &ImportData, now: &str) -> Result<()> {
    let referenced = data
        .observations
        .iter()
        .map(|o| (&o.session_id, &o.project))
        .chain(data.prompts.iter().map(|p| (&p.session_id, &p.project)));
    for (i, (id, project)) in referenced.enumerate() {
        if id.trim().is_empty() {
            return Err(invalid_import(format!("record {i}: session_id is empty")));
        }
        let project = normalize_project(project.as_deref().unwrap_or_default()).0;
        rows::ensure_stub_session(tx, id, &project, now)?;
    }
    Ok(())
}

/// A stable sync id for legacy rows without one, so re-importing them stays idempotent.
fn derived_sync_id(prefix: &str, parts: &[&str]) -> String {
    let hash = normalized_hash(&parts.join("\u{1f}"));
    format!("{prefix}-{}", &hash[..32])
}

fn import_observations(
    tx: &Connection,
    rows: &[ObservationRecord],
    now: &str,
    report: &mut ImportReport,
) -> Result<()> {
    for (i, o) in rows.iter().enumerate() {
        let at = format!("observations[{i}]");
        let row = clean_observation(o, now, &at)?;
        let existing = rows::observation_version(tx, &row.sync_id)?;
        match existing {
            None => {
                insert_observation(tx, o.id, &row)?;
                report.observations_imported += 1;
            }
            Some((id, updated_at)) if row.updated_at > updated_at => {
                overwrite_observation(tx, id, &row, Stamp::Local)?;
                report.observations_updated += 1;
            }
            Some(_) => report.skipped += 1,
        }
    }
    Ok(())
}

pub(crate) fn clean_observation(o: &ObservationRecord, now: &str, at: &str) -> Result<CleanObservation> {
    if o.title.trim().is_empty() || o.content.trim().is_empty() {
        return Err(invalid_import(format!("{at}: title and content must not be empty")));
    }
    let created_at = timestamp(o.created_at.as_deref(), now, at)?;
    let content = fit_content("content", &redact(&o.content).0, MAX_CONTENT_BYTES)?.text;
    let title = fit_content("title", &redact(&o.title).0, MAX_TITLE_BYTES)?.text;
    let sync_id = match o.sync_id.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => s.to_owned(),
        None => derived_sync_id("obs", &[&o.session_id, &created_at, &title, &content]),
    };
    Ok(CleanObservation {
        sync_id,
        session_id: o.session_id.clone(),
        kind: o.kind.as_deref().map(str::trim).filter(|k| !k.is_empty()).unwrap_or("manual").to_lowercase(),
        title,
        content,
        tool_name: redact_opt(o.tool_name.as_deref()).filter(|t| !t.is_empty()),
        project: normalize_project(o.project.as_deref().unwrap_or_default()).0,
        scope: Scope::parse(o.scope.as_deref().unwrap_or("project")),
        topic_key: o.topic_key.as_deref().and_then(|k| normalize_topic_key(&redact(k).0)),
        revision_count: o.revision_count.unwrap_or(1).clamp(1, MAX_COUNT),
        duplicate_count: o.duplicate_count.unwrap_or(1).clamp(1, MAX_COUNT),
        pinned: o.pinned.unwrap_or(false),
        last_seen_at: optional_timestamp(o.last_seen_at.as_deref(), at)?,
        updated_at: timestamp(o.updated_at.as_deref(), &created_at, at)?,
        created_at,
        deleted_at: optional_timestamp(o.deleted_at.as_deref(), at)?,
        review_after: optional_timestamp(o.review_after.as_deref(), at)?,
    })
}

fn insert_observation(tx: &Connection, wanted_id: Option<i64>, r: &CleanObservation) -> Result<()> {
    // Keep the original local id when it is free, so `#id` references in memories still hold
    // after a restore.
    let id_free = match wanted_id {
        Some(id) if (1..=MAX_KEPT_ID).contains(&id) => !rows::observation_id_taken(tx, id)?,
        _ => false,
    };
    write_new_observation(tx, if id_free { wanted_id } else { None }, r, None)
}

pub(crate) fn import_prompts(
    tx: &Connection,
    rows: &[PromptRecord],
    now: &str,
    report: &mut ImportReport,
) -> Result<()> {
    for (i, p) in rows.iter().enumerate() {
        let at = format!("prompts[{i}]");
        if p.content.trim().is_empty() {
            return Err(invalid_import(format!("{at}: content is empty")));
        }
        let created_at = timestamp(p.created_at.as_deref(), now, &at)?;
        let content = fit_content("content", &redact(&p.content).0, MAX_CONTENT_BYTES)?.text;
        let sync_id = match p.sync_id.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) => s.to_owned(),
            None => derived_sync_id("prompt", &[&p.session_id, &created_at, &content]),
        };
        if rows::prompt_exists(tx, &sync_id)? {
            report.skipped += 1;
            continue;
        }
        let id_free = match p.id {
            Some(id) if (1..=MAX_KEPT_ID).contains(&id) => !rows::prompt_id_taken(tx, id)?,
            _ => false,
        };
        rows::insert_prompt(
            tx,
            if id_free { p.id } else { None },
            &sync_id,
            &p.session_id,
            &content,
            &normalize_project(p.project.as_deref().unwrap_or_default()).0,
            &created_at,
        )?;
        report.prompts_imported += 1;
    }
    Ok(())
}

fn import_relations(tx: &Connection, rows: &[RelationRecord], now: &str, report: &mut ImportReport) -> Result<()> {
    for (i, r) in rows.iter().enumerate() {
        let at = format!("relations[{i}]");
        if r.sync_id.trim().is_empty() || r.source_id.trim().is_empty() || r.target_id.trim().is_empty() {
            return Err(invalid_import(format!("{at}: sync_id, source_id and target_id are required")));
        }
        let created_at = timestamp(r.created_at.as_deref(), now, &at)?;
        let updated_at = timestamp(r.updated_at.as_deref(), &created_at, &at)?;
        let existing = rows::relation_updated_at(tx, &r.sync_id)?;
        if existing.as_deref().is_some_and(|current| current >= updated_at.as_str()) {
            report.skipped += 1;
            continue;
        }
        rows::write_relation(
            tx,
            &rows::CleanRelation {
                sync_id: &r.sync_id,
                source_id: &r.source_id,
                target_id: &r.target_id,
                relation: r.relation.as_deref().unwrap_or("pending"),
                reason: redact_opt(r.reason.as_deref()),
                evidence: redact_opt(r.evidence.as_deref()),
                confidence: r.confidence,
                judgment_status: r.judgment_status.as_deref().unwrap_or("pending"),
                marked_by_actor: redact_opt(r.marked_by_actor.as_deref()),
                marked_by_kind: redact_opt(r.marked_by_kind.as_deref()),
                marked_by_model: redact_opt(r.marked_by_model.as_deref()),
                session_id: r.session_id.as_deref().filter(|s| !s.trim().is_empty()),
                created_at: &created_at,
                updated_at: &updated_at,
            },
            Stamp::Local,
        )?;
        report.relations_imported += 1;
    }
    Ok(())
}

/// Read an engram database into import records, checking its shape first.
pub fn read_engram_db(path: &Path) -> Result<ImportData> {
    if !path.exists() {
        return Err(CairnError::new(ErrorCode::FileNotFound, format!("no engram database at {}", path.display()))
            .with_hint("give its path: cairn import-engram /path/to/engram.db"));
    }
    let db = ForeignDb::open_read_only(path).map_err(|e| unrecognized(path, &e.to_string()))?;
    db.set_busy_timeout(crate::store::BUSY_TIMEOUT)?;
    let reader = EngramReader { db: &db, path };
    reader.require_table("sessions", &["id"])?;
    reader.require_table("observations", &["id", "session_id", "title", "content"])?;
    Ok(ImportData {
        sessions: reader.sessions()?,
        observations: reader.observations()?,
        prompts: reader.prompts()?,
        relations: reader.relations()?,
    })
}

fn unrecognized(path: &Path, why: &str) -> CairnError {
    CairnError::new(
        ErrorCode::EngramDbUnrecognized,
        format!("{} is not an engram database cairn can read: {why}", path.display()),
    )
    .with_hint("check the path (engram keeps ~/.engram/engram.db); nothing was imported")
}

struct EngramReader<'a> {
    db: &'a ForeignDb,
    path: &'a Path,
}

impl EngramReader<'_> {
    fn columns(&self, table: &str) -> Result<Vec<String>> {
        self.db.columns(table).map_err(|e| unrecognized(self.path, &e.to_string()))
    }

    fn require_table(&self, table: &str, needed: &[&str]) -> Result<()> {
        let cols = self.columns(table)?;
        if cols.is_empty() {
            return Err(unrecognized(self.path, &format!("it has no {table} table")));
        }
        if let Some(missing) = needed.iter().find(|c| !cols.iter().any(|x| x == *c)) {
            return Err(unrecognized(self.path, &format!("table {table} has no column {missing}")));
        }
        Ok(())
    }

    /// The `wanted` columns of every row of `table` (none without the table), each as text, NULL
    /// where the table lacks the column: engram's schema grew over time.
    fn rows<T>(&self, table: &str, wanted: &[&str], map: impl Fn(&[Option<String>]) -> T) -> Result<Vec<T>> {
        let cols = self.columns(table)?;
        if cols.is_empty() {
            return Ok(Vec::new());
        }
        let values = self.db.text_rows(table, wanted, &cols).map_err(|e| unrecognized(self.path, &e.to_string()))?;
        Ok(values.iter().map(|v| map(v)).collect())
    }

    fn sessions(&self) -> Result<Vec<SessionRecord>> {
        self.rows("sessions", &["id", "project", "directory", "started_at", "ended_at", "summary"], |v| SessionRecord {
            id: v[0].clone().unwrap_or_default(),
            project: v[1].clone(),
            directory: v[2].clone(),
            agent: None,
            parent_id: None,
            started_at: v[3].clone(),
            ended_at: v[4].clone(),
            summary: v[5].clone(),
        })
    }

    fn observations(&self) -> Result<Vec<ObservationRecord>> {
        let wanted = [
            "id",
            "sync_id",
            "session_id",
            "type",
            "title",
            "content",
            "tool_name",
            "project",
            "scope",
            "topic_key",
            "revision_count",
            "duplicate_count",
            "last_seen_at",
            "created_at",
            "updated_at",
            "deleted_at",
            "review_after",
        ];
        self.rows("observations", &wanted, |v| {
            let id = v[0].as_deref().and_then(|s| s.parse::<i64>().ok());
            ObservationRecord {
                id,
                sync_id: v[1].clone().or_else(|| id.map(|id| format!("engram-obs-{id}"))),
                session_id: v[2].clone().unwrap_or_default(),
                kind: v[3].clone(),
                title: v[4].clone().unwrap_or_default(),
                content: v[5].clone().unwrap_or_default(),
                tool_name: v[6].clone(),
                project: v[7].clone(),
                scope: v[8].clone(),
                topic_key: v[9].clone(),
                revision_count: v[10].as_deref().and_then(|s| s.parse().ok()),
                duplicate_count: v[11].as_deref().and_then(|s| s.parse().ok()),
                pinned: None,
                last_seen_at: v[12].clone(),
                created_at: v[13].clone(),
                updated_at: v[14].clone(),
                deleted_at: v[15].clone(),
                review_after: v[16].clone(),
            }
        })
    }

    fn prompts(&self) -> Result<Vec<PromptRecord>> {
        self.rows("user_prompts", &["id", "sync_id", "session_id", "content", "project", "created_at"], |v| {
            let id = v[0].as_deref().and_then(|s| s.parse::<i64>().ok());
            PromptRecord {
                id,
                sync_id: v[1].clone().or_else(|| id.map(|id| format!("engram-prompt-{id}"))),
                session_id: v[2].clone().unwrap_or_default(),
                content: v[3].clone().unwrap_or_default(),
                project: v[4].clone(),
                created_at: v[5].clone(),
            }
        })
    }

    fn relations(&self) -> Result<Vec<RelationRecord>> {
        let wanted = [
            "sync_id",
            "source_id",
            "target_id",
            "relation",
            "reason",
            "evidence",
            "confidence",
            "judgment_status",
            "marked_by_actor",
            "marked_by_kind",
            "marked_by_model",
            "session_id",
            "created_at",
            "updated_at",
        ];
        self.rows("memory_relations", &wanted, |v| RelationRecord {
            sync_id: v[0].clone().unwrap_or_default(),
            source_id: v[1].clone().unwrap_or_default(),
            target_id: v[2].clone().unwrap_or_default(),
            relation: v[3].clone(),
            reason: v[4].clone(),
            evidence: v[5].clone(),
            confidence: v[6].as_deref().and_then(|s| s.parse().ok()),
            judgment_status: v[7].clone(),
            marked_by_actor: v[8].clone(),
            marked_by_kind: v[9].clone(),
            marked_by_model: v[10].clone(),
            session_id: v[11].clone(),
            created_at: v[12].clone(),
            updated_at: v[13].clone(),
        })
    }
}
