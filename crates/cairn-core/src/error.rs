//! The one error table shared by every door (HTTP, MCP, CLI).
//!
//! Each [`ErrorCode`] has a stable snake_case name, an HTTP status and a CLI exit code. Doors
//! never invent codes: they render a [`CairnError`] from here.

use std::fmt;

/// Stable error codes. The string form (see [`ErrorCode::as_str`]) is part of the public
/// contract: clients match on it, so a code is never renamed or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A required text field (title, content, query, id...) is empty or blank.
    EmptyField,
    /// An argument has the wrong form (bad id, unknown sort, out of range...).
    InvalidArgument,
    /// Input is not valid UTF-8.
    InvalidUtf8,
    /// Content is larger than cairn accepts at all (beyond truncation).
    ContentTooLarge,
    /// No observation with that id (or it was deleted).
    ObservationNotFound,
    /// No session with that id.
    SessionNotFound,
    /// No prompt with that id.
    PromptNotFound,
    /// No relation with that id.
    RelationNotFound,
    /// The session already belongs to another project.
    SessionProjectMismatch,
    /// A session that still has observations cannot be deleted.
    SessionHasObservations,
    /// An import file is malformed, truncated or inconsistent.
    InvalidImport,
    /// A file that should exist does not.
    FileNotFound,
    /// An engram database has a shape cairn does not recognise.
    EngramDbUnrecognized,
    /// A project config file (`.cairn/config.json`) is malformed.
    InvalidProjectConfig,
    /// The working directory holds several repositories and nothing names the project.
    AmbiguousProject,
    /// The database file is not a database, or fails its integrity check.
    DatabaseCorrupt,
    /// The database was written by a newer cairn.
    SchemaTooNew,
    /// The data directory or database cannot be written.
    DataDirNotWritable,
    /// The database stayed locked past the busy timeout.
    DatabaseBusy,
    /// The configuration file or an environment setting is invalid.
    InvalidConfig,
    /// The daemon could not be reached or answered badly.
    DaemonUnavailable,
    /// A write reached the daemon, which then went away before answering: it may or may not
    /// have been applied, so it is not retried (a retry could apply it twice).
    OperationInterrupted,
    /// A request body exceeds the size limit.
    PayloadTooLarge,
    /// The request is refused: foreign Host or Origin, cross-site browser request.
    Forbidden,
    /// A bearer token is required or was wrong.
    Unauthorized,
    /// No such route.
    RouteNotFound,
    /// A request body is not well-formed JSON.
    InvalidJson,
    /// The route exists but not with this HTTP method.
    MethodNotAllowed,
    /// No embedding model is installed or configured where one is needed.
    ModelMissing,
    /// The embedding model's files are unreadable, truncated or of an unsupported kind.
    ModelInvalid,
    /// A downloaded or copied file does not have the expected sha256.
    ChecksumMismatch,
    /// The embedding endpoint is down, slow, or answered badly.
    EmbedderUnavailable,
    /// No conversation-history session with that id.
    HistorySessionNotFound,
    /// A turn number outside the session's (visible) turns; the hint gives the range.
    TurnOutOfRange,
    /// No message with that id in the session.
    MessageNotFound,
    /// The message exists but is hidden from the caller (its own session after compaction).
    MessageNotVisible,
    /// No part with that id in the message, or one without content to pull (image, file).
    PartNotFound,
    /// A host's history database stayed locked by the running host.
    HistorySourceLocked,
    /// A host's history storage has a shape (schema version) cairn does not know.
    HistorySourceUnsupported,
    /// A host's history file is missing or cannot be read.
    HistorySourceUnreadable,
    /// The folder given to `cairn export --obsidian` is a file, not a folder.
    VaultNotADirectory,
    /// The Obsidian export folder (or a note in it) cannot be written.
    VaultNotWritable,
    /// The export state file in the Obsidian folder (`.cairn-export.json`) is not cairn's.
    VaultStateInvalid,
    /// The Obsidian export folder holds the export of another project (or of all of them).
    VaultProjectMismatch,
    /// Anything else: a bug or an I/O failure cairn did not anticipate.
    Internal,
}

impl ErrorCode {
    /// Every code, for docs and the OpenAPI document.
    pub const ALL: &'static [ErrorCode] = &[
        Self::EmptyField,
        Self::InvalidArgument,
        Self::InvalidUtf8,
        Self::ContentTooLarge,
        Self::ObservationNotFound,
        Self::SessionNotFound,
        Self::PromptNotFound,
        Self::RelationNotFound,
        Self::SessionProjectMismatch,
        Self::SessionHasObservations,
        Self::InvalidImport,
        Self::FileNotFound,
        Self::EngramDbUnrecognized,
        Self::InvalidProjectConfig,
        Self::DatabaseCorrupt,
        Self::SchemaTooNew,
        Self::DataDirNotWritable,
        Self::DatabaseBusy,
        Self::InvalidConfig,
        Self::DaemonUnavailable,
        Self::OperationInterrupted,
        Self::PayloadTooLarge,
        Self::Forbidden,
        Self::Unauthorized,
        Self::RouteNotFound,
        Self::InvalidJson,
        Self::MethodNotAllowed,
        Self::ModelMissing,
        Self::ModelInvalid,
        Self::ChecksumMismatch,
        Self::EmbedderUnavailable,
        Self::AmbiguousProject,
        Self::HistorySessionNotFound,
        Self::TurnOutOfRange,
        Self::MessageNotFound,
        Self::MessageNotVisible,
        Self::PartNotFound,
        Self::HistorySourceLocked,
        Self::HistorySourceUnsupported,
        Self::HistorySourceUnreadable,
        Self::VaultNotADirectory,
        Self::VaultNotWritable,
        Self::VaultStateInvalid,
        Self::VaultProjectMismatch,
        Self::Internal,
    ];

    /// The code with this name.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        Self::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::EmptyField => "empty_field",
            Self::InvalidArgument => "invalid_argument",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::ContentTooLarge => "content_too_large",
            Self::ObservationNotFound => "observation_not_found",
            Self::SessionNotFound => "session_not_found",
            Self::PromptNotFound => "prompt_not_found",
            Self::RelationNotFound => "relation_not_found",
            Self::SessionProjectMismatch => "session_project_mismatch",
            Self::SessionHasObservations => "session_has_observations",
            Self::InvalidImport => "invalid_import",
            Self::FileNotFound => "file_not_found",
            Self::EngramDbUnrecognized => "engram_db_unrecognized",
            Self::InvalidProjectConfig => "invalid_project_config",
            Self::DatabaseCorrupt => "database_corrupt",
            Self::SchemaTooNew => "schema_too_new",
            Self::DataDirNotWritable => "data_dir_not_writable",
            Self::DatabaseBusy => "database_busy",
            Self::InvalidConfig => "invalid_config",
            Self::DaemonUnavailable => "daemon_unavailable",
            Self::OperationInterrupted => "operation_interrupted",
            Self::PayloadTooLarge => "payload_too_large",
            Self::Forbidden => "forbidden",
            Self::Unauthorized => "unauthorized",
            Self::RouteNotFound => "route_not_found",
            Self::InvalidJson => "invalid_json",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::ModelMissing => "model_missing",
            Self::ModelInvalid => "model_invalid",
            Self::ChecksumMismatch => "checksum_mismatch",
            Self::EmbedderUnavailable => "embedder_unavailable",
            Self::AmbiguousProject => "ambiguous_project",
            Self::HistorySessionNotFound => "history_session_not_found",
            Self::TurnOutOfRange => "turn_out_of_range",
            Self::MessageNotFound => "message_not_found",
            Self::MessageNotVisible => "message_not_visible",
            Self::PartNotFound => "part_not_found",
            Self::HistorySourceLocked => "history_source_locked",
            Self::HistorySourceUnsupported => "history_source_unsupported",
            Self::HistorySourceUnreadable => "history_source_unreadable",
            Self::VaultNotADirectory => "vault_not_a_directory",
            Self::VaultNotWritable => "vault_not_writable",
            Self::VaultStateInvalid => "vault_state_invalid",
            Self::VaultProjectMismatch => "vault_project_mismatch",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status a server answers with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::EmptyField
            | Self::InvalidArgument
            | Self::InvalidUtf8
            | Self::SessionProjectMismatch
            | Self::InvalidImport
            | Self::EngramDbUnrecognized
            | Self::InvalidProjectConfig
            | Self::AmbiguousProject
            | Self::InvalidConfig
            | Self::VaultNotADirectory
            | Self::VaultNotWritable
            | Self::VaultStateInvalid
            | Self::VaultProjectMismatch
            | Self::InvalidJson => 400,
            Self::ObservationNotFound
            | Self::SessionNotFound
            | Self::PromptNotFound
            | Self::RelationNotFound
            | Self::FileNotFound
            | Self::RouteNotFound
            | Self::HistorySessionNotFound
            | Self::TurnOutOfRange
            | Self::MessageNotFound
            | Self::MessageNotVisible
            | Self::PartNotFound => 404,
            Self::HistorySourceUnsupported | Self::HistorySourceUnreadable => 422,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::MethodNotAllowed => 405,
            Self::SessionHasObservations => 409,
            Self::ContentTooLarge | Self::PayloadTooLarge => 413,
            Self::DatabaseBusy
            | Self::DaemonUnavailable
            | Self::OperationInterrupted
            | Self::EmbedderUnavailable
            | Self::ModelMissing
            | Self::HistorySourceLocked => 503,
            Self::ModelInvalid | Self::ChecksumMismatch => 500,
            Self::DatabaseCorrupt | Self::SchemaTooNew | Self::DataDirNotWritable | Self::Internal => 500,
        }
    }

    /// The CLI exit code (documented in README "Exit codes").
    pub fn exit_code(self) -> i32 {
        match self.http_status() {
            400 | 401 | 403 | 413 | 422 => 3,
            404 => 4,
            409 => 5,
            503 => 6,
            _ => match self {
                Self::DatabaseCorrupt | Self::SchemaTooNew | Self::DataDirNotWritable => 6,
                _ => 1,
            },
        }
    }
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
            Sql::NotADatabase | Sql::DatabaseCorrupt => {
                return CairnError::new(ErrorCode::DatabaseCorrupt, format!("the database file is damaged: {err}"))
                    .with_hint("restore from `cairn export` output, or move the file aside");
            }
            _ => {}
        }
    }
    CairnError::internal(format!("database: {err}"))
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
}
