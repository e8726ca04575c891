//! The hub's failures: each one a stable code ([`HubErrorCode`], in cairn-wire's table with its
//! HTTP status and engram's error class, since clients match on it), a message, and the body
//! the hub answers with.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
pub use cairn_wire::hub::HubErrorCode;
use cairn_wire::sync::RejectedEntry;

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
    pub rejected: Vec<RejectedEntry>,
}

impl HubError {
    pub fn new(code: HubErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), invalid: Vec::new(), rejected: Vec::new() }
    }

    /// This failure as the refusal of entry `index` of a push.
    pub fn rejected_entry(&self, index: usize) -> RejectedEntry {
        RejectedEntry {
            index,
            status: self.code.http_status(),
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
        let status = StatusCode::from_u16(self.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(body)).into_response();
        if self.code == HubErrorCode::DatabaseUnavailable {
            // A hint for clients without their own backoff; cairn's clients back off with jitter.
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
        }
        response
    }
}
