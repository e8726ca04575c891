//! The OpenAI-compatible embedder against a scripted endpoint on loopback: good answers,
//! a server that is down, one that is too slow, wrong dimensions, garbage.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_embed::http::{HttpEmbedder, HttpLimits};
use cairn_embed::{EmbedError, Embedder};

/// Answers every request with `respond(request body)` after `delay`.
fn endpoint(delay: Duration, respond: fn(&serde_json::Value) -> (u16, String)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                std::thread::sleep(delay);
                let (status, text) = respond(&request);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    addr
}

fn vectors(request: &serde_json::Value, dims: usize) -> String {
    let n = request["input"].as_array().map_or(0, Vec::len);
    let data: Vec<serde_json::Value> = (0..n)
        .rev()
        .map(
            |i| serde_json::json!({"index": i, "embedding": (0..dims).map(|d| (d + i + 1) as f32).collect::<Vec<_>>()}),
        )
        .collect();
    serde_json::json!({"data": data, "model": "m"}).to_string()
}

fn embedder(addr: SocketAddr, timeout: Duration) -> HttpEmbedder {
    limited(addr, HttpLimits { timeout, ..HttpLimits::default() })
}

fn limited(addr: SocketAddr, limits: HttpLimits) -> HttpEmbedder {
    HttpEmbedder::new(&format!("http://{addr}/v1"), "nomic-embed-text", Some("k".into()), None, limits)
}

fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("text {i}")).collect()
}

fn inputs(request: &serde_json::Value) -> usize {
    request["input"].as_array().map_or(0, Vec::len)
}

/// The first component of each vector [`vectors`] builds for one request: 1 for its first
/// text, and so on; so the order of texts across split requests can be checked.
fn assert_in_request_order(out: &[Vec<f32>], sizes: &[usize]) {
    let mut at = 0;
    for &size in sizes {
        for i in 0..size {
            let v = &out[at + i];
            let first_over_second = v[0] / v[1];
            let expected = (i + 1) as f32 / (i + 2) as f32;
            assert!((first_over_second - expected).abs() < 1e-5, "text {} is out of order", at + i);
        }
        at += size;
    }
}

#[test]
fn batches_come_back_in_order_and_normalised() {
    let addr = endpoint(Duration::ZERO, |r| (200, vectors(r, 8)));
    let e = embedder(addr, Duration::from_secs(5));
    assert_eq!(e.model_id(), "http:nomic-embed-text");
    let texts: Vec<String> = (0..70).map(|i| format!("text {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = e.embed(&refs).unwrap();
    assert_eq!(out.len(), 70, "split into batches and joined");
    for v in &out {
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
    }
    // Sorted by `index`: the first vector is the one built for index 0.
    assert!(out[0][0] < out[1][0]);
}

#[test]
fn a_server_that_is_down_is_an_endpoint_error() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let err = embedder(port, Duration::from_secs(2)).embed(&["x"]).unwrap_err();
    assert!(matches!(err, EmbedError::Endpoint(_)), "{err}");
}

#[test]
fn a_slow_server_times_out() {
    let addr = endpoint(Duration::from_secs(3), |r| (200, vectors(r, 8)));
    let err = embedder(addr, Duration::from_millis(300)).embed(&["x"]).unwrap_err();
    assert!(matches!(err, EmbedError::Endpoint(_)), "{err}");
}

#[test]
fn a_change_of_dimension_is_refused() {
    let addr = endpoint(Duration::ZERO, |r| {
        let dims = if r["input"][0] == "first" { 8 } else { 4 };
        (200, vectors(r, dims))
    });
    let e = embedder(addr, Duration::from_secs(5));
    assert_eq!(e.embed(&["first"]).unwrap()[0].len(), 8);
    assert_eq!(e.embed(&["second"]).unwrap_err(), EmbedError::Dimension { expected: 8, got: 4 });
}

#[test]
fn errors_and_garbage_are_endpoint_errors() {
    let failing = endpoint(Duration::ZERO, |_| (500, "{\"error\":\"boom\"}".into()));
    assert!(matches!(embedder(failing, Duration::from_secs(5)).embed(&["x"]), Err(EmbedError::Endpoint(_))));
    let garbage = endpoint(Duration::ZERO, |_| (200, "not json".into()));
    assert!(matches!(embedder(garbage, Duration::from_secs(5)).embed(&["x"]), Err(EmbedError::Endpoint(_))));
    let short = endpoint(Duration::ZERO, |_| (200, "{\"data\":[]}".into()));
    let err = embedder(short, Duration::from_secs(5)).embed(&["x", "y"]).unwrap_err();
    assert!(err.to_string().contains("0 embeddings for 2 texts"), "{err}");
}

#[test]
fn the_batch_size_is_a_setting() {
    static LARGEST: AtomicUsize = AtomicUsize::new(0);
    let addr = endpoint(Duration::ZERO, |r| {
        LARGEST.fetch_max(inputs(r), Ordering::SeqCst);
        (200, vectors(r, 8))
    });
    let e = limited(addr, HttpLimits { timeout: Duration::from_secs(5), batch_size: 3 });
    let texts = texts(7);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = e.embed(&refs).unwrap();
    assert_eq!(out.len(), 7);
    assert_eq!(LARGEST.load(Ordering::SeqCst), 3);
    assert_in_request_order(&out, &[3, 3, 1]);
}

#[test]
fn a_batch_too_large_for_the_endpoint_is_retried_in_halves() {
    static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    // Like a server with a small request-size limit: more than 4 texts is a 413.
    let addr = endpoint(Duration::ZERO, |r| {
        REQUESTS.fetch_add(1, Ordering::SeqCst);
        if inputs(r) > 4 { (413, "{\"error\":\"too large\"}".into()) } else { (200, vectors(r, 8)) }
    });
    let texts = texts(10);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = embedder(addr, Duration::from_secs(5)).embed(&refs).unwrap();
    assert_eq!(out.len(), 10, "every text embedded");
    // 10 → 5 + 5 (both refused) → 2 + 3, 2 + 3.
    assert_in_request_order(&out, &[2, 3, 2, 3]);
    assert_eq!(REQUESTS.load(Ordering::SeqCst), 7);
}

#[test]
fn a_batch_too_slow_for_the_timeout_is_retried_in_halves() {
    // A CPU server: 150 ms per text, so 8 texts take 1.2 s, over the 700 ms allowed.
    let addr = endpoint(Duration::ZERO, |r| {
        std::thread::sleep(Duration::from_millis(150) * u32::try_from(inputs(r)).unwrap());
        (200, vectors(r, 8))
    });
    let e = limited(addr, HttpLimits { timeout: Duration::from_millis(700), batch_size: 8 });
    let texts = texts(8);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let out = e.embed(&refs).unwrap();
    assert_in_request_order(&out, &[4, 4]);
}

#[test]
fn a_text_that_fails_alone_ends_the_call_after_log_n_attempts() {
    static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    let addr = endpoint(Duration::ZERO, |_| {
        REQUESTS.fetch_add(1, Ordering::SeqCst);
        (503, "{\"error\":\"overloaded\"}".into())
    });
    let texts = texts(8);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let err = embedder(addr, Duration::from_secs(5)).embed(&refs).unwrap_err();
    assert!(matches!(&err, EmbedError::Endpoint(m) if m.contains("503") && m.contains("(1 texts)")), "{err}");
    // 8, 4, 2, 1: the first half down to one text, then the call gives up.
    assert_eq!(REQUESTS.load(Ordering::SeqCst), 4);
}

#[test]
fn wrong_answers_are_not_retried() {
    static REQUESTS: AtomicUsize = AtomicUsize::new(0);
    let addr = endpoint(Duration::ZERO, |_| {
        REQUESTS.fetch_add(1, Ordering::SeqCst);
        (400, "{\"error\":\"unknown model\"}".into())
    });
    let texts = texts(8);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert!(embedder(addr, Duration::from_secs(5)).embed(&refs).is_err());
    assert_eq!(REQUESTS.load(Ordering::SeqCst), 1);
}
