//! The one error body of the HTTP door, rendered from cairn-core's error table.
//!
//! `{"error": {"code", "message", "hint"}, "code", "detail"}`: the nested object is what
//! cairn's own clients read (the daemon client, MCP forwarding); the top-level `code` is where
//! engram's later plugins look for a refusal code (`body.code`), and `detail` repeats the
//! message for clients that print the body. Every failure of every route, including unknown
//! routes, wrong methods, refused requests and oversized bodies, answers with this shape.

use std::borrow::Cow;

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_core::{CairnError, ErrorCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// Same as `error.code` (engram's plugins read a top-level `code`).
    #[schema(value_type = ErrorCodeName)]
    pub code: String,
    /// Same as `error.message`.
    pub detail: String,
}

/// What went wrong, with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code from cairn's error table; clients match on it.
    #[schema(value_type = ErrorCodeName)]
    pub code: String,
    /// For people.
    pub message: String,
    /// What to do next, when there is something to say.
    pub hint: Option<String>,
}

/// Documentation-only: the codes of the error table, listed in the OpenAPI document.
pub struct ErrorCodeName;

impl utoipa::PartialSchema for ErrorCodeName {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("A code of cairn's error table (stable: never renamed or reused)."))
            .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
            .into()
    }
}

impl ToSchema for ErrorCodeName {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ErrorCode")
    }
}

/// An error on its way to the client: a [`CairnError`] plus any headers the status needs
/// (`WWW-Authenticate` on 401).
#[derive(Debug)]
pub struct ApiError {
    error: CairnError,
    /// A list, not a `HeaderMap`: errors travel in `Result`s and should stay small.
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CairnError::new(code, message).into()
    }

    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.error.hint = Some(hint.into());
        self
    }

    #[must_use]
    pub fn with_header(mut self, name: HeaderName, value: &'static str) -> Self {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }

    /// What went wrong, for a door that shows it another way (the web page).
    pub fn message(&self) -> &str {
        &self.error.message
    }

    pub fn code(&self) -> ErrorCode {
        self.error.code
    }
}

impl From<CairnError> for ApiError {
    fn from(error: CairnError) -> Self {
        Self { error, headers: Vec::new() }
    }
}

impl From<&CairnError> for ErrorBody {
    fn from(err: &CairnError) -> Self {
        let code = err.code.as_str().to_owned();
        ErrorBody {
            error: ErrorDetail { code: code.clone(), message: err.message.clone(), hint: err.hint.clone() },
            code,
            detail: err.message.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.error.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            // The client gets the message too; the log keeps it for whoever runs the daemon.
            tracing::error!(code = %self.error.code, message = %self.error.message, "request failed");
        }
        let mut response = (status, Json(ErrorBody::from(&self.error))).into_response();
        for (name, value) in self.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_carries_the_code_twice_and_the_hint() {
        let err = CairnError::observation_not_found(7);
        let body = serde_json::to_value(ErrorBody::from(&err)).unwrap();
        assert_eq!(body["error"]["code"], "observation_not_found");
        assert_eq!(body["code"], "observation_not_found");
        assert_eq!(body["detail"], body["error"]["message"]);
        assert!(body["error"]["hint"].is_string());
    }

    #[test]
    fn status_comes_from_the_table() {
        let res =
            ApiError::new(ErrorCode::Unauthorized, "no").with_header(axum::http::header::WWW_AUTHENTICATE, "Bearer");
        let res = res.into_response();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(res.headers()["www-authenticate"], "Bearer");
        assert_eq!(ApiError::new(ErrorCode::MethodNotAllowed, "x").into_response().status(), 405);
    }
}
