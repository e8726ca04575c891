use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

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

/// One request as a test server reads it: the head lines and the body.
struct Seen {
    head: Vec<String>,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Seen> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let length = head
        .iter()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen { head, body })
}

/// A server thread: for each accepted connection, `answer` gets each request and the stream,
/// and says whether to keep serving that connection. What it read goes to the channel.
fn serve(
    connections: usize,
    answer: impl Fn(&Seen, &mut TcpStream) -> bool + Send + 'static,
) -> (BaseUrl, mpsc::Receiver<(usize, Seen)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = BaseUrl::from_addr(listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for n in 0..connections {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            while let Some(seen) = read_request(&mut reader) {
                let keep = answer(&seen, reader.get_mut());
                tx.send((n, seen)).unwrap();
                if !keep {
                    break;
                }
            }
        }
    });
    (base, rx)
}

fn ok_json(stream: &mut TcpStream, body: &str) {
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
        .unwrap();
}

#[test]
fn keeps_one_connection_alive_and_sends_headers_and_bodies() {
    let (base, seen) = serve(1, |_, s| {
        ok_json(s, r#"{"ok":true}"#);
        true
    });
    let mut client = Client::new(base, Duration::from_secs(5)).header("Authorization", "Bearer t");
    let first = client.post_json("/v1/op", br#"{"op":"stats"}"#).unwrap();
    let second = client.send("GET", "/health", None, &[("Idempotency-Key", "k1")]).unwrap();
    assert_eq!((first.status, first.json().unwrap()["ok"].as_bool()), (200, Some(true)));
    assert_eq!(second.header("Content-Type"), Some("application/json"));
    let (conn_a, a) = seen.recv().unwrap();
    let (conn_b, b) = seen.recv().unwrap();
    assert_eq!((conn_a, conn_b), (0, 0), "both requests on one connection");
    assert_eq!(a.head[0], "POST /v1/op HTTP/1.1");
    assert!(a.head.contains(&"Authorization: Bearer t".to_owned()));
    assert_eq!(a.body, br#"{"op":"stats"}"#);
    assert!(b.head.contains(&"Idempotency-Key: k1".to_owned()));
    assert!(!a.head.iter().any(|l| l.eq_ignore_ascii_case("connection: close")));
}

#[test]
fn one_shot_asks_the_server_to_close_and_reads_to_the_end() {
    let (base, seen) = serve(2, |_, s| {
        // No length: the body runs to the close.
        s.write_all(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n{\"error\":1}").unwrap();
        false
    });
    let mut client = Client::new(base, Duration::from_secs(5)).one_shot();
    for _ in 0..2 {
        let answer = client.get("/nope").unwrap();
        assert_eq!((answer.status, answer.body.as_slice()), (404, br#"{"error":1}"#.as_slice()));
    }
    let (n, request) = seen.recv().unwrap();
    assert!(request.head.contains(&"Connection: close".to_owned()));
    assert_eq!((n, seen.recv().unwrap().0), (0, 1), "a connection per request");
}

#[test]
fn reads_chunked_answers() {
    let (base, _seen) = serve(1, |_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\nTrailer: t\r\n\r\n")
            .unwrap();
        true
    });
    let answer = Client::new(base, Duration::from_secs(5)).get("/").unwrap();
    assert_eq!(answer.json().unwrap()["a"], 1);
}

#[test]
fn an_idle_connection_the_server_closed_is_replaced_once() {
    // The first connection answers once, then the server drops it (as an idle timeout does).
    let (base, seen) = serve(2, |_, s| {
        ok_json(s, "{}");
        false
    });
    let mut client = Client::new(base, Duration::from_secs(5));
    client.get("/a").unwrap();
    thread::sleep(Duration::from_millis(50));
    assert!(client.get("/b").unwrap().ok());
    let firsts: Vec<usize> = seen.iter().take(2).map(|(n, _)| n).collect();
    assert_eq!(firsts, [0, 1]);
}

#[test]
fn no_server_is_not_sent_and_silence_after_the_request_is_no_answer() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = BaseUrl::from_addr(closed.local_addr().unwrap());
    drop(closed);
    let refused = Client::new(base, Duration::from_secs(5)).one_shot().get("/").unwrap_err();
    assert!(matches!(refused, Error::NotSent(_)), "{refused}");

    // A server that reads the whole request and dies without a word: it may have acted.
    let (base, _seen) = serve(1, |_, _| false);
    let silent = Client::new(base, Duration::from_secs(5)).one_shot().post_json("/v1/op", b"{}").unwrap_err();
    assert!(matches!(silent, Error::NoAnswer(_)), "{silent}");
}

#[test]
fn a_slow_server_times_out_as_no_answer() {
    let (base, _seen) = serve(1, |_, _| {
        thread::sleep(Duration::from_millis(600));
        false
    });
    let slow = Client::new(base, Duration::from_millis(100)).get("/").unwrap_err();
    assert!(matches!(slow, Error::NoAnswer(_)), "{slow}");
}
