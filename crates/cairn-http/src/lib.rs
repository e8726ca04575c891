//! cairn's one HTTP/1.1 client, for loopback servers: the daemon client in `cairn-client`, the
//! integration tests and `cairn-bench` all speak through it.
//!
//! Blocking, over `std::net`, with no dependency but `serde_json`: a hook links it and must start in a few
//! milliseconds, and the bench should measure the server, not a client stack. It keeps one
//! connection alive between requests when asked to, reads `Content-Length`, chunked and
//! read-to-close bodies, and tells apart a request that never reached the server whole
//! ([`Error::NotSent`]: safe to run elsewhere) from one that got no answer ([`Error::NoAnswer`]:
//! it may have been applied).

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// Where a server listens. Only loopback addresses are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub addr: SocketAddr,
    /// Value of the Host header (`127.0.0.1:7437`), which loopback guards accept.
    pub host: String,
}

impl BaseUrl {
    /// `127.0.0.1:port`.
    pub fn loopback(port: u16) -> Self {
        Self::from_addr(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
    }

    /// A socket address, which the caller vouches is loopback.
    pub fn from_addr(addr: SocketAddr) -> Self {
        Self { addr, host: addr.to_string() }
    }

    /// Parse `http://HOST[:PORT][/]`, refusing anything that is not loopback.
    pub fn parse(url: &str) -> Result<Self, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!("{url}: only http:// URLs are supported (loopback servers only)"));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if rest.trim_start_matches(authority).trim_matches('/').contains(['?', '#']) || authority.contains('@') {
            return Err(format!("{url}: give just the base URL, e.g. http://127.0.0.1:7437"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| format!("{url}: cannot read host:port"))?;
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.parse()
                .map_err(|_| format!("{url}: refusing non-loopback host {host:?} (use 127.0.0.1, ::1 or localhost)"))?
        };
        if !ip.is_loopback() {
            return Err(format!("{url}: refusing non-loopback address {ip}"));
        }
        Ok(Self::from_addr(SocketAddr::new(ip, port)))
    }
}

fn split_host_port(authority: &str) -> Option<(&str, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => 80,
            None => return None,
        };
        return Some((host, port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h, p.parse().ok()?)),
        None => Some((authority, 80)),
    }
}

/// A response: status, headers (names lowercased) and the whole body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A 2xx status.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// "HTTP 404: {body...}" for error reports.
    pub fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body);
        let body: String = body.chars().take(200).collect();
        format!("HTTP {}: {}", self.status, body.trim())
    }
}

/// Why a request failed.
#[derive(Debug)]
pub enum Error {
    /// It never reached the server whole (no connection, or a write failed before the last
    /// byte): the server cannot have acted on it.
    NotSent(io::Error),
    /// It was sent whole and the answer did not come (or came malformed): it may have been
    /// applied.
    NoAnswer(io::Error),
}

impl Error {
    /// The underlying I/O error.
    pub fn io(&self) -> &io::Error {
        match self {
            Error::NotSent(e) | Error::NoAnswer(e) => e,
        }
    }

    pub fn into_io(self) -> io::Error {
        match self {
            Error::NotSent(e) | Error::NoAnswer(e) => e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotSent(e) => write!(f, "request not sent: {e}"),
            Error::NoAnswer(e) => write!(f, "no answer: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        e.into_io()
    }
}

/// A client for one server: headers sent on every request, and (when kept alive) one open
/// connection reused between requests.
#[derive(Debug)]
pub struct Client {
    base: BaseUrl,
    timeout: Duration,
    connect_timeout: Duration,
    keep_alive: bool,
    headers: Vec<(String, String)>,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    /// A client that keeps its connection alive; `timeout` bounds each read and write.
    pub fn new(base: BaseUrl, timeout: Duration) -> Self {
        let connect_timeout = timeout.min(Duration::from_secs(5));
        Self { base, timeout, connect_timeout, keep_alive: true, headers: Vec::new(), conn: None }
    }

    /// One connection per request (`Connection: close`), as a short-lived process wants.
    #[must_use]
    pub fn one_shot(mut self) -> Self {
        self.keep_alive = false;
        self
    }

    /// How long to wait for the connection itself.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Send `name: value` on every request.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn base(&self) -> &BaseUrl {
        &self.base
    }

    /// Bound each read and write of the following requests by `timeout`.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        self.conn = None;
    }

    pub fn get(&mut self, path: &str) -> Result<Response, Error> {
        self.send("GET", path, None, &[])
    }

    pub fn post_json(&mut self, path: &str, body: &[u8]) -> Result<Response, Error> {
        self.send("POST", path, Some(body), &[])
    }

    /// Any method, with a JSON body (`None`: none) and headers for this request only.
    ///
    /// On a kept-alive connection that the server closed while idle, the request fails before
    /// any answer byte: it is sent once more on a fresh connection (the server closes idle
    /// connections between requests, never in the middle of one).
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> Result<Response, Error> {
        let request = self.encode(method, path, body, headers);
        if let Some(conn) = self.conn.take() {
            match self.exchange(conn, &request, method) {
                Err(Attempt::WriteFailed(_) | Attempt::ClosedBeforeAnswer(_)) => {}
                other => return other.map_err(Attempt::into_error),
            }
        }
        let conn = self.connect().map_err(Error::NotSent)?;
        self.exchange(conn, &request, method).map_err(Attempt::into_error)
    }

    fn connect(&self) -> io::Result<BufReader<TcpStream>> {
        let stream = TcpStream::connect_timeout(&self.base.addr, self.connect_timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        Ok(BufReader::with_capacity(64 * 1024, stream))
    }

    fn encode(&self, method: &str, path: &str, body: Option<&[u8]>, headers: &[(&str, &str)]) -> Vec<u8> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n", self.base.host);
        if !self.keep_alive {
            head.push_str("Connection: close\r\n");
        }
        let own = self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        for (name, value) in own.chain(headers.iter().copied()) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        bytes
    }

    /// Write the request, read the answer; keep the connection when both sides allow.
    fn exchange(&mut self, mut conn: BufReader<TcpStream>, request: &[u8], method: &str) -> Result<Response, Attempt> {
        // Until the last byte is written the server cannot have acted on it (it waits for the
        // whole body); after that, silence is ambiguous.
        conn.get_mut().write_all(request).map_err(Attempt::WriteFailed)?;
        let (response, server_closes) = read_response(&mut conn, method)?;
        if self.keep_alive && !server_closes {
            self.conn = Some(conn);
        }
        Ok(response)
    }
}

/// How one attempt on a connection failed.
enum Attempt {
    /// The request was not written whole.
    WriteFailed(io::Error),
    /// Written whole, then the connection closed or reset before any answer byte.
    ClosedBeforeAnswer(io::Error),
    /// Anything later: a timeout, a malformed or cut answer.
    Failed(io::Error),
}

impl Attempt {
    fn into_error(self) -> Error {
        match self {
            Attempt::WriteFailed(e) => Error::NotSent(e),
            Attempt::ClosedBeforeAnswer(e) | Attempt::Failed(e) => Error::NoAnswer(e),
        }
    }
}

/// Read one response; also whether the server closes the connection after it.
fn read_response(conn: &mut BufReader<TcpStream>, method: &str) -> Result<(Response, bool), Attempt> {
    let mut line = String::new();
    match conn.read_line(&mut line) {
        Ok(0) => {
            let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before any answer");
            return Err(Attempt::ClosedBeforeAnswer(eof));
        }
        Ok(_) => {}
        Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) => {
            return Err(Attempt::ClosedBeforeAnswer(e));
        }
        Err(e) => return Err(Attempt::Failed(e)),
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Attempt::Failed(invalid(format!("bad status line {line:?}"))))?;
    let headers = read_headers(conn).map_err(Attempt::Failed)?;
    let value = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let chunked = value("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = value("content-length").and_then(|v| v.parse::<usize>().ok());
    let mut closes = value("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let body = if chunked {
        read_chunked(conn).map_err(Attempt::Failed)?
    } else if let Some(n) = length {
        let mut body = vec![0; n];
        conn.read_exact(&mut body).map_err(Attempt::Failed)?;
        body
    } else if status == 204 || status == 304 || method == "HEAD" {
        Vec::new()
    } else {
        closes = true;
        let mut body = Vec::new();
        conn.read_to_end(&mut body).map_err(Attempt::Failed)?;
        body
    };
    Ok((Response { status, headers, body }, closes))
}

fn read_headers(conn: &mut BufReader<TcpStream>) -> io::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if conn.read_line(&mut line)? == 0 {
            return Err(invalid("headers cut short".into()));
        }
        let l = line.trim_end();
        if l.is_empty() {
            return Ok(headers);
        }
        if let Some((name, value)) = l.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn read_chunked(conn: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        let size_hex = line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers until the empty line.
            loop {
                line.clear();
                if conn.read_line(&mut line)? == 0 || line.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        conn.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        conn.read_exact(&mut crlf)?;
    }
}

/// Percent-encode a query-string value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
