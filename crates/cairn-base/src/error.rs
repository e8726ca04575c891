//! The one error table shared by every door (HTTP, MCP, CLI).
//!
//! Each [`ErrorCode`] has a stable snake_case name, an HTTP status and a CLI exit code. Doors
//! never invent codes: they render a [`CairnError`] from here.

use std::fmt;

// code => name, HTTP status, exit code (the macro: cairn-wire's, which the hub's table uses too)
cairn_wire::error_table! {
    /// Stable error codes. The string form (see [`ErrorCode::as_str`]) is part of the public
    /// contract: clients match on it, so a code is never renamed or reused.
    pub enum ErrorCode;
    /// A required text field (title, content, query, id...) is empty or blank.
    EmptyField => "empty_field", 400, 3;
    /// An argument has the wrong form (bad id, unknown sort, out of range...).
    InvalidArgument => "invalid_argument", 400, 3;
    /// Input is not valid UTF-8.
    InvalidUtf8 => "invalid_utf8", 400, 3;
    /// Text to be stored holds a NUL character (U+0000): never text anyone means, and a hub
    /// (PostgreSQL) cannot store it. Other control characters are text like any other.
    NulCharacter => "nul_character", 400, 3;
    /// Content is larger than cairn accepts at all (beyond truncation).
    ContentTooLarge => "content_too_large", 413, 3;
    /// No observation with that id (or it was deleted).
    ObservationNotFound => "observation_not_found", 404, 4;
    /// No session with that id.
    SessionNotFound => "session_not_found", 404, 4;
    /// No prompt with that id.
    PromptNotFound => "prompt_not_found", 404, 4;
    /// No relation with that id.
    RelationNotFound => "relation_not_found", 404, 4;
    /// A `supersedes` verdict that would close a cycle (A replaces B, which already replaces A,
    /// directly or through others): refused, so one memory of the chain is always current.
    SupersessionCycle => "supersession_cycle", 409, 5;
    /// The session already belongs to another project.
    SessionProjectMismatch => "session_project_mismatch", 400, 3;
    /// A session that still has observations cannot be deleted.
    SessionHasObservations => "session_has_observations", 409, 5;
    /// An import file is malformed, truncated or inconsistent.
    InvalidImport => "invalid_import", 400, 3;
    /// A file that should exist does not.
    FileNotFound => "file_not_found", 404, 4;
    /// An engram database has a shape cairn does not recognise.
    EngramDbUnrecognized => "engram_db_unrecognized", 400, 3;
    /// A project config file (`.cairn/config.json`) is malformed.
    InvalidProjectConfig => "invalid_project_config", 400, 3;
    /// The database file is not a database, or fails its integrity check.
    DatabaseCorrupt => "database_corrupt", 500, 6;
    /// The database was written by a newer cairn.
    SchemaTooNew => "schema_too_new", 500, 6;
    /// A read-only open found a database not yet upgraded to this cairn's schema (a writer
    /// upgrades it: the daemon or any command that writes).
    SchemaTooOld => "schema_too_old", 503, 6;
    /// The data directory or database cannot be written.
    DataDirNotWritable => "data_dir_not_writable", 500, 6;
    /// The disk (or the process's file size limit) has no room for the write: it was refused
    /// whole, nothing acknowledged is lost, reads go on, and the next write succeeds once
    /// space is back. 507 (Insufficient Storage): not a 503, which clients retry at once.
    DiskFull => "disk_full", 507, 6;
    /// The database stayed locked past the busy timeout.
    DatabaseBusy => "database_busy", 503, 6;
    /// The configuration file or an environment setting is invalid.
    InvalidConfig => "invalid_config", 400, 3;
    /// The daemon could not be reached or answered badly.
    DaemonUnavailable => "daemon_unavailable", 503, 6;
    /// A write reached the daemon, which then went away before answering: it may or may not
    /// have been applied, so it is not retried (a retry could apply it twice).
    OperationInterrupted => "operation_interrupted", 503, 6;
    /// A request body exceeds the size limit.
    PayloadTooLarge => "payload_too_large", 413, 3;
    /// The request is refused: foreign Host or Origin, cross-site browser request.
    Forbidden => "forbidden", 403, 3;
    /// A bearer token is required or was wrong.
    Unauthorized => "unauthorized", 401, 3;
    /// A change sent with a body type a browser page may send anywhere (`text/plain`, a form):
    /// the JSON routes take `application/json` (or no declared type) only.
    UnsupportedMediaType => "unsupported_media_type", 415, 3;
    /// An HTTP/1.1 request without the `Host` header every HTTP/1.1 request must carry.
    MissingHost => "missing_host", 400, 3;
    /// No such route.
    RouteNotFound => "route_not_found", 404, 4;
    /// A request body is not well-formed JSON.
    InvalidJson => "invalid_json", 400, 3;
    /// The route exists but not with this HTTP method.
    MethodNotAllowed => "method_not_allowed", 405, 1;
    /// No embedding model is installed or configured where one is needed.
    ModelMissing => "model_missing", 503, 6;
    /// The embedding model's files are unreadable, truncated or of an unsupported kind.
    ModelInvalid => "model_invalid", 500, 1;
    /// A downloaded or copied file does not have the expected sha256.
    ChecksumMismatch => "checksum_mismatch", 500, 1;
    /// The embedding endpoint is down, slow, or answered badly.
    EmbedderUnavailable => "embedder_unavailable", 503, 6;
    /// The working directory holds several repositories and nothing names the project.
    AmbiguousProject => "ambiguous_project", 400, 3;
    /// No conversation-history session with that id.
    HistorySessionNotFound => "history_session_not_found", 404, 4;
    /// A turn number outside the session's (visible) turns; the hint gives the range.
    TurnOutOfRange => "turn_out_of_range", 404, 4;
    /// No message with that id in the session.
    MessageNotFound => "message_not_found", 404, 4;
    /// The message exists but is hidden from the caller (its own session after compaction).
    MessageNotVisible => "message_not_visible", 404, 4;
    /// No part with that id in the message, or one without content to pull (image, file).
    PartNotFound => "part_not_found", 404, 4;
    /// A host's history database stayed locked by the running host.
    HistorySourceLocked => "history_source_locked", 503, 6;
    /// A host's history storage has a shape (schema version) cairn does not know.
    HistorySourceUnsupported => "history_source_unsupported", 422, 3;
    /// A host's history file is missing or cannot be read.
    HistorySourceUnreadable => "history_source_unreadable", 422, 3;
    /// The daemon that answered serves another data dir (a stale daemon file whose port another
    /// store's daemon now holds): the request was not run.
    DaemonMismatch => "daemon_mismatch", 409, 5;
    /// The folder given to `cairn export --obsidian` is a file, not a folder.
    VaultNotADirectory => "vault_not_a_directory", 400, 3;
    /// The Obsidian export folder (or a note in it) cannot be written.
    VaultNotWritable => "vault_not_writable", 400, 3;
    /// The export state file in the Obsidian folder (`.cairn-export.json`) is not cairn's.
    VaultStateInvalid => "vault_state_invalid", 400, 3;
    /// The Obsidian export folder holds the export of another project (or of all of them).
    VaultProjectMismatch => "vault_project_mismatch", 400, 3;
    /// A sync chunk cannot be read: truncated or corrupt gzip, or not JSON.
    SyncChunkCorrupt => "sync_chunk_corrupt", 422, 3;
    /// A sync chunk's content does not hash to the id the manifest gives it.
    SyncChunkHashMismatch => "sync_chunk_hash_mismatch", 422, 3;
    /// A sync chunk listed in the manifest is not in the chunks folder.
    SyncChunkMissing => "sync_chunk_missing", 404, 4;
    /// A sync chunk or manifest was written by a newer format than this cairn reads.
    SyncFormatTooNew => "sync_format_too_new", 422, 3;
    /// A sync mutation (in a chunk or pulled) lacks a required field or has the wrong shape.
    SyncMutationInvalid => "sync_mutation_invalid", 422, 3;
    /// The sync manifest (`manifest.json`) is not the JSON cairn and engram write.
    SyncManifestInvalid => "sync_manifest_invalid", 422, 3;
    /// Another import of the same repository is running (the daemon runs one at a time).
    SyncBusy => "sync_busy", 409, 5;
    /// A symbolic link where a chunk folder, its manifest or a chunk belongs: git commits links,
    /// and sync follows none (it could lead out of the repository).
    SyncSymlinkRefused => "sync_symlink_refused", 422, 3;
    /// A FIFO, device, socket or folder where a chunk folder's file belongs (or a file where its
    /// folder belongs): only regular files are read, so nothing blocks or streams forever.
    SyncFileNotRegular => "sync_file_not_regular", 422, 3;
    /// A manifest or chunk larger than sync reads (checked before reading, and again while
    /// inflating a chunk).
    SyncFileTooLarge => "sync_file_too_large", 422, 3;
    /// One entry of a sync manifest is malformed (no hex `id`, wrong types): refused alone, the
    /// other entries are applied.
    SyncManifestEntryInvalid => "sync_manifest_entry_invalid", 422, 3;
    /// `cairn remote sync` or `/sync/remote` with no hub set (`cairn remote add`).
    RemoteNotConfigured => "remote_not_configured", 409, 5;
    /// A hub address that is not `https://HOST[:PORT]` (or `http://` on loopback).
    RemoteUrlInvalid => "remote_url_invalid", 400, 3;
    /// The hub did not answer, or answered that it cannot serve now (its database is down):
    /// retried with backoff.
    RemoteUnreachable => "remote_unreachable", 503, 6;
    /// The hub refused the token, a project's grant or a push (its code is in the message):
    /// retrying the same thing will not help.
    RemoteRefused => "remote_refused", 409, 5;
    /// The hub answered something that is not the mutation protocol.
    RemoteAnswerInvalid => "remote_answer_invalid", 502, 1;
    /// No LLM is configured (`cairn llm use …`), or the one configured lacks what it needs (its
    /// API key's variable, its model file, its command): the user has to act.
    LlmNotConfigured => "llm_not_configured", 503, 6;
    /// The LLM is down, slow, rate-limited or answered something unusable: retried with backoff.
    LlmUnavailable => "llm_unavailable", 503, 6;
    /// The LLM or its provider refused the request (a content filter, a request it rejects):
    /// retrying the same request will not help.
    LlmRefused => "llm_refused", 502, 1;
    /// Today's token budget for remote LLM calls is spent (`[llm] daily_token_budget`).
    LlmBudgetSpent => "llm_budget_spent", 429, 1;
    /// Anything else: a bug or an I/O failure cairn did not anticipate.
    Internal => "internal", 500, 1;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with a stable code, a message for people and an optional hint saying what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CairnError {
    pub code: ErrorCode,
    pub message: String,
    pub hint: Option<String>,
}

impl CairnError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), hint: None }
    }

    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn empty(field: &str) -> Self {
        Self::new(ErrorCode::EmptyField, format!("{field} must not be empty"))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn observation_not_found(id: i64) -> Self {
        Self::new(ErrorCode::ObservationNotFound, format!("observation #{id} not found"))
            .with_hint("run `cairn search` to find the id, or check it was not deleted")
    }
}

pub type Result<T, E = CairnError> = std::result::Result<T, E>;

impl From<rusqlite::Error> for CairnError {
    fn from(err: rusqlite::Error) -> Self {
        classify_sqlite_error(&err)
    }
}

impl From<serde_json::Error> for CairnError {
    fn from(err: serde_json::Error) -> Self {
        Self::internal(format!("json: {err}"))
    }
}

/// Map SQLite failures to codes a user can act on: busy, read-only, corrupt. Anything else is
/// internal.
fn classify_sqlite_error(err: &rusqlite::Error) -> CairnError {
    use rusqlite::ffi::ErrorCode as Sql;
    if let rusqlite::Error::SqliteFailure(failure, _) = err {
        match failure.code {
            Sql::DatabaseBusy | Sql::DatabaseLocked => {
                return CairnError::new(ErrorCode::DatabaseBusy, format!("database is busy: {err}"))
                    .with_hint("another process held the database too long; retry");
            }
            Sql::ReadOnly | Sql::CannotOpen | Sql::PermissionDenied => {
                return CairnError::new(ErrorCode::DataDirNotWritable, format!("cannot write the database: {err}"))
                    .with_hint("check the permissions of the data dir (cairn doctor)");
            }
            // SQLite says FULL when a write came back short (ENOSPC, or a file size limit
            // reached part-way), IOERR_WRITE when it failed outright (EFBIG past a file size
            // limit, EDQUOT), IOERR_TRUNCATE or IOERR_SHMSIZE when a file could not grow:
            // either way the write did not fit.
            Sql::DiskFull => return disk_full(err),
            Sql::SystemIoFailure
                if [
                    rusqlite::ffi::SQLITE_IOERR_WRITE,
                    rusqlite::ffi::SQLITE_IOERR_TRUNCATE,
                    rusqlite::ffi::SQLITE_IOERR_SHMSIZE,
                ]
                .contains(&failure.extended_code) =>
            {
                return disk_full(err);
            }
            Sql::SystemIoFailure => {
                // Which I/O failed, for the log and a bug report.
                return CairnError::internal(format!("database: {err} (SQLite code {})", failure.extended_code));
            }
            Sql::NotADatabase | Sql::DatabaseCorrupt => {
                return CairnError::new(ErrorCode::DatabaseCorrupt, format!("the database file is damaged: {err}"))
                    .with_hint("restore from `cairn export` output, or move the file aside");
            }
            _ => {}
        }
    }
    CairnError::internal(format!("database: {err}"))
}

/// A write the disk had no room for (SQLite rolled it back: the store is as before it).
pub fn disk_full(err: impl fmt::Display) -> CairnError {
    CairnError::new(ErrorCode::DiskFull, format!("the disk is full, the write was not stored: {err}"))
        .with_hint("free some space (cairn gc, cairn history prune); cairn takes writes again by itself")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_unique_names_that_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate {code}");
            assert_eq!(ErrorCode::from_name(code.as_str()), Some(*code));
            assert!(code.http_status() >= 400);
        }
        assert_eq!(ErrorCode::from_name("nope"), None);
    }

    #[test]
    fn exit_codes_follow_the_status_classes() {
        for code in ErrorCode::ALL {
            let unusable_store = matches!(
                code,
                ErrorCode::DatabaseCorrupt
                    | ErrorCode::SchemaTooNew
                    | ErrorCode::DataDirNotWritable
                    | ErrorCode::DiskFull
            );
            let expected = match code.http_status() {
                400 | 401 | 403 | 413 | 415 | 422 => 3,
                404 => 4,
                409 => 5,
                503 => 6,
                _ if unusable_store => 6,
                _ => 1,
            };
            assert_eq!(code.exit_code(), expected, "{code}");
        }
    }
}
