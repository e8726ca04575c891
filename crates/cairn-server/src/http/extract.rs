//! Extractors that turn every kind of bad input into the error body with a stable code, instead
//! of axum's plain-text rejections (and its 422 for well-formed JSON of the wrong shape).
//!
//! | input | status | code |
//! |---|---|---|
//! | body is not UTF-8 | 400 | `invalid_utf8` |
//! | body is not JSON (syntax, trailing bytes, empty) | 400 | `invalid_json` |
//! | JSON of the wrong shape (missing field, wrong type) | 400 | `invalid_argument` |
//! | body over the route's limit | 413 | `payload_too_large` |
//! | query parameter of the wrong type | 400 | `invalid_argument` |
//! | path id that is not a positive integer | 400 | `invalid_argument` |
//!
//! Bodies are read as JSON whatever their `Content-Type` says, none included (engram's hooks
//! post with curl and name `application/json`); a change declared as a type a web page may send
//! anywhere (`text/plain`, a form) is refused before it gets here (`guard`).

use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use cairn_core::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use super::error::ApiError;

/// A JSON body.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        Ok(Self(parse_json(&bytes)?))
    }
}

/// A JSON object body every field of which is optional: an empty body, or `null`, means the
/// defaults (engram's hooks end sessions with no body at all). Anything but an object is
/// refused: serde would take a struct as an array of its fields (`[null]`). A body of only
/// whitespace is not empty: it is no JSON, and is refused like any other (a client that sends
/// one meant to send something).
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.is_empty() {
            return Ok(Self(T::default()));
        }
        match parse_json::<serde_json::Value>(&bytes)? {
            serde_json::Value::Null => Ok(Self(T::default())),
            body @ serde_json::Value::Object(_) => Ok(Self(serde_json::from_value(body).map_err(|e| {
                ApiError::new(ErrorCode::InvalidArgument, format!("the request body has the wrong shape: {e}"))
                    .with_hint("see /openapi.json for the fields of this route")
            })?)),
            _ => Err(ApiError::new(ErrorCode::InvalidArgument, "the request body must be a JSON object (or empty)")
                .with_hint("see /openapi.json for the fields of this route")),
        }
    }
}

/// The raw body, within the route's size limit.
pub async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rejection| match rejection {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => payload_too_large(),
        other => {
            ApiError::new(ErrorCode::InvalidArgument, format!("cannot read the request body: {}", other.body_text()))
        }
    })
}

pub fn payload_too_large() -> ApiError {
    ApiError::new(ErrorCode::PayloadTooLarge, "the request body is larger than this route accepts")
        .with_hint("memories are capped anyway; for a large import use `cairn import FILE`")
}

/// Parse a body as JSON, with a code that says which of UTF-8, syntax or shape is wrong.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidUtf8,
            format!("the request body is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })?;
    if text.trim().is_empty() {
        return Err(ApiError::new(ErrorCode::InvalidJson, "the request body is empty or only whitespace")
            .with_hint("send a JSON object"));
    }
    serde_json::from_str(text).map_err(|e| match e.classify() {
        Category::Data => {
            ApiError::new(ErrorCode::InvalidArgument, format!("the request body has the wrong shape: {e}"))
                .with_hint("see /openapi.json for the fields of this route")
        }
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::new(ErrorCode::InvalidJson, format!("the request body is not valid JSON: {e}"))
        }
    })
}

/// Query parameters.
pub struct ApiQuery<T>(pub T);

/// Why a query string was refused: its source names the parameter and the problem ("limit:
/// invalid digit found in string"). The JSON routes and the web page's search say the same.
pub(crate) fn query_rejection_reason(rejection: &QueryRejection) -> String {
    std::error::Error::source(rejection).map_or_else(|| rejection.body_text(), ToString::to_string)
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(value) =
            Query::<T>::from_request_parts(parts, state).await.map_err(|rejection: QueryRejection| {
                let why = query_rejection_reason(&rejection);
                ApiError::new(ErrorCode::InvalidArgument, format!("bad query parameter: {why}"))
            })?;
        Ok(Self(value))
    }
}

/// A positive integer id from the path (`/observations/{id}`). Signs, fractions, `0`, paths
/// (`..%2Fetc`) and numbers beyond 64 bits are refused before anything reaches the store.
pub struct PathId(pub i64);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let PathText(raw) = PathText::from_request_parts(parts, state).await?;
        parse_id("id", &raw).map(Self)
    }
}

/// A text segment from the path (`/sessions/{id}`), percent-decoded.
pub struct PathText(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(value) = Path::<String>::from_request_parts(parts, state).await.map_err(path_rejection)?;
        Ok(Self(value))
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    if let PathRejection::FailedToDeserializePathParams(e) = &rejection
        && matches!(e.kind(), ErrorKind::InvalidUtf8InPathParam { .. })
    {
        return ApiError::new(ErrorCode::InvalidUtf8, "the path is not valid UTF-8 once percent-decoded");
    }
    ApiError::new(ErrorCode::InvalidArgument, format!("bad path: {}", rejection.body_text()))
}

/// An id: digits only, at least 1.
pub fn parse_id(name: &str, raw: &str) -> Result<i64, ApiError> {
    let parsed =
        if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) { raw.parse::<i64>().ok() } else { None };
    parsed.filter(|id| *id > 0).ok_or_else(|| {
        ApiError::new(ErrorCode::InvalidArgument, format!("{name} must be a positive integer, not {raw:?}"))
    })
}

/// A required positive id given as a query parameter.
pub fn require_id(name: &str, value: Option<i64>) -> Result<i64, ApiError> {
    match value {
        Some(id) if id > 0 => Ok(id),
        Some(id) => {
            Err(ApiError::new(ErrorCode::InvalidArgument, format!("{name} must be a positive integer, not {id}")))
        }
        None => Err(ApiError::new(ErrorCode::InvalidArgument, format!("query parameter {name} is required"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_positive_digits_only() {
        assert_eq!(parse_id("id", "42").unwrap(), 42);
        assert_eq!(parse_id("id", "007").unwrap(), 7);
        for bad in ["", "0", "-1", "+1", "1.5", "abc", "../etc", "99999999999999999999", " 1"] {
            assert_eq!(parse_id("id", bad).unwrap_err().code(), ErrorCode::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn json_errors_say_which_layer_is_wrong() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct T {
            title: String,
        }
        let code = |bytes: &[u8]| parse_json::<T>(bytes).unwrap_err().code();
        assert_eq!(code(b"\xff\xfe"), ErrorCode::InvalidUtf8);
        assert_eq!(code(b"{\"title\": "), ErrorCode::InvalidJson);
        assert_eq!(code(b"{\"title\": \"x\"} trailing"), ErrorCode::InvalidJson);
        assert_eq!(code(b"  "), ErrorCode::InvalidJson);
        assert_eq!(code(b"{}"), ErrorCode::InvalidArgument);
        assert_eq!(code(b"{\"title\": 3}"), ErrorCode::InvalidArgument);
        assert_eq!(code(b"[1]"), ErrorCode::InvalidArgument);
        assert!(parse_json::<T>(b"{\"title\": \"x\", \"extra\": 1}").is_ok());
    }
}
