//! A minimal blocking HTTP/1.1 client over `std::net`: one keep-alive connection per client,
//! JSON bodies, Content-Length or chunked responses. Small on purpose: the bench should
//! measure the server, not a client stack, and it must only ever talk to loopback.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Result, bail};

/// Where a target listens. Only loopback addresses are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    pub addr: SocketAddr,
    /// Value of the Host header (`127.0.0.1:7437`), which loopback guards accept.
    pub host: String,
}

impl BaseUrl {
    pub fn loopback(port: u16) -> Self {
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        Self { addr, host: addr.to_string() }
    }

    /// Parse `http://HOST[:PORT][/]`, refusing anything that is not loopback.
    pub fn parse(url: &str) -> Result<Self> {
        let Some(rest) = url.strip_prefix("http://") else {
            bail!("{url}: only http:// URLs are supported (the bench talks to loopback servers)");
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if rest.trim_start_matches(authority).trim_matches('/').contains(['?', '#']) || authority.contains('@') {
            bail!("{url}: give just the base URL, e.g. http://127.0.0.1:7437");
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| anyhow::anyhow!("{url}: cannot read host:port"))?;
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.parse().map_err(|_| {
                anyhow::anyhow!("{url}: refusing non-loopback host {host:?} (use 127.0.0.1, ::1 or localhost)")
            })?
        };
        if !ip.is_loopback() {
            bail!("{url}: refusing non-loopback address {ip}: the bench writes thousands of memories");
        }
        let addr = SocketAddr::new(ip, port);
        Ok(Self { addr, host: addr.to_string() })
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

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// "HTTP 404: {body...}" for error reports.
    pub fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body);
        let body: String = body.chars().take(200).collect();
        format!("HTTP {}: {}", self.status, body.trim())
    }
}

/// One keep-alive connection to one server.
#[derive(Debug)]
pub struct Client {
    base: BaseUrl,
    timeout: Duration,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    pub fn new(base: BaseUrl, timeout: Duration) -> Self {
        Self { base, timeout, conn: None }
    }

    pub fn base(&self) -> &BaseUrl {
        &self.base
    }

    pub fn get(&mut self, path: &str) -> io::Result<Response> {
        self.request("GET", path, None)
    }

    pub fn post_json(&mut self, path: &str, body: &[u8]) -> io::Result<Response> {
        self.request("POST", path, Some(body))
    }

    pub fn request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> io::Result<Response> {
        let reused = self.conn.is_some();
        match self.try_request(method, path, body) {
            Ok(r) => Ok(r),
            // A kept-alive connection the server closed meanwhile: nothing was processed, redo once.
            Err(Failure::Stale(_)) if reused => {
                self.conn = None;
                self.try_request(method, path, body).map_err(Failure::into_io)
            }
            Err(e) => Err(e.into_io()),
        }
    }

    fn connect(&self) -> io::Result<BufReader<TcpStream>> {
        let stream = TcpStream::connect_timeout(&self.base.addr, self.timeout.min(Duration::from_secs(5)))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        Ok(BufReader::with_capacity(64 * 1024, stream))
    }

    fn try_request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> Result<Response, Failure> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect().map_err(Failure::Other)?,
        };
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n", self.base.host);
        if let Some(b) = body {
            head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
        }
        head.push_str("\r\n");
        let mut buf = head.into_bytes();
        if let Some(b) = body {
            buf.extend_from_slice(b);
        }
        conn.get_mut().write_all(&buf).map_err(Failure::Stale)?;

        let mut line = String::new();
        match conn.read_line(&mut line) {
            Ok(0) => return Err(Failure::Stale(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"))),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe) => {
                return Err(Failure::Stale(e));
            }
            Err(e) => return Err(Failure::Other(e)),
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Failure::Other(invalid(format!("bad status line {line:?}"))))?;
        let (mut length, mut chunked, mut close) = (None, false, false);
        loop {
            line.clear();
            if conn.read_line(&mut line).map_err(Failure::Other)? == 0 {
                return Err(Failure::Other(invalid("headers cut short".into())));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((name, value)) = l.split_once(':') {
                let value = value.trim();
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse::<usize>().ok(),
                    "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                    "connection" => close = value.eq_ignore_ascii_case("close"),
                    _ => {}
                }
            }
        }
        let body = if chunked {
            read_chunked(&mut conn).map_err(Failure::Other)?
        } else if let Some(n) = length {
            let mut b = vec![0; n];
            conn.read_exact(&mut b).map_err(Failure::Other)?;
            b
        } else if status == 204 || status == 304 || method == "HEAD" {
            Vec::new()
        } else {
            close = true;
            let mut b = Vec::new();
            conn.read_to_end(&mut b).map_err(Failure::Other)?;
            b
        };
        if !close {
            self.conn = Some(conn);
        }
        Ok(Response { status, body })
    }
}

enum Failure {
    /// Failed before any response byte: safe to retry on a fresh connection.
    Stale(io::Error),
    Other(io::Error),
}

impl Failure {
    fn into_io(self) -> io::Error {
        match self {
            Failure::Stale(e) | Failure::Other(e) => e,
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
mod tests {
    use super::*;

    #[test]
    fn parses_loopback_and_refuses_the_rest() {
        assert_eq!(BaseUrl::parse("http://127.0.0.1:7437").unwrap().addr.port(), 7437);
        assert_eq!(BaseUrl::parse("http://localhost:9000/").unwrap().host, "127.0.0.1:9000");
        assert_eq!(BaseUrl::parse("http://[::1]:8080").unwrap().host, "[::1]:8080");
        assert_eq!(BaseUrl::parse("http://127.1.2.3").unwrap().addr.port(), 80);
        for bad in [
            "http://10.0.0.1:7437",
            "http://example.com:7437",
            "https://127.0.0.1:7437",
            "127.0.0.1:7437",
            "http://0.0.0.0:7437",
            "http://user@127.0.0.1:1",
        ] {
            assert!(BaseUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn encodes_query_values() {
        assert_eq!(encode("how did we fix `x`?"), "how%20did%20we%20fix%20%60x%60%3F");
        assert_eq!(encode("src/a_b.rs"), "src%2Fa_b.rs");
    }
}
