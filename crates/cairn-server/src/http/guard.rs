//! Who may talk to the daemon, and how much they may send. Applied to every route, the MCP
//! endpoint and the unknown-route fallback alike.
//!
//! 0. HTTP/1.1 without `Host` (which every HTTP/1.1 request must carry) gets 400 `missing_host`.
//! 1. Browsers: a request a web page made cross-site (`Sec-Fetch-Site: cross-site`, or an
//!    `Origin` that is not a loopback origin, `null` included) is refused. A page on the
//!    internet must not read or write memories through the user's browser.
//!    A change (any method but `GET`, `HEAD`, `OPTIONS`: `/v1/op`, `/mcp` and the `/ui` forms
//!    included) is held to more: a `Sec-Fetch-Site` other than `same-origin` or `none` and an
//!    `Origin` other than the daemon's own (a loopback name on the port it serves, or exactly
//!    the `Host` the request was sent to) are refused, so a page served from another local
//!    port cannot write either; a request without either header is a tool, not a browser, and
//!    passes. Outside `/ui` a change may not declare a body of a type a page can send without
//!    asking (`text/plain`, `multipart/form-data`, a form): 415 `unsupported_media_type`.
//! 2. DNS rebinding: the `Host` must name loopback (`localhost`, `*.localhost`, `127.0.0.0/8`,
//!    `[::1]`, any port), and the peer must be a loopback address. A request carrying the
//!    configured bearer token is exempt: it proves the caller was given the token, which a
//!    rebinding page never is, and that is what makes a non-loopback bind usable.
//! 3. Token: when one is configured, every route except `GET /health` requires
//!    `Authorization: Bearer <token>`, compared in constant time. The web page's routes
//!    (`/ui…`) also take it from their cookie or, on a `GET`, from `?token=` (a browser cannot
//!    send the header on navigation; see `ui`).
//! 4. Size: bodies over the route's limit get 413 before a handler runs.
//! 5. Store: a request naming the data dir it is meant for (`cairn-data-dir`, sent by hooks
//!    that skip the health round trip) is refused with `daemon_mismatch` when this daemon
//!    serves another one: a stale `daemon.json` never sends a write into the wrong store.

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_client::daemon::{DATA_DIR_HEADER, data_dir_from_header, same_dir};
use cairn_core::ErrorCode;
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::extract::payload_too_large;
use super::{AppState, HttpConfig};

/// Routes whose bodies may be as large as an export file.
const LARGE_BODY_ROUTES: &[&str] = &["/import", "/v1/op"];

/// Whether an address is loopback (`127.0.0.0/8`, `::1`, or an IPv4-mapped loopback). The
/// binary refuses to listen anywhere else without a token.
pub fn is_loopback(addr: &IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

pub(super) async fn security(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match admit(&state.config, &req) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refusal.into_response(),
    }
}

fn admit(config: &HttpConfig, req: &Request) -> Result<(), ApiError> {
    require_host_header(req)?;
    refuse_cross_site(req.headers())?;
    refuse_foreign_changes(req)?;
    let authorized = config.token.as_deref().is_some_and(|token| {
        bearer_matches(req.headers(), token)
            || super::ui::presented_token(req).is_some_and(|given| same_token(&given, token))
    });
    if authorized {
        return require_own_store(config, req.headers());
    }
    require_loopback_host(req)?;
    require_loopback_peer(req)?;
    if config.token.is_some() && !is_health_probe(req) {
        let presented = req.headers().contains_key(header::AUTHORIZATION);
        let message = if presented { "the bearer token is wrong" } else { "this daemon requires a bearer token" };
        let hint = if super::ui::is_ui_path(req.uri().path()) {
            "open /ui?token=<the daemon's CAIRN_HTTP_TOKEN> once: the page keeps it in a cookie"
        } else {
            "send `Authorization: Bearer <token>` with the daemon's CAIRN_HTTP_TOKEN"
        };
        return Err(ApiError::new(ErrorCode::Unauthorized, message)
            .with_hint(hint)
            .with_header(header::WWW_AUTHENTICATE, "Bearer"));
    }
    require_own_store(config, req.headers())
}

/// A request that names a data dir must name this daemon's.
fn require_own_store(config: &HttpConfig, headers: &HeaderMap) -> Result<(), ApiError> {
    let (Some(served), Some(meant)) = (config.data_dir.as_deref(), headers.get(DATA_DIR_HEADER)) else {
        return Ok(());
    };
    let meant = meant.to_str().map(data_dir_from_header).unwrap_or_default();
    if same_dir(served, &meant) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::DaemonMismatch,
        format!("this daemon serves {}, not {}", served.display(), meant.display()),
    )
    .with_hint("the daemon record of that data dir is stale: start its own daemon (cairn serve --data-dir DIR)"))
}

fn is_health_probe(req: &Request) -> bool {
    req.uri().path() == "/health" && matches!(*req.method(), Method::GET | Method::HEAD)
}

fn refuse_cross_site(headers: &HeaderMap) -> Result<(), ApiError> {
    let forbidden = |why: String| {
        ApiError::new(ErrorCode::Forbidden, why)
            .with_hint("cairn answers local tools only; web pages cannot call it from a browser")
    };
    for site in headers.get_all("sec-fetch-site") {
        if site.as_bytes().eq_ignore_ascii_case(b"cross-site") {
            return Err(forbidden("cross-site browser requests are refused".into()));
        }
    }
    for origin in headers.get_all(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("<not text>");
        if !origin_is_loopback(text) {
            return Err(forbidden(format!("requests from origin {text:?} are refused")));
        }
    }
    Ok(())
}

/// The address a connection was accepted on, set by `serve` on every request: the daemon's
/// own origin is a loopback name on this port.
#[derive(Debug, Clone, Copy)]
pub(super) struct ServedOn(pub SocketAddr);

fn require_host_header(req: &Request) -> Result<(), ApiError> {
    if req.version() == Version::HTTP_11 && !req.headers().contains_key(header::HOST) {
        return Err(ApiError::new(ErrorCode::MissingHost, "an HTTP/1.1 request must carry a Host header")
            .with_hint("send `Host: 127.0.0.1:PORT` (every HTTP/1.1 client does)"));
    }
    Ok(())
}

/// Whether a request asks for a change: any method but the safe ones (no `GET` route changes
/// anything; an unknown method is treated as a change).
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Bodies a web page can send anywhere without asking first (a CORS "simple" request, or a
/// `no-cors` fetch): a JSON route refuses them, so no page can smuggle a change in one.
const SIMPLE_BODY_TYPES: &[&str] = &["text/plain", "multipart/form-data", "application/x-www-form-urlencoded"];

/// A change must come from cairn itself or from a tool (see the module doc, 1).
fn refuse_foreign_changes(req: &Request) -> Result<(), ApiError> {
    if !changes_state(req.method()) {
        return Ok(());
    }
    let headers = req.headers();
    let forbidden = |why: String| {
        ApiError::new(ErrorCode::Forbidden, why)
            .with_hint("changes are accepted from cairn's own page and from local tools only")
    };
    for site in headers.get_all("sec-fetch-site") {
        let site = site.to_str().unwrap_or("<not text>");
        if !(site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none")) {
            return Err(forbidden(format!("a {site:?} browser request may not change anything")));
        }
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let served_port = match req.extensions().get::<ServedOn>() {
        Some(ServedOn(addr)) => Some(addr.port()),
        None => host.and_then(|h| authority_port(h, 80)),
    };
    for origin in headers.get_all(header::ORIGIN) {
        let text = origin.to_str().unwrap_or("<not text>");
        if !is_own_origin(text, host, served_port) {
            return Err(forbidden(format!("origin {text:?} is not this daemon's: it may not change anything")));
        }
    }
    if super::ui::is_ui_path(req.uri().path()) {
        return Ok(()); // the page's own forms: held to the checks above
    }
    for declared in headers.get_all(header::CONTENT_TYPE) {
        let text = declared.to_str().unwrap_or("");
        let essence = text.split(';').next().unwrap_or("").trim();
        if SIMPLE_BODY_TYPES.iter().any(|simple| essence.eq_ignore_ascii_case(simple)) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!("a change sent as {essence:?} is refused: this route takes JSON"),
            )
            .with_hint("send the body with `Content-Type: application/json`"));
        }
    }
    Ok(())
}

/// This daemon's origin: exactly the `Host` the request was sent to (the page itself, under
/// whatever name it was opened), or a loopback name on the port the daemon serves.
fn is_own_origin(origin: &str, host: Option<&str>, served_port: Option<u16>) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        80
    } else if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        return false;
    };
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return false;
    }
    if host.is_some_and(|h| h.trim().eq_ignore_ascii_case(authority)) {
        return true;
    }
    host_is_loopback(authority) && served_port.is_some_and(|port| authority_port(authority, default_port) == Some(port))
}

/// The port of `host[:port]` (`[v6][:port]`), `default` when none is written.
fn authority_port(authority: &str, default: u16) -> Option<u16> {
    let after_host = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.1,
        None => authority.split_once(':').map_or("", |(_, port)| port),
    };
    let port = after_host.strip_prefix(':').unwrap_or(after_host);
    if port.is_empty() { Some(default) } else { port.parse().ok() }
}

/// `http(s)://<loopback host>[:port]`; `null` (sandboxed frames, files) is not.
fn origin_is_loopback(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else { return false };
    let scheme_ok = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    scheme_ok && !rest.contains(['/', '@', '?', '#']) && host_is_loopback(rest)
}

fn require_loopback_host(req: &Request) -> Result<(), ApiError> {
    let host = match req.headers().get(header::HOST) {
        Some(value) => value.to_str().ok(),
        // HTTP/1.0 without Host, or an absolute-form request target.
        None => req.uri().authority().map(axum::http::uri::Authority::as_str),
    };
    match host {
        Some(h) if host_is_loopback(h) => Ok(()),
        other => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("Host {:?} is not a loopback name", other.unwrap_or("<none>")),
        )
        .with_hint("call cairn as http://127.0.0.1:PORT or http://localhost:PORT")),
    }
}

/// The peer is only known when the router runs under `serve` (`ConnectInfo`); in-process
/// callers are local by construction.
fn require_loopback_peer(req: &Request) -> Result<(), ApiError> {
    match req.extensions().get::<ConnectInfo<SocketAddr>>() {
        Some(ConnectInfo(peer)) if !is_loopback(&peer.ip()) => {
            Err(ApiError::new(ErrorCode::Forbidden, format!("requests from {} need the bearer token", peer.ip())))
        }
        _ => Ok(()),
    }
}

/// `name[:port]` where name is `localhost`, `*.localhost` or a loopback IP (`[::1]` bracketed).
pub(super) fn host_is_loopback(host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    if let Some(rest) = host.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else { return false };
        let port = match after {
            "" => None,
            _ => match after.strip_prefix(':') {
                Some(port) => Some(port),
                None => return false,
            },
        };
        return port_ok(port) && inside.parse::<IpAddr>().is_ok_and(|ip| is_loopback(&ip));
    }
    let (name, port) = match host.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host.as_str(), None),
    };
    port_ok(port)
        && (name == "localhost"
            || name.strip_suffix(".localhost").is_some_and(is_dns_label_run)
            || name.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback()))
}

fn port_ok(port: Option<&str>) -> bool {
    port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

fn is_dns_label_run(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// `Authorization: Bearer <token>`, scheme case-insensitive, token compared in constant time.
fn bearer_matches(headers: &HeaderMap, token: &str) -> bool {
    headers.get_all(header::AUTHORIZATION).iter().any(|value| {
        let Ok(text) = value.to_str() else { return false };
        let Some((scheme, given)) = text.trim().split_once(' ') else { return false };
        scheme.eq_ignore_ascii_case("bearer") && bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
    })
}

fn same_token(given: &str, token: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

/// Cap the body: a declared length over the limit is refused before reading; a streamed one is
/// cut off while reading (the extractors turn that into the same 413).
pub(super) async fn limit_body(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let limit = if LARGE_BODY_ROUTES.contains(&req.uri().path()) {
        state.config.import_max_body_bytes
    } else {
        state.config.max_body_bytes
    };
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return payload_too_large().into_response();
    }
    let req = req.map(|body| Body::new(http_body_util::Limited::new(body, limit)));
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:7437",
            "127.0.0.1",
            "127.0.0.1:7437",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:7437",
            "app.localhost:3000",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(host_is_loopback(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:7437",
            "[::2]",
            "::1",
            "localhost:",
            "localhost:abc",
            "[::1]x",
            "0.0.0.0",
            ".localhost",
            "a..localhost",
        ] {
            assert!(!host_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn loopback_origins() {
        assert!(origin_is_loopback("http://localhost:5173"));
        assert!(origin_is_loopback("https://127.0.0.1"));
        for bad in ["null", "http://evil.example", "file://", "http://localhost@evil.example", "ws://localhost"] {
            assert!(!origin_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn own_origin_is_a_loopback_name_on_the_served_port_or_the_host_itself() {
        let host = Some("127.0.0.1:7437");
        for own in ["http://127.0.0.1:7437", "http://localhost:7437", "http://[::1]:7437", "HTTPS://LOCALHOST:7437"] {
            assert!(is_own_origin(own, host, Some(7437)), "{own}");
        }
        // A daemon reached by a token holder under another name: the page itself.
        assert!(is_own_origin("http://192.168.1.5:7437", Some("192.168.1.5:7437"), Some(7437)));
        assert!(is_own_origin("http://localhost", Some("localhost"), None), "default port, named by Host");
        for foreign in [
            "http://127.0.0.1:5173",
            "http://localhost:7438",
            "http://localhost",
            "http://evil.example:7437",
            "null",
            "ws://127.0.0.1:7437",
            "http://127.0.0.1:7437/",
            "http://x@127.0.0.1:7437",
            "http://",
        ] {
            assert!(!is_own_origin(foreign, host, Some(7437)), "{foreign}");
        }
        assert!(!is_own_origin("http://127.0.0.1:7437", None, None), "no port known, no Host: not provably own");
        assert_eq!(authority_port("[::1]:80", 1), Some(80));
        assert_eq!(authority_port("[::1]", 443), Some(443));
        assert_eq!(authority_port("localhost:x", 80), None);
    }

    fn change(path: &str, headers: &[(&str, &str)]) -> Result<(), ErrorCode> {
        let mut req = Request::builder().method(Method::POST).uri(path).header(header::HOST, "127.0.0.1:7437");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let mut req = req.body(Body::empty()).unwrap();
        req.extensions_mut().insert(ServedOn(([127, 0, 0, 1], 7437).into()));
        refuse_foreign_changes(&req).map_err(|e| e.code())
    }

    #[test]
    fn changes_are_judged_from_the_browser_headers_and_the_body_type() {
        assert_eq!(change("/observations", &[]), Ok(()), "no browser headers: a tool");
        let own = [("origin", "http://127.0.0.1:7437"), ("sec-fetch-site", "same-origin")];
        assert_eq!(change("/observations", &own), Ok(()));
        assert_eq!(change("/observations", &[("origin", "http://localhost:7437")]), Ok(()));
        assert_eq!(change("/observations", &[("sec-fetch-site", "none")]), Ok(()));
        for foreign in [
            &[("origin", "http://localhost:5173")][..],
            &[("origin", "http://127.0.0.1:7437"), ("sec-fetch-site", "same-site")],
            &[("sec-fetch-site", "same-site")],
            &[("origin", "null")],
        ] {
            for path in ["/observations", "/v1/op", "/mcp", "/ui/memory/1/pin"] {
                assert_eq!(change(path, foreign), Err(ErrorCode::Forbidden), "{path} {foreign:?}");
            }
        }
        for simple in
            ["text/plain;charset=UTF-8", "multipart/form-data; boundary=x", "Application/X-WWW-Form-Urlencoded"]
        {
            assert_eq!(change("/v1/op", &[("content-type", simple)]), Err(ErrorCode::UnsupportedMediaType));
        }
        assert_eq!(change("/v1/op", &[("content-type", "application/json")]), Ok(()));
        // The page's own forms are form-encoded.
        let form = [("content-type", "application/x-www-form-urlencoded"), own[0], own[1]];
        assert_eq!(change("/ui/memory/1/pin", &form), Ok(()));
    }

    #[test]
    fn bearer_tokens() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_matches(&headers, "s3cret"));
        headers.insert(header::AUTHORIZATION, "bearer s3cret".parse().unwrap());
        assert!(bearer_matches(&headers, "s3cret"));
        assert!(!bearer_matches(&headers, "s3cre"));
        headers.insert(header::AUTHORIZATION, "Basic s3cret".parse().unwrap());
        assert!(!bearer_matches(&headers, "s3cret"));
    }

    #[test]
    fn loopback_addresses() {
        assert!(is_loopback(&"127.0.0.1".parse().unwrap()));
        assert!(is_loopback(&"::1".parse().unwrap()));
        assert!(is_loopback(&"::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback(&"0.0.0.0".parse().unwrap()));
        assert!(!is_loopback(&"192.168.1.2".parse().unwrap()));
    }
}
