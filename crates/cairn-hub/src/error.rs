//! The hub's failures: each one a stable code, an HTTP status and engram's error class.
//!
//! Codes are part of the wire format (docs/HUB.md): add new ones, never rename one.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Every failure the hub answers or a `cairn hub` command reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubErrorCode {
    /// No `Authorization: Bearer` header.
    AuthRequired,
    /// A bearer token the hub never issued.
    TokenUnknown,
    /// A revoked token.
    TokenRevoked,
    /// A token past its expiry.
    TokenExpired,
    /// The token has no grant on a project of the request (engram's code for it).
    PolicyForbidden,
    /// A push to a project the token may only read.
    ReadOnlyGrant,
    /// A push of more entries than the hub takes at once.
    TooManyEntries,
    /// A push body over the byte limit.
    PayloadTooLarge,
    /// A body that is not the JSON the route takes.
    MalformedBody,
    /// A push without entries.
    EmptyEntries,
    /// An entry without a project (engram's code for it).
    EmptyProject,
    /// An entry field missing, empty, too long or of the wrong type.
    InvalidEntry,
    /// A relation entry whose payload lacks a required field (engram's code for it).
    ValidationError,
    /// A NUL character (U+0000) in an entry's text or payload, or in `created_by`: PostgreSQL
    /// stores none, in text or JSONB.
    NulCharacter,
    /// A `mutation_id` that is empty or blank, longer than 512 characters, or holds a control
    /// character.
    InvalidMutationId,
    /// A pull query parameter that is not what the route takes.
    InvalidQuery,
    /// No route here.
    NotFound,
    /// PostgreSQL cannot be reached or is restarting: back off and retry.
    DatabaseUnavailable,
    /// Anything else the hub did not expect.
    Internal,
    /// `cairn hub serve` on a non-loopback address without TLS.
    PlainHttpNotLoopback,
    /// A TLS certificate or key that cannot be read or used, or only one of the two.
    TlsConfigInvalid,
    /// The listen address cannot be resolved or bound.
    ListenFailed,
    /// A database URL that does not parse.
    InvalidDatabaseUrl,
    /// `cairn hub token` arguments that make no token (no project, a bad duration).
    InvalidTokenRequest,
    /// `cairn hub token revoke` of an id that does not exist.
    TokenNotFound,
}

impl HubErrorCode {
    /// Every code, for the uniqueness test and the docs.
    pub const ALL: [HubErrorCode; 25] = [
        Self::AuthRequired,
        Self::TokenUnknown,
        Self::TokenRevoked,
        Self::TokenExpired,
        Self::PolicyForbidden,
        Self::ReadOnlyGrant,
        Self::TooManyEntries,
        Self::PayloadTooLarge,
        Self::MalformedBody,
        Self::EmptyEntries,
        Self::EmptyProject,
        Self::InvalidEntry,
        Self::ValidationError,
        Self::NulCharacter,
        Self::InvalidMutationId,
        Self::InvalidQuery,
        Self::NotFound,
        Self::DatabaseUnavailable,
        Self::Internal,
        Self::PlainHttpNotLoopback,
        Self::TlsConfigInvalid,
        Self::ListenFailed,
        Self::InvalidDatabaseUrl,
        Self::InvalidTokenRequest,
        Self::TokenNotFound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthRequired => "auth_required",
            Self::TokenUnknown => "token_unknown",
            Self::TokenRevoked => "token_revoked",
            Self::TokenExpired => "token_expired",
            Self::PolicyForbidden => "policy_forbidden",
            Self::ReadOnlyGrant => "read_only_grant",
            Self::TooManyEntries => "too_many_entries",
            Self::PayloadTooLarge => "payload_too_large",
            Self::MalformedBody => "malformed_body",
            Self::EmptyEntries => "empty_entries",
            Self::EmptyProject => "empty_project",
            Self::InvalidEntry => "invalid_entry",
            Self::ValidationError => "validation_error",
            Self::NulCharacter => "nul_character",
            Self::InvalidMutationId => "invalid_mutation_id",
            Self::InvalidQuery => "invalid_query",
            Self::NotFound => "not_found",
            Self::DatabaseUnavailable => "database_unavailable",
            Self::Internal => "internal_error",
            Self::PlainHttpNotLoopback => "plain_http_not_loopback",
            Self::TlsConfigInvalid => "tls_config_invalid",
            Self::ListenFailed => "listen_failed",
            Self::InvalidDatabaseUrl => "invalid_database_url",
            Self::InvalidTokenRequest => "invalid_token_request",
            Self::TokenNotFound => "token_not_found",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::AuthRequired | Self::TokenUnknown | Self::TokenRevoked | Self::TokenExpired => {
                StatusCode::UNAUTHORIZED
            }
            Self::PolicyForbidden | Self::ReadOnlyGrant => StatusCode::FORBIDDEN,
            Self::TooManyEntries | Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::MalformedBody
            | Self::EmptyEntries
            | Self::EmptyProject
            | Self::InvalidEntry
            | Self::ValidationError
            | Self::NulCharacter
            | Self::InvalidMutationId
            | Self::InvalidQuery
            | Self::PlainHttpNotLoopback
            | Self::TlsConfigInvalid
            | Self::InvalidDatabaseUrl
            | Self::InvalidTokenRequest => StatusCode::BAD_REQUEST,
            Self::NotFound | Self::TokenNotFound => StatusCode::NOT_FOUND,
            Self::DatabaseUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal | Self::ListenFailed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// engram's `error_class`: `policy` (auth and grants), `invalid_request` (the client must
    /// change the request), `transient` (retry later), `internal`.
    pub fn class(self) -> &'static str {
        match self.status() {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => "policy",
            StatusCode::SERVICE_UNAVAILABLE => "transient",
            StatusCode::INTERNAL_SERVER_ERROR => "internal",
            _ => "invalid_request",
        }
    }
}

/// One invalid field of one push entry (engram's `invalid[]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InvalidField {
    pub index: usize,
    pub field: String,
    pub entity: String,
}

/// A failure with its code, a message for people, for relation validation the fields, and
/// for a push none of whose entries could be stored each entry's refusal.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HubError {
    pub code: HubErrorCode,
    pub message: String,
    pub invalid: Vec<InvalidField>,
    pub rejected: Vec<crate::wire::RejectedEntry>,
}

impl HubError {
    pub fn new(code: HubErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), invalid: Vec::new(), rejected: Vec::new() }
    }

    /// This failure as the refusal of entry `index` of a push.
    pub fn rejected_entry(&self, index: usize) -> crate::wire::RejectedEntry {
        crate::wire::RejectedEntry {
            index,
            status: self.code.status().as_u16(),
            error_class: self.code.class().to_owned(),
            error_code: self.code.as_str().to_owned(),
            error: self.message.clone(),
        }
    }

    /// Classify a PostgreSQL failure: a lost or refused connection, a server shutting down or
    /// out of connections is `database_unavailable` (clients back off); the rest is internal.
    pub fn from_db(err: &tokio_postgres::Error) -> Self {
        if db_unavailable(err) {
            return Self::new(HubErrorCode::DatabaseUnavailable, format!("PostgreSQL is unavailable: {err}"));
        }
        tracing::error!(error = %err, "database error");
        Self::new(HubErrorCode::Internal, "the hub's database answered with an error")
    }
}

fn db_unavailable(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    match err.code() {
        // 08: connection exception, 57: operator intervention (shutdown, restart),
        // 53: insufficient resources (too many connections).
        Some(state) => ["08", "57", "53"].iter().any(|class| state.code().starts_with(class)),
        // No SQLSTATE: the socket failed (refused, reset) before PostgreSQL could answer.
        None => true,
    }
}

impl From<deadpool_postgres::PoolError> for HubError {
    fn from(err: deadpool_postgres::PoolError) -> Self {
        match err {
            deadpool_postgres::PoolError::Backend(e) => Self::from_db(&e),
            other => Self::new(HubErrorCode::DatabaseUnavailable, format!("PostgreSQL is unavailable: {other}")),
        }
    }
}

impl From<tokio_postgres::Error> for HubError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::from_db(&err)
    }
}

impl IntoResponse for HubError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({
            "error_class": self.code.class(),
            "error_code": self.code.as_str(),
            "error": self.message,
        });
        if self.code == HubErrorCode::ValidationError {
            body["reason_code"] = "validation_error".into();
            body["invalid"] = serde_json::to_value(&self.invalid).unwrap_or_default();
        }
        if !self.rejected.is_empty() {
            body["rejected"] = serde_json::to_value(&self.rejected).unwrap_or_default();
        }
        let mut response = (self.code.status(), axum::Json(body)).into_response();
        if self.code == HubErrorCode::DatabaseUnavailable {
            // A hint for clients without their own backoff; cairn's clients back off with jitter.
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::HubErrorCode;

    #[test]
    fn codes_are_unique_and_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in HubErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "duplicate code {}", code.as_str());
            assert!(code.as_str().chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        }
    }
}
