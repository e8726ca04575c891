//! The web page at `/ui`: server-rendered HTML over the same operations as every other door,
//! readable without JavaScript; a small script adds search as you type, the live stream and
//! edit in place.
//!
//! - Auth: the API's own checks run first (`guard::security`). When the daemon has a token, a
//!   browser cannot send a bearer header on navigation, so `GET /ui?token=<token>` (checked by
//!   the guard like a bearer) answers a redirect that sets the token as an `HttpOnly;
//!   SameSite=Strict` cookie scoped to `/ui`, which the guard then accepts on `/ui` routes only.
//! - Writes (`POST` forms) must come from this page: a browser's `Sec-Fetch-Site` must be
//!   `same-origin` (or `none`) and an `Origin`, when sent, must be this daemon's own; anything
//!   else is refused with 403 `forbidden` before the handler runs (`guard`, the one check of
//!   every change on every route).
//! - Every response carries a strict Content-Security-Policy: the page's own script and style
//!   only, no inline script, no request beyond the daemon.
//! - Assets are compiled into the binary.

mod charts;
mod conflicts;
mod history;
pub(super) mod html;
mod live;
mod views;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::AppState;
use super::error::ApiError;
use html::{Page, Section, esc};

/// The cookie that carries the daemon's token for the page.
pub(super) const TOKEN_COOKIE: &str = "cairn_ui_token";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

/// The page's routes, nested at `/ui` by the router.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(views::dashboard))
        .route("/ui/", get(views::dashboard))
        .route("/ui/search", get(views::search))
        .route("/ui/memory/{id}", get(views::memory))
        .route("/ui/memory/{id}/edit", post(views::edit))
        .route("/ui/memory/{id}/delete", post(views::delete))
        .route("/ui/memory/{id}/pin", post(views::pin))
        .route("/ui/memory/{id}/restore", post(views::restore))
        .route("/ui/trash", get(views::trash))
        .route("/ui/conflicts", get(conflicts::queue))
        .route("/ui/conflicts/judge", post(conflicts::judge))
        .route("/ui/conflicts/scan", post(conflicts::scan))
        .route("/ui/sessions", get(views::sessions))
        .route("/ui/history", get(history::sessions))
        .route("/ui/history/search", get(history::search))
        .route("/ui/history/{session}", get(history::session))
        .route("/ui/history/{session}/{message}", get(history::message))
        .route("/ui/history/{session}/{message}/{part}", get(history::part))
        .route("/ui/live", get(live::stream))
        .route("/ui/assets/ui.css", get(|| async { asset(CSS, "text/css; charset=utf-8") }))
        .route("/ui/assets/ui.js", get(|| async { asset(JS, "text/javascript; charset=utf-8") }))
        // Not a fallback: the API's own fallback answers every other path.
        .route("/ui/{*rest}", get(not_found))
        .layer(middleware::from_fn(token_cookie))
        .layer(middleware::from_fn(headers))
}

/// Whether a path belongs to the page (where the token cookie counts).
pub(super) fn is_ui_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// The token a `/ui` request presents outside the `Authorization` header: the cookie, or
/// `?token=` on a `GET` (the first visit).
pub(super) fn presented_token(req: &Request) -> Option<String> {
    if !is_ui_path(req.uri().path()) {
        return None;
    }
    if req.method() == Method::GET
        && let Some(token) = query_token(req.uri().query())
    {
        return Some(token);
    }
    cookie(req.headers(), TOKEN_COOKIE)
}

fn query_token(query: Option<&str>) -> Option<String> {
    let query = query?;
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == "token").then(|| percent_decode(value))
    })
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).find_map(|line| {
        line.split(';').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
    })
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| value.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(b)) => {
                out.push(b);
                i += 2;
            }
            (b'+', None) => out.push(b' '),
            (b, None) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `?token=` got the request this far (the guard checked it): keep it in the cookie and send
/// the browser to the same page without it, so the token leaves the address bar and history.
async fn token_cookie(req: Request, next: Next) -> Response {
    let Some(token) = (req.method() == Method::GET).then(|| query_token(req.uri().query())).flatten() else {
        return next.run(req).await;
    };
    let rest: Vec<&str> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.starts_with("token=") && !pair.is_empty())
        .collect();
    let target =
        if rest.is_empty() { req.uri().path().to_owned() } else { format!("{}?{}", req.uri().path(), rest.join("&")) };
    let mut response = Redirect::to(&target).into_response();
    // The token is what the daemon was configured with: printable, no `;`.
    let cookie = format!("{TOKEN_COOKIE}={token}; Path=/ui; HttpOnly; SameSite=Strict");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Security headers on every answer of the page.
async fn headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` with
    // the page's own form posts, and the guard refuses those.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

async fn not_found() -> Response {
    error_page(StatusCode::NOT_FOUND, "Not found", "There is no such page.")
}

/// A page saying what went wrong, with the status the API would answer.
pub(super) fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let mut page = Page::new(title, Section::None);
    page.heading(title);
    page.raw(&format!(
        "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"/ui\">Back to the dashboard</a></p>",
        esc(message)
    ));
    (status, Html(page.render())).into_response()
}

/// A failed operation as a page: an unknown id is a 404 page, bad input a 400, and so on.
pub(super) struct UiError(ApiError);

impl From<ApiError> for UiError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl From<cairn_core::CairnError> for UiError {
    fn from(e: cairn_core::CairnError) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let code = self.0.code();
        let status = StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let title = if status == StatusCode::NOT_FOUND { "Not found" } else { "Something went wrong" };
        let mut response = error_page(status, title, &format!("{} ({})", self.0.message(), code.as_str()));
        response.extensions_mut().insert(code);
        response
    }
}

pub(super) type UiResult = Result<Response, UiError>;

/// Run one request; its answer, typed (no JSON inside the process).
pub(super) async fn run<R: cairn_core::ops::Request>(state: &AppState, request: R) -> Result<R::Output, UiError> {
    Ok(super::run_typed(state, request).await?)
}

/// A rendered page, `200 OK`.
pub(super) fn page(page: &Page) -> Response {
    Html(page.render()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comes_from_the_query_then_the_cookie() {
        assert_eq!(query_token(Some("a=1&token=s%2F3")), Some("s/3".into()));
        assert_eq!(query_token(Some("tokens=1")), None);
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "x=1; cairn_ui_token=abc".parse().unwrap());
        assert_eq!(cookie(&h, TOKEN_COOKIE), Some("abc".into()));
    }
}
